import { expect } from 'chai';
import { bearer, removeDir, startTestServer, tempDir, type TestServer } from '../helpers/server.js';
import { ThreadedStore } from '../../src/store/embedded/threaded-store.js';
import { sample } from '../helpers/metrics.js';

/*
 * The embedded store's thread stops (as when its engine runs out of memory):
 * the service answers 503 with Retry-After meanwhile, restarts the thread,
 * which recovers the data directory from its snapshot and journal, and
 * answers again with every acknowledged write.
 */
describe('the store\'s thread stops: 503 meanwhile, then the service restarts it and answers with every acknowledged write', function () {
  this.timeout(60_000);
  const dataDir = tempDir();
  let t: TestServer;
  before(function () {
    // Remote mode (WSM_TEST_STORE=sparql): the engine is another process; the service holds no store thread.
    if (process.env.WSM_TEST_STORE === 'sparql') this.skip();
    // Cluster mode (WSM_TEST_STORE=cluster): the replica runs on the event loop's thread; there is no store thread.
    if (process.env.WSM_TEST_STORE === 'cluster') this.skip();
  });
  after(async () => {
    await (t as TestServer | undefined)?.close();
    removeDir(dataDir);
  });

  it('answers 503 while the thread is down, then 200 with the workspaces written before, and takes writes again', async () => {
    t = await startTestServer({}, dataDir);
    const store = t.server.services.store;
    expect(store).to.be.instanceOf(ThreadedStore);
    const root = await t.token('root', { systemAdmin: true });
    for (const slug of ['one', 'two']) expect((await t.http.post('/api/v1/workspaces').set(bearer(root)).send({ slug, owner: 'root' })).status).to.equal(201);

    const stops = async () => sample((await t.http.get('/metrics').set(bearer(root))).text, 'wsm_store_thread_stops_total');
    const stopsBefore = await stops();

    await (store as ThreadedStore).stopThreadAsCrash();
    const health = await t.http.get('/health');
    expect(health.status).to.equal(503);
    expect(JSON.stringify(health.body), 'no path of the server in the answer').to.not.include(dataDir);
    const read = await t.http.get('/api/v1/workspaces/one').set(bearer(root));
    expect(read.status).to.equal(503);
    expect(read.body.error.code).to.equal('STORE_UNAVAILABLE');
    expect(Number(read.headers['retry-after'])).to.be.at.least(1);

    for (const deadline = Date.now() + 30_000; (await t.http.get('/health')).status !== 200 && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 50));
    expect((await t.http.get('/health')).status).to.equal(200);
    const list = await t.http.get('/api/v1/workspaces').set(bearer(root));
    expect(list.status).to.equal(200);
    expect(JSON.stringify(list.body.data)).to.include('"one"').and.include('"two"');
    expect((await t.http.post('/api/v1/workspaces').set(bearer(root)).send({ slug: 'three', owner: 'root' })).status).to.equal(201);
    expect(await stops() - stopsBefore, 'operators see the stop in /metrics').to.equal(1);

    // After a restart of the whole service the three are there.
    await t.close();
    t = await startTestServer({}, dataDir);
    const again = await t.http.get('/api/v1/workspaces').set(bearer(root));
    expect(JSON.stringify(again.body.data)).to.include('"one"').and.include('"two"').and.include('"three"');
  });
});
