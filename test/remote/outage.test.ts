import { expect } from 'chai';
import net from 'node:net';
import { bearer, removeDir, seedWorkspace, startTestServer, type TestServer } from '../helpers/server.js';
import { onRemoteStore, remoteSettings } from '../helpers/remote.js';

/**
 * A TCP pass-through to the engine that the test can cut (refusing
 * connections and dropping those open, as an engine that went down) and
 * bring back on the same port.
 */
async function cuttableProxy(target: URL): Promise<{ port: number; cut: () => Promise<void>; restore: () => Promise<void>; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  let server: net.Server | null = null;
  let port = 0;
  const listen = () => new Promise<void>((resolve, reject) => {
    server = net.createServer((client) => {
      const upstream = net.connect(Number(target.port), target.hostname);
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
        s.on('error', () => { client.destroy(); upstream.destroy(); });
      }
      client.pipe(upstream).pipe(client);
    });
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      port = (server!.address() as net.AddressInfo).port;
      resolve();
    });
  });
  const stop = () => new Promise<void>((resolve) => {
    for (const s of sockets) s.destroy();
    if (!server) { resolve(); return; }
    server.close(() => resolve());
    server = null;
  });
  await listen();
  return { port, cut: stop, restore: listen, close: stop };
}

describe('service on the remote store when the engine cannot be reached', function () {
  this.timeout(120_000);
  let t: TestServer | undefined;
  let proxy: Awaited<ReturnType<typeof cuttableProxy>> | undefined;

  onRemoteStore();
  after(async () => {
    if (t) { await t.close(); removeDir(t.dataDir); }
    await proxy?.close();
  });

  it('answers 503 STORE_UNAVAILABLE with Retry-After, naming nothing of the engine, /health 503, and recovers by itself once the engine is back', async () => {
    const settings = remoteSettings()!;
    const engine = new URL(settings.queryUrl);
    proxy = await cuttableProxy(engine);
    const through = (url: string) => { const u = new URL(url); u.host = `127.0.0.1:${proxy!.port}`; return u.href; };
    t = await startTestServer({ WSM_BASE_IRI: 'https://outage.example/', WSM_SPARQL_QUERY_URL: through(settings.queryUrl), WSM_SPARQL_UPDATE_URL: through(settings.updateUrl) });
    const { tokens } = await seedWorkspace(t, 'acme');
    expect((await t.http.get('/health')).status).to.equal(200);

    await proxy.cut();
    const write = await t.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug: 'during', owner: 'root' });
    expect(write.status, JSON.stringify(write.body)).to.equal(503);
    expect(write.body.error.code).to.equal('STORE_UNAVAILABLE');
    expect(Number(write.headers['retry-after'])).to.be.at.least(1);
    const read = await t.http.get('/api/v1/workspaces/nothing-here').set(bearer(tokens.root));
    expect(read.status, JSON.stringify(read.body)).to.equal(503);
    for (const res of [write, read]) {
      const text = JSON.stringify(res.body);
      expect(text, 'nothing of the engine in the answer').to.not.include(String(proxy.port)).and.not.include(engine.hostname).and.not.match(/sparql|virtuoso|ECONNREFUSED|fetch failed/i);
    }
    const health = await t.http.get('/health');
    expect(health.status).to.equal(503);
    expect(Number(health.headers['retry-after'])).to.be.at.least(1);
    expect(JSON.stringify(health.body)).to.not.match(/sparql|virtuoso|ECONNREFUSED|127\.0\.0\.1/i);

    await proxy.restore();
    const deadline = Date.now() + 30_000;
    let status = 0;
    while (Date.now() < deadline && (status = (await t.http.get('/health')).status) !== 200) await new Promise((r) => setTimeout(r, 100));
    expect(status, '/health comes back by itself, with no other request').to.equal(200);
    const after = await t.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug: 'after', owner: 'root' });
    expect(after.status, JSON.stringify(after.body)).to.equal(201);
    const lost = await t.http.get('/api/v1/workspaces/during').set(bearer(tokens.root));
    expect(lost.status, 'the refused write changed nothing').to.equal(404);
  });
});
