import { expect } from 'chai';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { getPriority } from 'node:os';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { WORKER_NICE } from '../../src/sandbox/protocol.js';

/**
 * Issue 16, acceptance 3: preparing a query's data never holds the event
 * loop. Loading a large workspace into a query worker keeps a core busy for
 * seconds; on a machine with few cores the event loop must still get its
 * turns, so a query worker's thread runs at a lower priority than the
 * service's (Linux: a niceness per thread).
 */

/** The niceness of each thread of this process (the test server runs in it), by thread id. */
function threadNiceness(): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      // Fields after the command name: state is field 3, niceness field 19.
      out.set(Number(tid), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]));
    } catch {
      // The thread ended meanwhile.
    }
  }
  return out;
}

describe('query sandbox: workers give way to the event loop', function () {
  this.timeout(120_000);
  let t: TestServer;

  before(function () {
    if (!existsSync('/proc/thread-self')) this.skip();
  });
  after(async () => {
    if (t) {
      await t.close();
      removeDir(t.dataDir);
    }
  });

  it('runs query workers at a lower priority than the service\'s event loop', async () => {
    t = await startTestServer();
    const { tokens } = await seedWorkspace(t, 'acme');
    const created = await t.http.post('/api/v1/commands/acme').set(bearer(tokens.owner))
      .send({ alias: 'anything', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT WHERE { ?s ?p ?o } LIMIT 1' });
    expect(created.status).to.equal(200);
    const before = threadNiceness();
    const res = await t.http.post('/api/v1/commands/acme/alias/anything/execute').set(bearer(tokens.member));
    expect(res.status, JSON.stringify(res.body).slice(0, 300)).to.equal(200);
    const after = threadNiceness();
    const started = [...after].filter(([tid]) => !before.has(tid));
    expect(started.map(([, nice]) => nice), 'threads started for the query').to.include(WORKER_NICE);
    expect(after.get(process.pid), 'the event loop\'s thread').to.equal(getPriority());
    expect(getPriority()).to.be.below(WORKER_NICE);
  });
});
