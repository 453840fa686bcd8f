import { expect } from 'chai';
import http from 'node:http';
import net from 'node:net';
import { bearer, removeDir, seedWorkspace, startTestServer, type TestServer } from '../helpers/server.js';
import { onRemoteStore, remoteSettings } from '../helpers/remote.js';
import { installMatrices } from '../helpers/installs.js';
import { cuttableProxy } from '../helpers/proxy.js';

/**
 * An HTTP pass-through to the engine that, while `dropping` is set, drops
 * the connection of every request whose query dumps a whole graph (the
 * requests a query worker sends itself for its copy), as an engine that went
 * away right then; every other request goes through.
 */
async function graphDumpDroppingProxy(target: URL): Promise<{ url: (endpoint: string) => string; dropping: boolean; dropped: number; close: () => Promise<void> }> {
  const state = { dropping: false, dropped: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const query = new URLSearchParams(body.toString('utf8')).get('query') ?? '';
      if (state.dropping && query.startsWith('CONSTRUCT { ?s ?p ?o } WHERE { GRAPH <')) {
        state.dropped++;
        req.socket.destroy();
        return;
      }
      const upstream = http.request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      upstream.on('error', () => req.socket.destroy());
      upstream.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return Object.assign(state, {
    url: (endpoint: string) => { const u = new URL(endpoint); u.host = `127.0.0.1:${port}`; return u.href; },
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  });
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

  it('a query worker that cannot reach the engine for its copy of the data answers 503 STORE_UNAVAILABLE, naming nothing of the engine, and the next query loads the copy', async () => {
    const settings = remoteSettings()!;
    const dumps = await graphDumpDroppingProxy(new URL(settings.queryUrl));
    try {
      const s = await startTestServer({ WSM_BASE_IRI: 'https://outage-dump.example/', WSM_SPARQL_QUERY_URL: dumps.url(settings.queryUrl), WSM_SPARQL_UPDATE_URL: dumps.url(settings.updateUrl) });
      try {
        const { tokens } = await seedWorkspace(s, 'acme');
        const M = 'https://example.org/matrices/reached';
        await installMatrices(s, tokens.owner, 'acme', 'reached', [{
          uri: M, turtle: `<${M}> a <https://poliglot.io/os/spec/matrix#Matrix> ; <http://www.w3.org/2000/01/rdf-schema#label> "Reached" .`,
        }]);
        const created = await s.http.post('/api/v1/commands/acme').set(bearer(tokens.owner))
          .send({ alias: 'labels', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT { ?s <http://www.w3.org/2000/01/rdf-schema#label> ?l } WHERE { ?s <http://www.w3.org/2000/01/rdf-schema#label> ?l }' });
        expect(created.status, JSON.stringify(created.body)).to.equal(200);

        dumps.dropping = true;
        const during = await s.http.post('/api/v1/commands/acme/alias/labels/execute').set(bearer(tokens.member));
        expect(dumps.dropped, 'the worker asked the engine for the matrix graph').to.be.at.least(1);
        expect(during.status, JSON.stringify(during.body)).to.equal(503);
        expect(during.body.error.code).to.equal('STORE_UNAVAILABLE');
        expect(Number(during.headers['retry-after'])).to.be.at.least(1);
        expect(JSON.stringify(during.body), 'nothing of the engine in the answer').to.not.match(/sparql|virtuoso|socket|fetch failed|127\.0\.0\.1/i);

        dumps.dropping = false;
        const after = await s.http.post('/api/v1/commands/acme/alias/labels/execute').set(bearer(tokens.member)).set('Accept', 'application/n-triples');
        expect(after.status, after.text.slice(0, 300)).to.equal(200);
        expect(after.text).to.include(`<${M}> <http://www.w3.org/2000/01/rdf-schema#label> "Reached" .`);
      } finally {
        await s.close();
        removeDir(s.dataDir);
      }
    } finally {
      await dumps.close();
    }
  });
});
