import { expect } from 'chai';
import { bearer, removeDir, startTestServer, tempDir, type TestServer } from '../helpers/server.js';
import { JournalFaults } from '../helpers/journal-faults.js';

/** Polls /health until it answers `status` (the journal probes itself every 50-200 ms here). */
async function healthBecomes(t: TestServer, status: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const res = await t.http.get('/health');
    if (res.status === status || Date.now() > deadline) {
      expect(res.status).to.equal(status);
      return;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('a full disk: writes answer 503 and change nothing, /health answers 503 until the journal can be written', function () {
  this.timeout(60_000);
  const faults = new JournalFaults();
  const dataDir = tempDir();
  let t: TestServer;
  let root: string;
  before(function () {
    // Remote mode (WSM_TEST_STORE=sparql): the store has no journal whose writes could fail; the engine keeps the data.
    if (process.env.WSM_TEST_STORE === 'sparql') this.skip();
    // Cluster mode (WSM_TEST_STORE=cluster): the journal is in PostgreSQL; test/cluster/store.test.ts cuts it off.
    if (process.env.WSM_TEST_STORE === 'cluster') this.skip();
  });
  before(async () => {
    // The real service, its journal's file operations failing on demand.
    t = await startTestServer({}, dataDir, { journalFileOps: faults.ops, journalProbeMs: 50, journalProbeMaxMs: 200 });
    root = await t.token('root', { systemAdmin: true });
    const first = await t.http.post('/api/v1/workspaces').set(bearer(root)).send({ slug: 'before', owner: 'root' });
    expect(first.status).to.equal(201);
  });
  after(async () => {
    faults.clear();
    await (t as TestServer | undefined)?.close();
    removeDir(dataDir);
  });

  it('a failed journal write: 503 STORE_UNAVAILABLE with Retry-After, nothing visible, /health 503; the next write after room comes back succeeds', async () => {
    faults.start('write', 5);
    const refused = await t.http.post('/api/v1/workspaces').set(bearer(root)).send({ slug: 'lost', owner: 'root' });
    expect(refused.status).to.equal(503);
    expect(refused.body).to.deep.include({ success: false });
    expect(refused.body.error.code).to.equal('STORE_UNAVAILABLE');
    expect(refused.body.error.message).to.match(/cannot save changes.*ENOSPC.*Nothing was changed/);
    expect(refused.body.error.message, 'no path of the server in the answer').to.not.include(dataDir);
    expect(Number(refused.headers['retry-after'])).to.be.at.least(1);

    // Reads go on and show nothing of the refused write.
    const lost = await t.http.get('/api/v1/workspaces/lost').set(bearer(root));
    expect(lost.status).to.equal(404);
    const list = await t.http.get('/api/v1/workspaces').set(bearer(root));
    expect(list.status).to.equal(200);
    expect(JSON.stringify(list.body.data)).to.include('"before"').and.not.include('"lost"');

    const health = await t.http.get('/health');
    expect(health.status).to.equal(503);
    expect(health.body.success).to.equal(false);
    expect(health.body.error.code).to.equal('STORE_UNAVAILABLE');
    expect(JSON.stringify(health.body), 'health tells nothing of the server').to.not.match(/ENOSPC|journal|\//);
    expect(Number(health.headers['retry-after'])).to.be.at.least(1);

    // Room again: the next write succeeds and /health answers 200.
    faults.clear();
    const after = await t.http.post('/api/v1/workspaces').set(bearer(root)).send({ slug: 'after', owner: 'root' });
    expect(after.status).to.equal(201);
    await healthBecomes(t, 200);
    expect((await t.http.get('/health')).body).to.deep.equal({ success: true, data: { status: 'ok' } });
    expect((await t.http.get('/api/v1/workspaces/after').set(bearer(root))).status).to.equal(200);
    expect((await t.http.get('/api/v1/workspaces/lost').set(bearer(root))).status).to.equal(404);
  });

  it('a failed fsync: 503, nothing visible; /health comes back to 200 by itself once there is room; a restart holds only what was acknowledged', async () => {
    faults.start('datasync');
    const [a, b] = await Promise.all([
      t.http.post('/api/v1/workspaces').set(bearer(root)).send({ slug: 'lost-a', owner: 'root' }),
      t.http.post('/api/v1/workspaces').set(bearer(root)).send({ slug: 'lost-b', owner: 'root' }),
    ]);
    expect([a.status, b.status]).to.deep.equal([503, 503]);
    expect(a.body.error.code).to.equal('STORE_UNAVAILABLE');
    expect((await t.http.get('/health')).status).to.equal(503);
    for (const slug of ['lost-a', 'lost-b']) expect((await t.http.get(`/api/v1/workspaces/${slug}`).set(bearer(root))).status).to.equal(404);

    // No client write needed: the journal probes itself.
    faults.clear();
    await healthBecomes(t, 200);
    const later = await t.http.post('/api/v1/workspaces').set(bearer(root)).send({ slug: 'later', owner: 'root' });
    expect(later.status).to.equal(201);

    await t.close();
    t = await startTestServer({}, dataDir);
    root = await t.token('root', { systemAdmin: true });
    const list = await t.http.get('/api/v1/workspaces').set(bearer(root));
    const slugs = (list.body.data as { slug: string }[]).map((w) => w.slug).sort();
    expect(slugs).to.deep.equal(['after', 'before', 'later']);
  });
});
