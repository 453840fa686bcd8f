import { expect } from 'chai';
import { startTestServer, removeDir, type TestServer } from '../helpers/server.js';

describe('the operations listener (WSM_OPS_PORT)', () => {
  let t: TestServer;
  let ops: string;

  before(async () => {
    t = await startTestServer({ WSM_OPS_PORT: '0' });
    ops = t.server.opsUrl!;
  });
  after(async () => {
    await t.close();
    removeDir(t.dataDir);
  });

  it('listens on a port of its own and answers /health as the API port does', async () => {
    expect(ops).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(ops).not.to.equal(t.url);
    const [here, there] = await Promise.all([fetch(`${ops}/health`), fetch(`${t.url}/health`)]);
    expect(here.status).to.equal(200);
    expect(await here.json()).to.deep.equal(await there.json());
  });

  it('answers /metrics to a system administrator only, as the API port does', async () => {
    const root = await t.token('root', { systemAdmin: true });
    const someone = await t.token('someone');
    const metrics = await fetch(`${ops}/metrics`, { headers: { Authorization: `Bearer ${root}` } });
    expect(metrics.status).to.equal(200);
    expect(await metrics.text()).to.match(/^wsm_http_requests_total/m);
    expect((await fetch(`${ops}/metrics`, { headers: { Authorization: `Bearer ${someone}` } })).status).to.equal(403);
    expect((await fetch(`${ops}/metrics`)).status).to.equal(401);
  });

  it('answers nothing else: 404 with the error envelope, for the API, the console and unknown paths alike', async () => {
    const root = await t.token('root', { systemAdmin: true });
    for (const p of ['/api/v1/workspaces', '/', '/docs', '/healthz', '/health/x', '/metrics/../api/v1/users']) {
      const res = await fetch(`${ops}${p}`, { headers: { Authorization: `Bearer ${root}` } });
      expect(res.status, p).to.equal(404);
      expect(res.headers.get('x-content-type-options'), p).to.equal('nosniff');
      expect(res.headers.get('content-security-policy'), p).to.equal((await fetch(`${t.url}/health`)).headers.get('content-security-policy'));
      const body = await res.json() as { success: boolean; error: { code: string; message: string } };
      expect(body.success, p).to.equal(false);
      expect(body.error.code, p).to.equal('NOT_FOUND');
      expect(body.error.message, p).to.match(/answers \/health and \/metrics only/);
    }
    // The API port still answers the API.
    expect((await fetch(`${t.url}/api/v1/workspaces`, { headers: { Authorization: `Bearer ${root}` } })).status).to.equal(200);
  });

  it('is not opened unless set', async () => {
    const plain = await startTestServer();
    try {
      expect(plain.server.opsUrl).to.equal(undefined);
    } finally {
      await plain.close();
      removeDir(plain.dataDir);
    }
  });
});
