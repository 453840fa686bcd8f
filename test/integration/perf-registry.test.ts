import { expect } from 'chai';
import http from 'node:http';
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { tinyPackage } from '../helpers/packages.js';
import { waitForCommand } from '../helpers/lifecycle.js';

/** P5's latestVersion: concurrent reads share one registry request, and nothing outlives it. */
describe('packages: registry lookups of reads', function () {
  this.timeout(60_000);
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  let registry: http.Server;
  let versionLists = 0;
  const versions = ['1.0.0'];
  before(async () => {
    const archive = await tinyPackage({ name: 'shared', version: '1.0.0' });
    const checksum = createHash('sha256').update(archive).digest('hex');
    registry = http.createServer((req, res) => {
      if (req.url === '/api/v1/registry/packages/pub/shared') {
        versionLists++;
        const body = JSON.stringify({ versions: versions.map((version) => ({ version, engineVersion: '>=1.0 <2.0', publishedAt: null })) });
        setTimeout(() => res.writeHead(200, { 'Content-Type': 'application/json' }).end(body), 200); // a slow registry
        return;
      }
      if (req.url === '/api/v1/registry/packages/pub/shared/1.0.0/archive') {
        res.writeHead(200, { 'Content-Type': 'application/gzip', 'X-Archive-Checksum': `sha256:${checksum}` }).end(archive);
        return;
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => registry.listen(0, '127.0.0.1', resolve));
    t = await startTestServer({ WSM_REGISTRY: `http://127.0.0.1:${(registry.address() as AddressInfo).port}` });
    ({ tokens } = await seedWorkspace(t, 'acme'));
    const res = await t.http.post('/api/v1/packages/acme/registry/pub/shared/install').set(bearer(tokens.owner)).send({});
    expect(res.status).to.equal(202);
    expect((await waitForCommand(t, tokens.owner, 'acme', res.body.data.id)).status).to.equal('completed');
  });
  after(async () => { await t.close(); removeDir(t.dataDir); registry.close(); });

  it('shares one request among concurrent reads, and the next read sees a new version', async () => {
    const p5 = () => t.http.get('/api/v1/packages/acme/shared').set(bearer(tokens.member));
    versionLists = 0;
    const answers = await Promise.all(Array.from({ length: 8 }, p5));
    for (const a of answers) expect(a.body.data).to.include({ currentVersion: '1.0.0', latestVersion: '1.0.0', updateAvailable: false });
    expect(versionLists).to.be.within(1, 4);

    versions.push('1.1.0');
    const later = await p5();
    expect(later.body.data).to.include({ latestVersion: '1.1.0', updateAvailable: true });
  });
});
