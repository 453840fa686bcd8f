import { expect } from 'chai';
import http from 'node:http';
import { bearer, removeDir, startTestServer, type TestServer } from '../helpers/server.js';
import { sampleMatrixTurtle, tinyPackage } from '../helpers/packages.js';

const BASE = 'https://workspaces.local/';

/** A valid package whose one matrix holds about `triples` triples (one label per node). */
async function largePackage(name: string, triples: number): Promise<Buffer> {
  const uri = `https://example.org/packages/${name}/main`;
  const lines = [sampleMatrixTurtle(uri)];
  for (let i = 0; i < triples; i++) lines.push(`<${uri}#n${i}> <http://www.w3.org/2000/01/rdf-schema#label> "Node ${i}" .`);
  return tinyPackage({ name, matrices: [{ name: 'main', uri, turtle: lines.join('\n') }] });
}

/**
 * POSTs `archive` as the multipart `file` of a publish; `sent` runs once the
 * whole request is written (the service has it, or is reading it).
 */
function publishRaw(t: TestServer, token: string, path: string, archive: Buffer, sent: () => void): Promise<{ status: number; body: { success: boolean; data?: unknown; error?: { code: string; message: string } } }> {
  const boundary = `----wsm${Date.now()}`;
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="p.tgz"\r\nContent-Type: application/gzip\r\n\r\n`),
    archive,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return new Promise((resolve, reject) => {
    const req = http.request(`${t.url}${path}`, {
      method: 'POST',
      headers: { ...bearer(token), 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': body.length },
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) }));
    });
    req.on('error', reject);
    req.on('finish', sent);
    req.end(body);
  });
}

/** The publish check (unpack, Turtle, SHACL) runs in the deployment workers, and refuses what installs refuse. */
describe('publish check', function () {
  this.timeout(300_000);
  let t: TestServer;
  let alice: string;
  const publish = (name: string, archive: Buffer, query = '') =>
    t.http.post(`/api/v1/registry/publishers/acme/packages/${name}/versions${query}`).set(bearer(alice))
      .attach('file', archive, { filename: `${name}.tgz`, contentType: 'application/gzip' });

  before(async () => {
    t = await startTestServer({ WSM_REGISTRY: 'self', WSM_BASE_IRI: BASE });
    alice = await t.token('alice');
    const root = await t.token('root', { systemAdmin: true });
    expect((await t.http.post('/api/v1/registry/publishers').set(bearer(root)).send({ slug: 'acme', owners: ['alice'] })).status).to.equal(201);
  });
  after(async () => {
    await t.close();
    removeDir(t.dataDir);
  });

  it('refuses packages using the service\'s own IRIs with 422 and the report, as installs do, and stores nothing', async () => {
    const uri = 'https://example.org/packages/forged/main';
    const cases: Array<[string, Buffer, RegExp]> = [
      ['the service\'s vocabulary', await tinyPackage({ name: 'forged', matrices: [{ name: 'main', uri,
        turtle: `${sampleMatrixTurtle(uri)}\n<${uri}#x> a <https://w3id.org/wsm/ns#LifecycleCommand> .\n` }] }), /wsm:\)?; packages and extensions may not use it|service's own vocabulary/],
      ['a resource IRI of the service', await tinyPackage({ name: 'forged', matrices: [{ name: 'main', uri,
        turtle: `${sampleMatrixTurtle(uri)}\n<${BASE}workspaces/x/iam> <https://example.org/p> "x" .\n` }] }), /service's resource IRIs/],
      ['a matrix URI equal to a service graph', await tinyPackage({ name: 'forged', matrices: [{ name: 'main', uri: `${BASE}registry`,
        turtle: sampleMatrixTurtle(`${BASE}registry`) }] }), new RegExp(`matrix URI <${BASE}registry> belongs to the service's resource IRIs`)],
    ];
    for (const [what, archive, message] of cases) {
      for (const query of ['?dryRun=true', '']) {
        const res = await publish('forged', archive, query);
        expect(res.status, `${what}${query}: ${JSON.stringify(res.body).slice(0, 500)}`).to.equal(422);
        expect(res.body.error.code).to.equal('VALIDATION_FAILED');
        const report = res.body.error.details.report;
        expect(report.conforms).to.equal(false);
        expect(report.violationCount, what).to.be.greaterThan(0);
        expect(report.violations.map((v: { message: string }) => v.message).join(' | '), what).to.match(message);
      }
    }
    expect((await t.http.get('/api/v1/registry/packages/acme/forged')).status).to.equal(404);
    // The same package without them publishes.
    const clean = await publish('forged', await tinyPackage({ name: 'forged', matrices: [{ name: 'main', uri, turtle: sampleMatrixTurtle(uri) }] }));
    expect(clean.status, JSON.stringify(clean.body)).to.equal(201);
  });

  it('still refuses broken Turtle, naming each file', async () => {
    const archive = await tinyPackage({ name: 'broken', matrices: [
      { name: 'one', uri: 'https://example.org/b1', turtle: '<a> <b> .' },
      { name: 'two', uri: 'https://example.org/b2', turtle: '<http://a/%zz> <http://b> <http://c> .' },
    ] });
    const res = await publish('broken', archive);
    expect(res.status, JSON.stringify(res.body)).to.equal(422);
    const violations = res.body.error.details.report.violations as Array<{ path: string; message: string }>;
    expect(violations.map((v) => v.path)).to.deep.equal(['one/assembly.ttl', 'two/assembly.ttl']);
    expect(violations[0]!.message).to.match(/Turtle syntax error/);
    expect(violations[1]!.message).to.match(/http:\/\/a\/%zz/);
  });

  it('checks a large package off the event loop: /health answers, one request after another, while a dry-run publish is in flight', async () => {
    const archive = await largePackage('large', 60_000);
    let inFlight = true;
    let written = () => {};
    const requestWritten = new Promise<void>((resolve) => { written = resolve; });
    const answered = publishRaw(t, alice, '/api/v1/registry/publishers/acme/packages/large/versions?dryRun=true', archive, () => written())
      .finally(() => { inFlight = false; });
    // From the moment the whole request is written, /health is asked one request after another until the publish answers.
    await requestWritten;
    const health: number[] = [];
    do health.push((await t.http.get('/health')).status); while (inFlight);
    const res = await answered;
    expect(res.status, JSON.stringify(res.body).slice(0, 500)).to.equal(200);
    expect(res.body).to.deep.equal({ success: true, data: null });
    expect(health, 'no /health answer while the publish was in flight').to.not.be.empty;
    expect(health.every((status) => status === 200)).to.equal(true);
    // How long /health waits meanwhile (the check on the event loop held it for seconds) is measured by
    // bench/health-under-attack.ts, not asserted here.
  });
});
