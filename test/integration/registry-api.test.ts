import { createHash } from 'node:crypto';
import { expect } from 'chai';
import supertest from 'supertest';
import { bearer, removeDir, startTestServer, tempDir, type TestServer } from '../helpers/server.js';
import { tinyPackage, sampleMatrixTurtle } from '../helpers/packages.js';

/** The registry API the service hosts (docs/packages.md), over HTTP. */
describe('hosted registry API', function () {
  this.timeout(120_000);
  let t: TestServer;
  let root: string;
  let alice: string;
  let bob: string;
  let admin: string;

  const publish = (token: string, slug: string, name: string, archive: Buffer, query = '') =>
    t.http.post(`/api/v1/registry/publishers/${slug}/packages/${name}/versions${query}`).set(bearer(token))
      .attach('file', archive, { filename: `${name}.tgz`, contentType: 'application/gzip' });
  const anonymous = () => supertest(t.url);

  before(async () => {
    t = await startTestServer({ WSM_REGISTRY: 'self' });
    root = await t.token('root', { systemAdmin: true });
    alice = await t.token('alice');
    bob = await t.token('bob');
    admin = await t.token('admin');
    const created = await t.http.post('/api/v1/registry/publishers').set(bearer(root)).send({ slug: 'acme', name: 'Acme Corp', owners: ['alice'] });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
  });
  after(async () => {
    await t.close();
    removeDir(t.dataDir);
  });

  describe('publishers', () => {
    it('are created by system administrators only: 201, 409 on a taken slug, 400 on a bad one, 403, 401', async () => {
      const made = await t.http.post('/api/v1/registry/publishers').set(bearer(root)).send({ slug: 'globex', owners: ['bob', 'alice'] });
      expect(made.status).to.equal(201);
      expect(made.body.data).to.include({ slug: 'globex', name: 'globex' });
      expect(made.body.data.id).to.match(/^[0-9a-f-]{36}$/);
      const taken = await t.http.post('/api/v1/registry/publishers').set(bearer(root)).send({ slug: 'globex' });
      expect(taken.status).to.equal(409);
      expect(taken.body.error.message).to.contain('globex');
      const bad = await t.http.post('/api/v1/registry/publishers').set(bearer(root)).send({ slug: 'Not A Slug' });
      expect(bad.status).to.equal(400);
      expect(bad.body.error.message).to.contain('lower-case slug');
      expect((await t.http.post('/api/v1/registry/publishers').set(bearer(root)).send({ slug: 'me' })).status).to.equal(400);
      expect((await t.http.post('/api/v1/registry/publishers').set(bearer(alice)).send({ slug: 'mine' })).status).to.equal(403);
      const anon = await anonymous().post('/api/v1/registry/publishers').send({ slug: 'mine' });
      expect(anon.status).to.equal(401);
      expect(anon.headers['www-authenticate']).to.equal('Bearer');
    });

    it('publishers/me answers the first publisher the caller owns, 404 when none', async () => {
      const me = await t.http.get('/api/v1/registry/publishers/me').set(bearer(alice));
      expect(me.status).to.equal(200);
      expect(me.body.data).to.include({ slug: 'acme', name: 'Acme Corp' });
      expect(Object.keys(me.body.data).sort()).to.deep.equal(['createdAt', 'id', 'name', 'slug']);
      expect((await t.http.get('/api/v1/registry/publishers/me').set(bearer(await t.token('nobody')))).status).to.equal(404);
      expect((await anonymous().get('/api/v1/registry/publishers/me')).status).to.equal(401);
    });

    it('the first start created "examples", owned by admin, holding the example packages', async () => {
      const me = await t.http.get('/api/v1/registry/publishers/me').set(bearer(admin));
      expect(me.body.data.slug).to.equal('examples');
      const pt = await anonymous().get('/api/v1/registry/packages/examples/project-tracking');
      expect(pt.status).to.equal(200);
      expect(pt.body.data.versions.map((v: { version: string }) => v.version).sort()).to.deep.equal(['1.0.0', '1.1.0']);
      const ir = await anonymous().get('/api/v1/registry/packages/examples/incident-response');
      expect(ir.body.data.versions[0].dependencies).to.deep.equal([{ publisher: 'examples', name: 'project-tracking', versionRange: '>=1.0 <2.0' }]);
    });
  });

  describe('publishing', () => {
    it('dry run checks and stores nothing; then 201; the same bytes 200; other bytes 409', async () => {
      const v1 = await tinyPackage({ name: 'widgets', version: '1.0.0', description: 'Widgets' });
      const dry = await publish(alice, 'acme', 'widgets', v1, '?dryRun=true');
      expect(dry.status, JSON.stringify(dry.body)).to.equal(200);
      expect(dry.body).to.deep.equal({ success: true, data: null });
      expect((await anonymous().get('/api/v1/registry/packages/acme/widgets')).status).to.equal(404);

      const made = await publish(alice, 'acme', 'widgets', v1);
      expect(made.status, JSON.stringify(made.body)).to.equal(201);
      const record = made.body.data;
      expect(record).to.include({ name: 'widgets', version: '1.0.0', engineVersion: '>=1.0 <2.0', description: 'Widgets', yanked: false, yankReason: null, publishedBy: 'alice' });
      expect(record.publisher).to.deep.equal({ slug: 'acme' });
      expect(record.checksum).to.equal(`sha256:${createHash('sha256').update(v1).digest('hex')}`);
      expect(record.size).to.equal(v1.length);
      expect(record.matrices).to.deep.equal([{ name: 'main', uri: 'https://example.org/packages/widgets/main' }]);

      const again = await publish(alice, 'acme', 'widgets', v1);
      expect(again.status).to.equal(200);
      expect(again.body.data).to.deep.equal(record);

      const other = await tinyPackage({ name: 'widgets', version: '1.0.0', description: 'Different bytes' });
      const clash = await publish(alice, 'acme', 'widgets', other);
      expect(clash.status).to.equal(409);
      expect(clash.body.error.message).to.match(/1\.0\.0 of "acme\/widgets" is already published with other content/);
      // A dry run says so as well.
      expect((await publish(alice, 'acme', 'widgets', other, '?dryRun=true')).status).to.equal(409);
      const view = await anonymous().get('/api/v1/registry/packages/acme/widgets');
      expect(view.body.data.versions).to.have.length(1);
      expect(view.body.data.versions[0].description).to.equal('Widgets');
    });

    it('is for owners only (403), of an existing publisher (404), with a file (400)', async () => {
      const archive = await tinyPackage({ name: 'gadgets' });
      const denied = await publish(bob, 'acme', 'gadgets', archive);
      expect(denied.status).to.equal(403);
      expect(denied.body.error.message).to.contain('owners of publisher "acme"');
      // Who the owners are is not told to a non-owner.
      expect(denied.text).not.to.contain('alice');
      expect((await publish(bob, 'acme', 'gadgets', archive, '?dryRun=true')).text).not.to.contain('alice');
      expect((await publish(root, 'acme', 'gadgets', archive)).status).to.equal(403);
      expect((await publish(alice, 'nosuch', 'gadgets', archive)).status).to.equal(404);
      const noFile = await t.http.post('/api/v1/registry/publishers/acme/packages/gadgets/versions').set(bearer(alice)).field('x', 'y');
      expect(noFile.status).to.equal(400);
      expect((await publish(alice, 'acme', 'gadgets', archive, '?dryRun=maybe')).status).to.equal(400);
      expect((await anonymous().post('/api/v1/registry/publishers/acme/packages/gadgets/versions').attach('file', archive, 'x.tgz')).status).to.equal(401);
      expect((await anonymous().get('/api/v1/registry/packages/acme/gadgets')).status).to.equal(404);
    });

    it('answers 422 with the validation report for every kind of check, and stores nothing', async () => {
      const cases: Array<[string, Buffer, string, RegExp]> = [
        ['a name other than the path', await tinyPackage({ name: 'other' }), 'gizmos', /manifest name "other" is not "gizmos"/],
        ['not a gzip', Buffer.from('hello, not an archive'), 'gizmos', /gzip/],
        ['an invalid manifest', await tinyPackage({ name: 'gizmos', engineVersion: '>=1.0.0' }), 'gizmos', /patch number/],
        ['a bad dependency range', await tinyPackage({ name: 'gizmos', manifest: {
          name: 'gizmos', version: '1.0.0', engineVersion: '>=1.0', dependencies: [{ publisher: 'acme', name: 'widgets', versionRange: 'banana' }],
          matrices: [{ name: 'main', path: 'main/assembly.ttl', uri: 'https://example.org/packages/gizmos/main' }] } }), 'gizmos', /versionRange "banana"/],
        ['broken Turtle', await tinyPackage({ name: 'gizmos', matrices: [{ name: 'main', uri: 'https://example.org/g', turtle: '<a> <b> .' }] }), 'gizmos', /Turtle syntax error/],
        ['a SHACL violation', await tinyPackage({ name: 'gizmos', matrices: [{ name: 'main', uri: 'https://example.org/g',
          turtle: '@prefix mtx: <https://poliglot.io/os/spec/matrix#> . <https://example.org/g> a mtx:Matrix .' }] }), 'gizmos', /label/],
      ];
      for (const [what, archive, name, message] of cases) {
        const res = await publish(alice, 'acme', name, archive);
        expect(res.status, `${what}: ${JSON.stringify(res.body)}`).to.equal(422);
        expect(res.body.error.code).to.equal('VALIDATION_FAILED');
        const report = res.body.error.details.report;
        expect(report.conforms, what).to.equal(false);
        expect(report.violationCount, what).to.be.greaterThan(0);
        expect(report.violations.map((v: { message: string }) => v.message).join(' | '), what).to.match(message);
        // Dry run: the same answer.
        expect((await publish(alice, 'acme', name, archive, '?dryRun=true')).status, what).to.equal(422);
      }
      expect((await anonymous().get('/api/v1/registry/packages/acme/gizmos')).status).to.equal(404);
    });

    it('validates a package that imports its dependency\'s matrix against the registry', async () => {
      const base = 'https://example.org/packages/core/main';
      await publish(alice, 'acme', 'core', await tinyPackage({ name: 'core', matrices: [{ name: 'main', uri: base, turtle: sampleMatrixTurtle(base) }] }));
      const uri = 'https://example.org/packages/addon/main';
      const turtle = `${sampleMatrixTurtle(uri)}\n<${uri}> <https://poliglot.io/os/spec/matrix#imports> <${base}> .\n`;
      const manifest = (deps: unknown[]) => ({ name: 'addon', version: '1.0.0', engineVersion: '>=1.0', dependencies: deps, matrices: [{ name: 'main', path: 'main/assembly.ttl', uri }] });
      const without = await publish(alice, 'acme', 'addon', await tinyPackage({ name: 'addon', manifest: manifest([]), matrices: [{ name: 'main', uri, turtle }] }));
      expect(without.status).to.equal(422);
      const withDep = await publish(alice, 'acme', 'addon', await tinyPackage({ name: 'addon', matrices: [{ name: 'main', uri, turtle }],
        manifest: manifest([{ publisher: 'acme', name: 'core', versionRange: '>=1.0 <2.0' }]) }));
      expect(withDep.status, JSON.stringify(withDep.body)).to.equal(201);
    });
  });

  describe('reads (anonymous) and yanks', () => {
    before(async () => {
      for (const [version, engineVersion] of [['1.0.0', '>=1.0 <2.0'], ['1.1.0', '>=1.0 <2.0'], ['2.0.0', '>=2.0 <3.0']] as const) {
        const res = await publish(alice, 'acme', 'tools', await tinyPackage({ name: 'tools', version, engineVersion, description: `Tools ${version}` }));
        expect(res.status, JSON.stringify(res.body)).to.equal(201);
      }
    });

    it('a package with its versions newest first', async () => {
      const res = await anonymous().get('/api/v1/registry/packages/acme/tools');
      expect(res.status).to.equal(200);
      expect(res.body.data).to.include({ name: 'tools', description: 'Tools 2.0.0' });
      expect(res.body.data.publisher).to.deep.equal({ slug: 'acme' });
      expect(res.body.data.versions.map((v: { version: string }) => v.version)).to.deep.equal(['2.0.0', '1.1.0', '1.0.0']);
      for (const v of res.body.data.versions) expect(v).to.include.keys('version', 'engineVersion', 'publishedAt', 'yanked', 'dependencies');
      expect((await anonymous().get('/api/v1/registry/packages/acme/nothing')).status).to.equal(404);
      expect((await anonymous().get('/api/v1/registry/packages/nobody/tools')).status).to.equal(404);
    });

    it('versions paged (0-indexed) and filtered by engine range', async () => {
      const first = await anonymous().get('/api/v1/registry/packages/acme/tools/versions?page=0&size=2');
      expect(first.status).to.equal(200);
      expect(first.body.data).to.include({ page: 0, size: 2, totalItems: 3, totalPages: 2 });
      expect(first.body.data.items.map((v: { version: string }) => v.version)).to.deep.equal(['2.0.0', '1.1.0']);
      const second = await anonymous().get('/api/v1/registry/packages/acme/tools/versions?page=1&size=2');
      expect(second.body.data.items.map((v: { version: string }) => v.version)).to.deep.equal(['1.0.0']);
      const v2 = await anonymous().get(`/api/v1/registry/packages/acme/tools/versions?engineVersion=${encodeURIComponent('>=2.1')}`);
      expect(v2.body.data.items.map((v: { version: string }) => v.version)).to.deep.equal(['2.0.0']);
      const v1 = await anonymous().get(`/api/v1/registry/packages/acme/tools/versions?engineVersion=${encodeURIComponent('>=1.5 <2')}`);
      expect(v1.body.data.items.map((v: { version: string }) => v.version)).to.deep.equal(['1.1.0', '1.0.0']);
      expect(v1.body.data.totalItems).to.equal(2);
      // An engine's own version (full semver) keeps the versions that admit it.
      const exact = await anonymous().get('/api/v1/registry/packages/acme/tools/versions?engineVersion=2.3.1');
      expect(exact.body.data.items.map((v: { version: string }) => v.version)).to.deep.equal(['2.0.0']);
      const bad = await anonymous().get('/api/v1/registry/packages/acme/tools/versions?engineVersion=banana');
      expect(bad.status).to.equal(400);
      expect(bad.body.error.message).to.contain('banana');
      expect((await anonymous().get('/api/v1/registry/packages/acme/tools/versions?size=101')).status).to.equal(400);
      expect((await anonymous().get('/api/v1/registry/packages/acme/tools/versions?page=-1')).status).to.equal(400);
    });

    it('declarations, and the archive with its checksum header', async () => {
      const decl = await anonymous().get('/api/v1/registry/packages/acme/tools/1.1.0/declarations');
      expect(decl.status).to.equal(200);
      expect(decl.body.data).to.deep.equal({ declaredVariables: [], declaredSecrets: [] });
      expect((await anonymous().get('/api/v1/registry/packages/acme/tools/9.9.9/declarations')).status).to.equal(404);
      const archive = await anonymous().get('/api/v1/registry/packages/acme/tools/1.1.0/archive').buffer(true).parse((res, cb) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => cb(null, Buffer.concat(chunks)));
      });
      expect(archive.status).to.equal(200);
      expect(archive.headers['content-type']).to.match(/application\/gzip/);
      const bytes = archive.body as Buffer;
      expect(bytes).to.deep.equal(await tinyPackage({ name: 'tools', version: '1.1.0', engineVersion: '>=1.0 <2.0', description: 'Tools 1.1.0' }));
      expect(archive.headers['x-archive-checksum']).to.equal(`sha256:${createHash('sha256').update(bytes).digest('hex')}`);
      expect((await anonymous().get('/api/v1/registry/packages/acme/tools/3.0.0/archive')).status).to.equal(404);
    });

    it('resolves a matrix URI to its package, filtered by engine range', async () => {
      const uri = 'https://example.org/packages/tools/main';
      const res = await anonymous().get(`/api/v1/registry/resolve?uri=${encodeURIComponent(uri)}`);
      expect(res.status).to.equal(200);
      expect(res.body.data).to.include({ name: 'tools' });
      expect(res.body.data.publisher).to.deep.equal({ slug: 'acme' });
      expect(res.body.data.versions).to.have.length(3);
      const filtered = await anonymous().get(`/api/v1/registry/resolve?uri=${encodeURIComponent(uri)}&engineVersion=${encodeURIComponent('>=2')}`);
      expect(filtered.body.data.versions.map((v: { version: string }) => v.version)).to.deep.equal(['2.0.0']);
      const pt = await anonymous().get(`/api/v1/registry/resolve?uri=${encodeURIComponent('https://example.org/operating-models/project-tracking')}`);
      expect(pt.body.data).to.include({ name: 'project-tracking' });
      expect((await anonymous().get(`/api/v1/registry/resolve?uri=${encodeURIComponent('https://example.org/none')}`)).status).to.equal(404);
      expect((await anonymous().get('/api/v1/registry/resolve?uri=not%20an%20iri')).status).to.equal(400);
      expect((await anonymous().get('/api/v1/registry/resolve')).status).to.equal(400);
    });

    it("lists the caller's packages, paged", async () => {
      const res = await t.http.get('/api/v1/registry/publishers/me/packages?page=0&size=100').set(bearer(alice));
      expect(res.status).to.equal(200);
      const names = res.body.data.items.map((p: { publisher: { slug: string }; name: string }) => `${p.publisher.slug}/${p.name}`);
      expect(names).to.include.members(['acme/tools', 'acme/widgets', 'acme/core', 'acme/addon']);
      expect(res.body.data).to.include({ page: 0, size: 100, totalItems: names.length });
      const small = await t.http.get('/api/v1/registry/publishers/me/packages?size=1&page=1').set(bearer(alice));
      expect(small.body.data.items).to.have.length(1);
      expect(small.body.data.totalPages).to.equal(names.length);
      const none = await t.http.get('/api/v1/registry/publishers/me/packages').set(bearer(await t.token('nobody')));
      expect(none.body.data).to.deep.equal({ items: [], page: 0, size: 20, totalItems: 0, totalPages: 0 });
      expect((await anonymous().get('/api/v1/registry/publishers/me/packages')).status).to.equal(401);
    });

    it('yanks and unyanks, guarding the last live version', async () => {
      const yank = (version: string, body: object, token = alice) =>
        t.http.post(`/api/v1/registry/publishers/acme/packages/tools/versions/${version}/yank`).set(bearer(token)).send(body);
      const refused = await yank('2.0.0', { reason: 'no' }, bob);
      expect(refused.status).to.equal(403);
      expect(refused.body.error.message).to.contain('owners of publisher "acme"');
      expect(refused.text).not.to.contain('alice');
      expect((await yank('2.0.0', {})).status).to.equal(400);
      expect((await yank('7.0.0', { reason: 'x' })).status).to.equal(404);
      const y2 = await yank('2.0.0', { reason: 'broken roles' });
      expect(y2.status).to.equal(200);
      expect(y2.body.data).to.include({ version: '2.0.0', yanked: true, yankReason: 'broken roles' });
      expect((await yank('1.1.0', { reason: 'x' })).status).to.equal(200);
      const last = await yank('1.0.0', { reason: 'everything is bad' });
      expect(last.status).to.equal(409);
      expect(last.body.error.message).to.contain('force');
      const forced = await yank('1.0.0', { reason: 'everything is bad', force: true });
      expect(forced.status).to.equal(200);
      const view = await anonymous().get('/api/v1/registry/packages/acme/tools');
      expect(view.body.data.versions.map((v: { yanked: boolean }) => v.yanked)).to.deep.equal([true, true, true]);
      for (const v of ['1.0.0', '1.1.0', '2.0.0']) {
        const un = await t.http.post(`/api/v1/registry/publishers/acme/packages/tools/versions/${v}/unyank`).set(bearer(alice));
        expect(un.status).to.equal(200);
        expect(un.body.data).to.include({ yanked: false, yankReason: null });
      }
      const unrefused = await t.http.post('/api/v1/registry/publishers/acme/packages/tools/versions/1.0.0/unyank').set(bearer(bob));
      expect(unrefused.status).to.equal(403);
      expect(unrefused.text).not.to.contain('alice');
    });
  });
});

describe('hosted registry across a restart', function () {
  this.timeout(120_000);

  it('keeps publishers, versions, yanks and archives, and publishes the examples only once', async () => {
    const dataDir = tempDir();
    let t = await startTestServer({ WSM_REGISTRY: 'self' }, dataDir);
    try {
      const root = await t.token('root', { systemAdmin: true });
      const alice = await t.token('alice');
      expect((await t.http.post('/api/v1/registry/publishers').set(bearer(root)).send({ slug: 'acme', owners: ['alice'] })).status).to.equal(201);
      const archive = await tinyPackage({ name: 'kept', version: '1.0.0' });
      for (const version of ['1.0.0', '1.1.0']) {
        const bytes = version === '1.0.0' ? archive : await tinyPackage({ name: 'kept', version });
        const res = await t.http.post('/api/v1/registry/publishers/acme/packages/kept/versions').set(bearer(alice)).attach('file', bytes, 'kept.tgz');
        expect(res.status).to.equal(201);
      }
      expect((await t.http.post('/api/v1/registry/publishers/acme/packages/kept/versions/1.1.0/yank').set(bearer(alice)).send({ reason: 'bad' })).status).to.equal(200);
      const before = (await t.http.get('/api/v1/registry/packages/examples/project-tracking')).body.data;
      await t.close();
      t = await startTestServer({ WSM_REGISTRY: 'self' }, dataDir);
      const kept = (await t.http.get('/api/v1/registry/packages/acme/kept')).body.data;
      expect(kept.versions.map((v: { version: string; yanked: boolean }) => [v.version, v.yanked])).to.deep.equal([['1.1.0', true], ['1.0.0', false]]);
      const bytes = await t.http.get('/api/v1/registry/packages/acme/kept/1.0.0/archive').buffer(true).parse((res, cb) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => cb(null, Buffer.concat(chunks)));
      });
      expect(bytes.body).to.deep.equal(archive);
      expect((await t.http.get('/api/v1/registry/publishers/me').set(bearer(await t.token('alice')))).body.data.slug).to.equal('acme');
      // The examples were not published again (same records, same publishedAt).
      expect((await t.http.get('/api/v1/registry/packages/examples/project-tracking')).body.data).to.deep.equal(before);
    } finally {
      await t.close();
      removeDir(dataDir);
    }
  });
});
