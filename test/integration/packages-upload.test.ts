import { expect } from 'chai';
import { bearer, type TestServer, withSeededServer, type Tokens, type SeededWorkspace } from '../helpers/server.js';
import { tinyPackage, sampleMatrixTurtle, tarGz } from '../helpers/packages.js';
import { upload, uploadAndWait, waitForCommand, eventsOf, workspaceDump } from '../helpers/lifecycle.js';
import { sparql, iri } from '../../src/rdf/sparql.js';

const PREFIXES = `@prefix mtx: <https://poliglot.io/os/spec/matrix#> .
@prefix iam: <https://poliglot.io/os/spec/iam#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
`;

/** A matrix defining one role (no agent). */
function roleMatrix(uri: string, role: string, extra = ''): string {
  return `${PREFIXES}
<${uri}> a mtx:Matrix ; rdfs:label "Matrix ${role}" ; rdfs:comment "Defines ${role}." .
<${uri}#${role}> a iam:Role ; rdfs:label "${role}" ; rdfs:comment "The ${role} role." .
${extra}`;
}

describe('packages: upload install, reads and re-installs (P2, P4, P5, P7-P10)', function () {
  this.timeout(60_000);
  let t: TestServer;
  let tokens: Tokens;
  let workspace: SeededWorkspace;
  withSeededServer('acme', (s) => ({ t, tokens, workspace } = s), { WSM_MAX_UPLOAD_BYTES: String(256 * 1024) });

  it('guards P2: no token 401, non-member 404, member 403, unknown workspace 404', async () => {
    const archive = await tinyPackage({ name: 'guarded' });
    const none = await t.http.post('/api/v1/packages/acme/install').attach('file', archive, 'p.tgz');
    expect(none.status).to.equal(401);
    expect((await upload(t, tokens.outsider, 'acme', archive)).status).to.equal(404);
    const member = await upload(t, tokens.member, 'acme', archive);
    expect(member.status).to.equal(403);
    expect(member.body.error.code).to.equal('FORBIDDEN');
    expect((await upload(t, tokens.owner, 'nowhere', archive)).status).to.equal(404);
    const cmds = await t.http.get('/api/v1/packages/acme/guarded/commands').set(bearer(tokens.owner));
    expect(cmds.status).to.equal(404);
  });

  it('installs an upload: 202 with the command and Location, then completed with events, report and installation', async () => {
    const res = await upload(t, tokens.owner, 'acme', await tinyPackage({ name: 'alpha', description: 'First' }));
    expect(res.status).to.equal(202);
    const cmd = res.body.data;
    expect(cmd).to.include({ packageName: 'alpha', version: '1.0.0', commandType: 'INSTALL', status: 'pending', packageInstallationId: null, packageInstallation: null, errorMessage: null });
    expect(res.headers.location).to.equal(`/api/v1/packages/acme/commands/${cmd.id}`);
    const done = await waitForCommand(t, tokens.owner, 'acme', cmd.id);
    expect(done.status, done.errorMessage ?? '').to.equal('completed');
    expect(done.packageInstallationId).to.be.a('string');
    expect(done.packageInstallation).to.deep.equal({ id: done.packageInstallationId });

    const pkg = await t.http.get('/api/v1/packages/acme/alpha').set(bearer(tokens.member));
    expect(pkg.status).to.equal(200);
    const p = pkg.body.data;
    expect(p).to.include({ id: done.packageInstallationId, name: 'alpha', currentVersion: '1.0.0', registryPublisher: null, registryName: null, latestVersion: null, updateAvailable: false, autoUpdate: false });
    expect(p.matrices).to.have.length(1);
    expect(p.matrices[0]).to.include({ name: 'main', description: 'A matrix written by the tests.', dependencyCount: 0 });
    expect(p.latestCommand).to.include({ id: cmd.id, status: 'completed', commandType: 'INSTALL', validationConforms: true, validationViolationCount: 0 });
    expect(p.latestCommand.validationWarningCount).to.be.a('number');

    const events = await eventsOf(t, tokens.member, 'acme', cmd.id);
    expect(events[0]!.level).to.equal('INFO');
    expect(events.at(-1)!.level).to.equal('SUCCESS');
    const text = events.map((e) => e.message).join('\n');
    expect(text).to.match(/\d+ triples/);
    expect(text).to.match(/0 violations/);
    expect(text).to.match(/1 role and 1 agent/);
    const times = events.map((e: unknown) => (e as { createdAt: string }).createdAt);
    expect([...times].sort()).to.deep.equal(times);

    const report = await t.http.get(`/api/v1/packages/acme/commands/${cmd.id}/validation-report`).set(bearer(tokens.member));
    expect(report.status).to.equal(200);
    expect(report.body.data).to.include({ conforms: true, violationCount: 0 });
    expect(report.body.data.violations).to.deep.equal([]);
    const turtle = await t.http.get(`/api/v1/packages/acme/commands/${cmd.id}/validation-report`).set(bearer(tokens.member)).set('Accept', 'text/turtle');
    expect(turtle.status).to.equal(200);
    expect(turtle.headers['content-type']).to.match(/^text\/turtle/);
    expect(turtle.text).to.match(/ValidationReport/);
  });

  it('refuses bad archives with 400 before any command exists', async () => {
    const cases: Array<[string, Buffer, RegExp]> = [
      ['not gzip', Buffer.from('hello, not an archive'), /gzip|tar/i],
      ['no manifest', tarGz([{ path: 'main/assembly.ttl', content: sampleMatrixTurtle('https://example.org/x') }]), /manifest/i],
      ['missing file', await tinyPackage({ name: 'broken', manifest: { name: 'broken', version: '1.0.0', engineVersion: '>=1.0 <2.0', matrices: [{ name: 'm', path: 'm/assembly.ttl', uri: 'https://example.org/m' }] } }), /m\/assembly\.ttl/],
    ];
    for (const [what, archive, message] of cases) {
      const res = await upload(t, tokens.owner, 'acme', archive);
      expect(res.status, what).to.equal(400);
      expect(res.body.error.message, what).to.match(message);
    }
    const engine = await upload(t, tokens.owner, 'acme', await tinyPackage({ name: 'future', engineVersion: '>=2.0' }));
    expect(engine.status).to.equal(400);
    expect(engine.body.error.code).to.equal('ENGINE_INCOMPATIBLE');
    for (const name of ['broken', 'future']) {
      expect((await t.http.get(`/api/v1/packages/acme/${name}/commands`).set(bearer(tokens.owner))).status).to.equal(404);
    }
    const noFile = await t.http.post('/api/v1/packages/acme/install').set(bearer(tokens.owner)).field('other', 'x');
    expect(noFile.status).to.equal(400);
    const badForce = await upload(t, tokens.owner, 'acme', await tinyPackage({ name: 'gamma' }), '?forceUpdate=yes');
    expect(badForce.status).to.equal(400);
    expect(badForce.body.error.message).to.match(/forceUpdate/);
  });

  it('answers 413 for a file over the upload limit and 400 for too many parts', async () => {
    const big = await t.http.post('/api/v1/packages/acme/install').set(bearer(tokens.owner)).attach('file', Buffer.alloc(300 * 1024, 1), 'big.tgz');
    expect(big.status).to.equal(413);
    let req = t.http.post('/api/v1/packages/acme/install').set(bearer(tokens.owner));
    for (let i = 0; i < 20; i++) req = req.field(`f${i}`, 'x');
    const parts = await req.attach('file', await tinyPackage({ name: 'parts' }), 'p.tgz');
    expect(parts.status).to.equal(400);
  });

  it('fails a command on a Turtle error and leaves the workspace exactly as it was (no report: 404)', async () => {
    const before = await workspaceDump(t, workspace.id);
    const done = await uploadAndWait(t, tokens.owner, 'acme', await tinyPackage({ name: 'alpha', version: '1.0.1', matrices: [{ name: 'main', uri: 'https://example.org/packages/alpha/main', turtle: `${PREFIXES}\n<https://example.org/packages/alpha/main> a mtx:Matrix ;\n  rdfs:label "broken \n` }] }));
    expect(done.status).to.equal('failed');
    expect(done.errorMessage).to.match(/line \d+/);
    const events = await eventsOf(t, tokens.owner, 'acme', done.id);
    expect(events.at(-1)!.level).to.equal('ERROR');
    expect(events.at(-1)!.message).to.match(/Fix the Turtle/);
    const report = await t.http.get(`/api/v1/packages/acme/commands/${done.id}/validation-report`).set(bearer(tokens.owner));
    expect(report.status).to.equal(404);
    expect(await workspaceDump(t, workspace.id)).to.deep.equal(before);
    const pkg = await t.http.get('/api/v1/packages/acme/alpha').set(bearer(tokens.owner));
    expect(pkg.body.data.currentVersion).to.equal('1.0.0');
    expect(pkg.body.data.latestCommand).to.include({ id: done.id, status: 'failed' });
  });

  it('fails a command on a SHACL violation, keeps the report, and changes nothing', async () => {
    const before = await workspaceDump(t, workspace.id);
    const uri = 'https://example.org/packages/alpha/main';
    const bad = `${PREFIXES}\n<${uri}> a mtx:Matrix ; rdfs:label "M" .\n<${uri}#nameless> a iam:Role ; rdfs:comment "no label" .\n`;
    const done = await uploadAndWait(t, tokens.owner, 'acme', await tinyPackage({ name: 'alpha', version: '2.0.0', matrices: [{ name: 'main', uri, turtle: bad }] }));
    expect(done.status).to.equal('failed');
    expect(done.errorMessage).to.match(/violation/);
    const report = await t.http.get(`/api/v1/packages/acme/commands/${done.id}/validation-report`).set(bearer(tokens.member));
    expect(report.status).to.equal(200);
    expect(report.body.data.conforms).to.equal(false);
    expect(report.body.data.violationCount).to.be.greaterThan(0);
    expect(report.body.data.violations[0].focusNode).to.equal(`${uri}#nameless`);
    expect(await workspaceDump(t, workspace.id)).to.deep.equal(before);
    const pkg = await t.http.get('/api/v1/packages/acme/alpha').set(bearer(tokens.owner));
    expect(pkg.body.data.latestCommand).to.include({ validationConforms: false, status: 'failed' });
    expect(pkg.body.data.latestCommand.validationViolationCount).to.be.greaterThan(0);
  });

  it('fails on an import that is neither in the package nor installed', async () => {
    const uri = 'https://example.org/packages/lonely/main';
    const done = await uploadAndWait(t, tokens.owner, 'acme', await tinyPackage({ name: 'lonely', matrices: [{ name: 'main', uri, turtle: roleMatrix(uri, 'x', `<${uri}> mtx:imports <https://example.org/nowhere> .`) }] }));
    expect(done.status).to.equal('failed');
    expect(done.errorMessage).to.match(/imports <https:\/\/example.org\/nowhere>/);
    expect((await t.http.get('/api/v1/packages/acme/lonely').set(bearer(tokens.owner))).status).to.equal(404);
  });

  it('re-installs (REINSTALL same version, UPDATE another) keeping ids, dropping removed matrices and assignments of vanished roles', async () => {
    const base = 'https://example.org/packages/beta';
    const v1 = await tinyPackage({ name: 'beta', version: '1.0.0', matrices: [
      { name: 'core', uri: `${base}/core`, turtle: roleMatrix(`${base}/core`, 'editor') },
      { name: 'audit', uri: `${base}/audit`, turtle: roleMatrix(`${base}/audit`, 'auditor', `<${base}/audit> mtx:imports <${base}/core> .`) },
    ] });
    const first = await uploadAndWait(t, tokens.owner, 'acme', v1);
    expect(first.status, first.errorMessage ?? '').to.equal('completed');
    const p1 = (await t.http.get('/api/v1/packages/acme/beta').set(bearer(tokens.owner))).body.data;
    expect(p1.matrices.map((m: { name: string }) => m.name)).to.deep.equal(['audit', 'core']);
    expect(p1.matrices.find((m: { name: string }) => m.name === 'audit').dependencyCount).to.equal(1);

    // Assign both roles to the owner (the IAM area's I1 does the same write).
    const { store, graphs, workspaces } = t.server.services;
    const ownerPrincipal = workspaces.userPrincipalId(workspace.id, (await t.http.get('/api/v1/workspaces/acme').set(bearer(tokens.owner))).body.data.owner.id);
    const roleIri = async (uri: string) => {
      const rows = await store.select(sparql`SELECT ?r WHERE { GRAPH ?g { ?r <https://w3id.org/wsm/ns#uri> ${iri(uri)} ; a <https://w3id.org/wsm/ns#Role> } }`);
      return rows[0]!.r!.value;
    };
    const editor = await roleIri(`${base}/core#editor`);
    const auditor = await roleIri(`${base}/audit#auditor`);
    for (const r of [editor, auditor]) {
      const a = `${graphs.base}id/assignment/${r.slice(-36)}`;
      await store.update(sparql`INSERT DATA { GRAPH ${iri(graphs.iam(workspace.id))} { ${iri(a)} a <https://w3id.org/wsm/ns#RoleAssignment> ; <https://w3id.org/wsm/ns#role> ${iri(r)} ; <https://w3id.org/wsm/ns#principal> ${iri(workspaces.principalIri(ownerPrincipal))} } }`, [graphs.iam(workspace.id)]);
    }
    const assigned = async () => (await store.select(sparql`SELECT ?r WHERE { GRAPH ${iri(graphs.iam(workspace.id))} { ?a a <https://w3id.org/wsm/ns#RoleAssignment> ; <https://w3id.org/wsm/ns#role> ?r } }`)).map((b) => b.r!.value);

    const again = await uploadAndWait(t, tokens.owner, 'acme', v1);
    expect(again).to.include({ commandType: 'REINSTALL', status: 'completed' });
    expect(await assigned()).to.include.members([editor, auditor]);

    const v2 = await tinyPackage({ name: 'beta', version: '1.1.0', matrices: [{ name: 'core', uri: `${base}/core`, turtle: roleMatrix(`${base}/core`, 'editor') }] });
    const update = await uploadAndWait(t, tokens.owner, 'acme', v2);
    expect(update).to.include({ commandType: 'UPDATE', status: 'completed', packageInstallationId: p1.id });
    const p2 = (await t.http.get('/api/v1/packages/acme/beta').set(bearer(tokens.owner))).body.data;
    expect(p2.id).to.equal(p1.id);
    expect(p2.currentVersion).to.equal('1.1.0');
    expect(p2.createdAt).to.equal(p1.createdAt);
    expect(p2.matrices).to.deep.equal([p1.matrices.find((m: { name: string }) => m.name === 'core')]);
    const auditId = p1.matrices.find((m: { name: string }) => m.name === 'audit').id;
    expect((await store.graphNames()).filter((g) => g.includes(auditId))).to.deep.equal([]);
    expect(await roleIri(`${base}/core#editor`)).to.equal(editor);
    expect(await assigned()).to.include(editor);
    expect(await assigned()).not.to.include(auditor);
  });

  it('refuses a matrix installed by another package unless forceUpdate=true, which moves it', async () => {
    const uri = 'https://example.org/packages/alpha/main';
    const archive = await tinyPackage({ name: 'rival', matrices: [{ name: 'taken', uri, turtle: sampleMatrixTurtle(uri) }] });
    const refused = await uploadAndWait(t, tokens.owner, 'acme', archive);
    expect(refused.status).to.equal('failed');
    expect(refused.errorMessage).to.match(/already installed by package "alpha"/);
    expect((await eventsOf(t, tokens.owner, 'acme', refused.id)).at(-1)!.message).to.match(/forceUpdate=true/);
    const forced = await uploadAndWait(t, tokens.owner, 'acme', archive, '?forceUpdate=true');
    expect(forced.status, forced.errorMessage ?? '').to.equal('completed');
    const alpha = (await t.http.get('/api/v1/packages/acme/alpha').set(bearer(tokens.owner))).body.data;
    const rival = (await t.http.get('/api/v1/packages/acme/rival').set(bearer(tokens.owner))).body.data;
    expect(alpha.matrices).to.deep.equal([]);
    expect(rival.matrices.map((m: { name: string }) => m.name)).to.deep.equal(['taken']);
  });

  it('lists packages paged (P4) and commands newest first (P7), with 400 on bad paging', async () => {
    const list = await t.http.get('/api/v1/packages/acme?page=1&pageSize=2').set(bearer(tokens.member));
    expect(list.status).to.equal(200);
    expect(list.body.data).to.include({ page: 1, pageSize: 2 });
    expect(list.body.data.totalItems).to.equal(3);
    expect(list.body.data.totalPages).to.equal(2);
    expect(list.body.data.items.map((p: { name: string }) => p.name)).to.deep.equal(['alpha', 'beta']);
    const second = await t.http.get('/api/v1/packages/acme?page=2&pageSize=2').set(bearer(tokens.member));
    expect(second.body.data.items.map((p: { name: string }) => p.name)).to.deep.equal(['rival']);
    for (const q of ['page=0', 'pageSize=0', 'pageSize=101', 'page=x']) {
      expect((await t.http.get(`/api/v1/packages/acme?${q}`).set(bearer(tokens.member))).status, q).to.equal(400);
    }
    expect((await t.http.get('/api/v1/packages/acme').set(bearer(tokens.outsider))).status).to.equal(404);
    expect((await t.http.get('/api/v1/packages/acme')).status).to.equal(401);

    const all = await t.http.get('/api/v1/packages/acme/alpha/commands').set(bearer(tokens.member));
    expect(all.status).to.equal(200);
    expect(all.body.data.length).to.equal(3);
    const created = all.body.data.map((c: { createdAt: string }) => c.createdAt);
    expect([...created].sort().reverse()).to.deep.equal(created);
    expect(all.body.data.at(-1).commandType).to.equal('INSTALL');
    const paged = await t.http.get('/api/v1/packages/acme/alpha/commands?page=1&size=2').set(bearer(tokens.member));
    expect(paged.body.data.map((c: { id: string }) => c.id)).to.deep.equal([all.body.data[2].id]);
    for (const q of ['page=-1', 'size=0', 'size=101', 'page=x']) {
      expect((await t.http.get(`/api/v1/packages/acme/alpha/commands?${q}`).set(bearer(tokens.member))).status, q).to.equal(400);
    }
    expect((await t.http.get('/api/v1/packages/acme/nothing/commands').set(bearer(tokens.member))).status).to.equal(404);
    expect((await t.http.get('/api/v1/packages/acme/nothing').set(bearer(tokens.member))).status).to.equal(404);
  });

  it('answers 404 for unknown commands, reports and events, and for non-members', async () => {
    const missing = '00000000-0000-4000-8000-000000000000';
    for (const suffix of ['', '/events', '/validation-report']) {
      expect((await t.http.get(`/api/v1/packages/acme/commands/${missing}${suffix}`).set(bearer(tokens.member))).status, suffix).to.equal(404);
      expect((await t.http.get(`/api/v1/packages/acme/commands/not-a-uuid${suffix}`).set(bearer(tokens.member))).status, suffix).to.equal(404);
    }
    const any = (await t.http.get('/api/v1/packages/acme/alpha/commands').set(bearer(tokens.member))).body.data[0].id;
    expect((await t.http.get(`/api/v1/packages/acme/commands/${any}`).set(bearer(tokens.outsider))).status).to.equal(404);
    expect((await t.http.get(`/api/v1/packages/acme/commands/${any}/events`).set(bearer(tokens.outsider))).status).to.equal(404);
  });

  it('installs a matrix importing one of another package, and warns when that package is uninstalled', async () => {
    const taken = 'https://example.org/packages/alpha/main';
    const uri = 'https://example.org/packages/dependent/main';
    const done = await uploadAndWait(t, tokens.owner, 'acme', await tinyPackage({ name: 'dependent', matrices: [{ name: 'main', uri, turtle: roleMatrix(uri, 'user', `<${uri}> mtx:imports <${taken}> .`) }] }));
    expect(done.status, done.errorMessage ?? '').to.equal('completed');
    expect((await t.http.get('/api/v1/packages/acme/dependent').set(bearer(tokens.owner))).body.data.matrices[0].dependencyCount).to.equal(1);
    const res = await t.http.delete('/api/v1/packages/acme/rival').set(bearer(tokens.owner));
    expect(res.status).to.equal(202);
    expect((await waitForCommand(t, tokens.owner, 'acme', res.body.data.id)).status).to.equal('completed');
    const warning = (await eventsOf(t, tokens.owner, 'acme', res.body.data.id)).find((e) => e.level === 'WARNING');
    expect(warning?.message).to.contain(`<${uri}>`);
  });

  it('answers 404 on every package endpoint for an unknown workspace', async () => {
    const id = '00000000-0000-4000-8000-000000000000';
    const calls = [
      t.http.post('/api/v1/packages/nowhere/registry/acme-pub/alpha/install').send({}),
      t.http.patch('/api/v1/packages/nowhere/alpha/auto-update').send({ autoUpdate: true }),
      t.http.get('/api/v1/packages/nowhere'),
      t.http.get('/api/v1/packages/nowhere/alpha'),
      t.http.delete('/api/v1/packages/nowhere/alpha'),
      t.http.get('/api/v1/packages/nowhere/alpha/commands'),
      t.http.get(`/api/v1/packages/nowhere/commands/${id}`),
      t.http.get(`/api/v1/packages/nowhere/commands/${id}/validation-report`),
      t.http.get(`/api/v1/packages/nowhere/commands/${id}/events`),
    ];
    for (const [i, call] of calls.entries()) {
      const res = await call.set(bearer(tokens.root));
      expect(res.status, `call ${i}`).to.equal(404);
      expect(res.body.error.code).to.equal('NOT_FOUND');
    }
  });

  it('queues an upload behind an active command of the package and records what it turned out to be', async () => {
    const [first, second] = await Promise.all([
      upload(t, tokens.owner, 'acme', await tinyPackage({ name: 'queued', version: '1.0.0' })),
      upload(t, tokens.owner, 'acme', await tinyPackage({ name: 'queued', version: '1.1.0' })),
    ]);
    expect([first.status, second.status]).to.deep.equal([202, 202]);
    // Both were accepted as first installs; whichever the runner took first stays INSTALL, the other one,
    // queued behind it, turns out to be an UPDATE of what the first installed.
    expect(first.body.data).to.include({ commandType: 'INSTALL', status: 'pending' });
    expect(second.body.data).to.include({ commandType: 'INSTALL', status: 'pending' });
    const done = [await waitForCommand(t, tokens.owner, 'acme', first.body.data.id), await waitForCommand(t, tokens.owner, 'acme', second.body.data.id)];
    const a = done.find((c) => c.commandType === 'INSTALL')!;
    const b = done.find((c) => c.commandType === 'UPDATE')!;
    expect(a, 'one INSTALL').to.include({ status: 'completed' });
    expect(b, 'one UPDATE').to.include({ status: 'completed', packageInstallationId: a.packageInstallationId });
    const last = b.version;
    expect((await t.http.get('/api/v1/packages/acme/queued').set(bearer(tokens.owner))).body.data.currentVersion).to.equal(last);
  });

  it('describes P1 to P10 in the OpenAPI document', async () => {
    const doc = (await t.http.get('/api/v1/openapi.json')).body as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };
    const expected: Array<[string, string, string]> = [
      ['/api/v1/packages/{workspace}/registry/{publisher}/{name}/install', 'post', '202'],
      ['/api/v1/packages/{workspace}/install', 'post', '202'],
      ['/api/v1/packages/{workspace}/{packageName}/auto-update', 'patch', '200'],
      ['/api/v1/packages/{workspace}', 'get', '200'],
      ['/api/v1/packages/{workspace}/{packageName}', 'get', '200'],
      ['/api/v1/packages/{workspace}/{packageName}', 'delete', '202'],
      ['/api/v1/packages/{workspace}/{packageName}/commands', 'get', '200'],
      ['/api/v1/packages/{workspace}/commands/{commandId}', 'get', '200'],
      ['/api/v1/packages/{workspace}/commands/{commandId}/validation-report', 'get', '200'],
      ['/api/v1/packages/{workspace}/commands/{commandId}/events', 'get', '200'],
    ];
    for (const [path, method, status] of expected) {
      expect(doc.paths[path]?.[method]?.responses, `${method} ${path}`).to.have.property(status);
    }
  });
});
