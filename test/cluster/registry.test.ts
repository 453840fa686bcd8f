import { expect } from 'chai';
import { bearer, removeDir, startTestServer, tempDir, type TestServer } from '../helpers/server.js';
import { freshClusterUrl, requirePostgres } from '../helpers/cluster.js';
import { tinyPackage } from '../helpers/packages.js';

/** The hosted registry on the cluster: archives live in PostgreSQL, so every instance serves every published version. */
describe('the hosted registry on two cluster instances (WSM_REGISTRY=self)', function () {
  this.timeout(300_000);
  const instances: TestServer[] = [];
  const dirs: string[] = [];

  before(async function () {
    requirePostgres(this);
    const url = await freshClusterUrl();
    for (let i = 0; i < 2; i++) {
      dirs.push(tempDir());
      instances.push(await startTestServer({ WSM_STORE: 'cluster', WSM_POSTGRES_URL: url, WSM_REGISTRY: 'self' }, dirs[i]));
    }
  });
  after(async () => {
    for (const t of instances) await t.close();
    for (const dir of dirs) removeDir(dir);
  });

  const download = async (t: TestServer, path: string) => {
    const res = await t.http.get(path).buffer(true).parse((answer, cb) => {
      const chunks: Buffer[] = [];
      answer.on('data', (c: Buffer) => chunks.push(c));
      answer.on('end', () => cb(null, Buffer.concat(chunks)));
    });
    return { status: res.status, bytes: res.body as Buffer };
  };

  it('a version published on one instance is downloaded, byte for byte, from the other; the examples are published once', async () => {
    const [a, b] = instances as [TestServer, TestServer];
    const root = await a.token('root', { systemAdmin: true });
    const alice = await a.token('alice');
    expect((await a.http.post('/api/v1/registry/publishers').set(bearer(root)).send({ slug: 'acme', owners: ['alice'] })).status).to.equal(201);
    const archive = await tinyPackage({ name: 'shared', version: '1.0.0' });
    const published = await a.http.post('/api/v1/registry/publishers/acme/packages/shared/versions').set(bearer(alice)).attach('file', archive, 'shared.tgz');
    expect(published.status, JSON.stringify(published.body)).to.equal(201);
    const got = await download(b, '/api/v1/registry/packages/acme/shared/1.0.0/archive');
    expect(got.status).to.equal(200);
    expect(Buffer.compare(got.bytes, archive)).to.equal(0);
    const examples = (await b.http.get('/api/v1/registry/packages/examples/project-tracking')).body.data as { versions: Array<{ version: string }> };
    const versions = examples.versions.map((v) => v.version);
    expect(versions.length).to.be.greaterThan(0);
    expect(new Set(versions).size, versions.join(', ')).to.equal(versions.length);
  });
});
