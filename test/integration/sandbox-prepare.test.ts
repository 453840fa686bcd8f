import { expect } from 'chai';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { installMatrices } from '../helpers/installs.js';

/**
 * Issue 16, acceptance 3: a query's time limit counts the query, not the
 * preparation of its data (loading the workspace's graphs into a worker).
 * With a time limit far below the time a worker needs to load 120,000
 * triples, the first execution after an install still answers.
 */

const M = 'https://example.org/matrices/prepared';
const THINGS = 60_000;

function matrix(): string {
  const lines = [`<${M}> a <https://poliglot.io/os/spec/matrix#Matrix> ; <http://www.w3.org/2000/01/rdf-schema#label> "Prepared" .`];
  // Plain things, not roles: what the test needs is triples to load, not an install that derives roles.
  for (let i = 0; i < THINGS; i++) {
    lines.push(`<${M}#thing${i}> a <https://example.org/Thing> ; <http://www.w3.org/2000/01/rdf-schema#label> "Thing ${i}" .`);
  }
  return lines.join('\n');
}

describe('query sandbox: preparing the data is not the query', function () {
  this.timeout(180_000);
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  // Below the time the worker takes to load the 120,000 triples (about 800 ms with its code bundled, on an idle 2-core machine).
  const TIMEOUT = 400;

  before(async () => {
    t = await startTestServer({ WSM_QUERY_TIMEOUT_MS: String(TIMEOUT) });
    ({ tokens } = await seedWorkspace(t, 'acme'));
    const res = await t.http.post('/api/v1/commands/acme').set(bearer(tokens.owner))
      .send({ alias: 'one-thing', scriptType: 'CONSTRUCT', scriptContent: `CONSTRUCT WHERE { <${M}#thing7> ?p ?o }` });
    expect(res.status).to.equal(200);
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('answers the first executions after an install although loading the data takes longer than the time limit', async () => {
    await installMatrices(t, tokens.owner, 'acme', 'prepared', [{ uri: M, turtle: matrix() }]);
    const loadsBefore = t.server.services.sandbox.stats().loads;
    const started = Date.now();
    const answers = await Promise.all(Array.from({ length: 5 }, () =>
      t.http.post('/api/v1/commands/acme/alias/one-thing/execute').set(bearer(tokens.member))));
    const elapsed = Date.now() - started;
    for (const res of answers) {
      expect(res.status, JSON.stringify(res.body).slice(0, 300)).to.equal(200);
      expect(res.body.data).to.include({ tripleCount: 2, truncated: false });
    }
    expect(t.server.services.sandbox.stats().loads).to.be.above(loadsBefore);
    // Over 100,000 quads a view keeps one worker: one copy of its data, however many queries arrive.
    expect(t.server.services.sandbox.stats().workers).to.equal(1);
    if (process.env.WSM_TEST_VERBOSE) console.log({ elapsed, stats: t.server.services.sandbox.stats() });
    // Loading 120,000 triples into a worker takes longer than the time the queries were given.
    expect(elapsed).to.be.above(TIMEOUT);
  });
});
