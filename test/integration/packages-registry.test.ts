import { expect } from 'chai';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { tinyPackage, sampleMatrixTurtle } from '../helpers/packages.js';
import { publish, upload, uploadAndWait, waitForCommand, bigMatrixTurtle } from '../helpers/lifecycle.js';
import { sparql, iri, raw } from '../../src/rdf/sparql.js';

const WSM = 'https://w3id.org/wsm/ns#';
/** On the remote store (WSM_TEST_STORE=sparql) the 60,000-role install takes longer: each write is an engine round trip. */
const REMOTE = process.env.WSM_TEST_STORE === 'sparql';

async function publishAlpha(t: TestServer): Promise<void> {
  for (const [version, engineVersion] of [['1.0.0', '>=1.0 <2.0'], ['1.1.0', '>=1.0 <2.0'], ['2.0.0', '>=2.0']] as const) {
    publish(t, 'acme-pub', 'alpha', version, await tinyPackage({ name: 'alpha', version, engineVersion }));
  }
}

describe('packages: registry install, auto-update toggle, uninstall and conflicts (P1, P3, P6)', function () {
  this.timeout(REMOTE ? 300_000 : 120_000);
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  let workspace: { id: string; slug: string };
  before(async () => {
    t = await startTestServer();
    ({ tokens, workspace } = await seedWorkspace(t, 'acme'));
    await publishAlpha(t);
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  const install = (token: string, name: string, body: object = {}, publisher = 'acme-pub') =>
    t.http.post(`/api/v1/packages/acme/registry/${publisher}/${name}/install`).set(bearer(token)).send(body);

  it('guards P1: 401, 404 for non-members, 403 for members', async () => {
    expect((await t.http.post('/api/v1/packages/acme/registry/acme-pub/alpha/install').send({})).status).to.equal(401);
    expect((await install(tokens.outsider, 'alpha')).status).to.equal(404);
    expect((await install(tokens.member, 'alpha')).status).to.equal(403);
  });

  it('resolves at the request: 404 unknown publisher, package or version; 400 ENGINE_INCOMPATIBLE; 400 bad body', async () => {
    expect((await install(tokens.owner, 'alpha', {}, 'nobody')).status).to.equal(404);
    expect((await install(tokens.owner, 'omega')).status).to.equal(404);
    expect((await install(tokens.owner, 'alpha', { version: '9.9.9' })).status).to.equal(404);
    const engine = await install(tokens.owner, 'alpha', { version: '2.0.0' });
    expect(engine.status).to.equal(400);
    expect(engine.body.error.code).to.equal('ENGINE_INCOMPATIBLE');
    expect((await install(tokens.owner, 'alpha', { autoUpdate: 'yes' })).status).to.equal(400);
    expect((await install(tokens.owner, 'alpha', { colour: 'red' })).status).to.equal(400);
    expect((await t.http.get('/api/v1/packages/acme/alpha/commands').set(bearer(tokens.owner))).status).to.equal(404);
  });

  it('installs the newest compatible version, then re-installs at a version (UPDATE, REINSTALL keeping autoUpdate)', async () => {
    const res = await install(tokens.owner, 'alpha');
    expect(res.status).to.equal(202);
    expect(res.body.data).to.include({ version: '1.1.0', commandType: 'INSTALL', status: 'pending' });
    expect(res.headers.location).to.equal(`/api/v1/packages/acme/commands/${res.body.data.id}`);
    const done = await waitForCommand(t, tokens.owner, 'acme', res.body.data.id);
    expect(done.status, done.errorMessage ?? '').to.equal('completed');
    let p = (await t.http.get('/api/v1/packages/acme/alpha').set(bearer(tokens.member))).body.data;
    expect(p).to.include({ currentVersion: '1.1.0', registryPublisher: 'acme-pub', registryName: 'alpha', latestVersion: '1.1.0', updateAvailable: false, autoUpdate: false });

    const down = await install(tokens.owner, 'alpha', { version: '1.0.0', autoUpdate: true });
    expect(down.body.data.commandType).to.equal('UPDATE');
    expect((await waitForCommand(t, tokens.owner, 'acme', down.body.data.id)).status).to.equal('completed');
    p = (await t.http.get('/api/v1/packages/acme/alpha').set(bearer(tokens.member))).body.data;
    expect(p).to.include({ currentVersion: '1.0.0', latestVersion: '1.1.0', updateAvailable: true, autoUpdate: true });

    const same = await install(tokens.owner, 'alpha', { version: '1.0.0' });
    expect(same.body.data.commandType).to.equal('REINSTALL');
    expect((await waitForCommand(t, tokens.owner, 'acme', same.body.data.id)).status).to.equal('completed');
    p = (await t.http.get('/api/v1/packages/acme/alpha').set(bearer(tokens.member))).body.data;
    expect(p.autoUpdate).to.equal(true);
  });

  it('accepts a registry package whose Turtle is broken (checked in the command) and fails the command', async () => {
    const uri = 'https://example.org/packages/brittle/main';
    publish(t, 'acme-pub', 'brittle', '1.0.0', await tinyPackage({ name: 'brittle', matrices: [{ name: 'main', uri, turtle: `<${uri}> a <https://poliglot.io/os/spec/matrix#Matrix> ; "dangling" .` }] }));
    const res = await install(tokens.owner, 'brittle');
    expect(res.status).to.equal(202);
    const done = await waitForCommand(t, tokens.owner, 'acme', res.body.data.id);
    expect(done.status).to.equal('failed');
    expect(done.errorMessage).to.match(/main\/assembly\.ttl.*line 1/);
    expect((await t.http.get('/api/v1/packages/acme/brittle').set(bearer(tokens.owner))).status).to.equal(404);
    expect((await t.http.get(`/api/v1/packages/acme/commands/${done.id}/validation-report`).set(bearer(tokens.owner))).status).to.equal(404);
  });

  it('toggles auto-update (P3): 200 with the installation; 400 for uploads and bad bodies; 403 members; 404 unknown', async () => {
    const path = '/api/v1/packages/acme/alpha/auto-update';
    expect((await t.http.patch(path).set(bearer(tokens.member)).send({ autoUpdate: false })).status).to.equal(403);
    expect((await t.http.patch(path).set(bearer(tokens.outsider)).send({ autoUpdate: false })).status).to.equal(404);
    expect((await t.http.patch(path).set(bearer(tokens.owner)).send({})).status).to.equal(400);
    const off = await t.http.patch(path).set(bearer(tokens.owner)).send({ autoUpdate: false });
    expect(off.status).to.equal(200);
    expect(off.body.data).to.include({ name: 'alpha', autoUpdate: false });
    expect((await t.http.patch('/api/v1/packages/acme/nothing/auto-update').set(bearer(tokens.owner)).send({ autoUpdate: true })).status).to.equal(404);
    const up = await uploadAndWait(t, tokens.owner, 'acme', await tinyPackage({ name: 'uploaded' }));
    expect(up.status).to.equal('completed');
    const refused = await t.http.patch('/api/v1/packages/acme/uploaded/auto-update').set(bearer(tokens.owner)).send({ autoUpdate: true });
    expect(refused.status).to.equal(400);
    expect(refused.body.error.message).to.match(/upload/);
  });

  it('tolerates an unreachable registry when reading (latestVersion null)', async () => {
    const { renameSync } = await import('node:fs');
    const dir = `${t.dataDir}/registry/acme-pub`;
    renameSync(dir, `${dir}-away`);
    try {
      const p = await t.http.get('/api/v1/packages/acme/alpha').set(bearer(tokens.member));
      expect(p.status).to.equal(200);
      expect(p.body.data).to.include({ latestVersion: null, updateAvailable: false });
    } finally {
      renameSync(`${dir}-away`, dir);
    }
  });

  it('answers 409 to P1 and P6 while a command is active, with existing and requested', async () => {
    const uri = 'https://example.org/packages/heavy/main';
    publish(t, 'acme-pub', 'heavy', '1.0.0', await tinyPackage({ name: 'heavy', matrices: [{ name: 'main', uri, turtle: bigMatrixTurtle(uri, 60_000) }] }));
    const first = await install(tokens.owner, 'heavy');
    expect(first.status).to.equal(202);
    const again = await install(tokens.owner, 'heavy', { version: '1.0.0' });
    expect(again.status).to.equal(409);
    const expected = { existing: { commandId: first.body.data.id, version: '1.0.0' }, requested: { version: '1.0.0' } };
    expect(again.body.error.details).to.deep.equal(expected);
    expect(again.body.existing).to.deep.equal(expected.existing);
    expect(again.body.requested).to.deep.equal(expected.requested);
    // Uninstall during a first install: 409 as well (the installation does not exist yet).
    const del = await t.http.delete('/api/v1/packages/acme/heavy').set(bearer(tokens.owner));
    expect(del.status).to.equal(409);
    expect(del.body.existing.commandId).to.equal(first.body.data.id);
    expect((await waitForCommand(t, tokens.owner, 'acme', first.body.data.id, REMOTE ? 240_000 : 60_000)).status).to.equal('completed');
  });

  it('uninstalls (P6): 202, matrices, graphs, roles, agents and their assignments gone; extension records stay', async () => {
    const { store, graphs, workspaces } = t.server.services;
    const p = (await t.http.get('/api/v1/packages/acme/alpha').set(bearer(tokens.owner))).body.data;
    const matrixId = p.matrices[0].id;
    const role = (await store.select(sparql`SELECT ?r WHERE { GRAPH ${iri(graphs.derived(workspace.id, matrixId))} { ?r a <${raw(WSM)}Role> } }`))[0]!.r!.value;
    const agentPrincipal = (await store.select(sparql`SELECT ?q WHERE { GRAPH ${iri(graphs.derived(workspace.id, matrixId))} { ?q a <${raw(WSM)}Principal> } }`))[0]!.q!.value;
    const memberPrincipal = workspaces.principalIri(workspaces.userPrincipalId(workspace.id, (await t.http.get('/api/v1/workspaces/acme').set(bearer(tokens.owner))).body.data.owner.id));
    const adminRole = workspaces.roleIri(workspaces.adminRoleId(workspace.id));
    await store.update(sparql`INSERT DATA { GRAPH ${iri(graphs.iam(workspace.id))} {
      <urn:test:a1> a <${raw(WSM)}RoleAssignment> ; <${raw(WSM)}role> ${iri(role)} ; <${raw(WSM)}principal> ${iri(memberPrincipal)} .
      <urn:test:a2> a <${raw(WSM)}RoleAssignment> ; <${raw(WSM)}role> ${iri(adminRole)} ; <${raw(WSM)}principal> ${iri(agentPrincipal)} . }
      GRAPH ${iri(graphs.extensions(workspace.id))} { <urn:test:ext> a <${raw(WSM)}Extension> ; <${raw(WSM)}targetMatrix> <https://example.org/packages/alpha/main> } }`, [graphs.iam(workspace.id), graphs.extensions(workspace.id)]);

    expect((await t.http.delete('/api/v1/packages/acme/alpha').set(bearer(tokens.member))).status).to.equal(403);
    expect((await t.http.delete('/api/v1/packages/acme/alpha').set(bearer(tokens.outsider))).status).to.equal(404);
    const res = await t.http.delete('/api/v1/packages/acme/alpha').set(bearer(tokens.owner));
    expect(res.status).to.equal(202);
    expect(res.body.data).to.include({ commandType: 'UNINSTALL', packageName: 'alpha', version: '1.0.0', packageInstallationId: p.id });
    expect(res.headers.location).to.equal(`/api/v1/packages/acme/commands/${res.body.data.id}`);
    expect((await waitForCommand(t, tokens.owner, 'acme', res.body.data.id)).status).to.equal('completed');

    expect((await t.http.get('/api/v1/packages/acme/alpha').set(bearer(tokens.owner))).status).to.equal(404);
    expect((await store.graphNames()).filter((g) => g.includes(matrixId))).to.deep.equal([]);
    expect(await store.ask(sparql`ASK { GRAPH ?g { <urn:test:a1> ?p ?o } }`)).to.equal(false);
    expect(await store.ask(sparql`ASK { GRAPH ?g { <urn:test:a2> ?p ?o } }`)).to.equal(false);
    expect(await store.ask(sparql`ASK { GRAPH ?g { ${iri(role)} ?p ?o } }`)).to.equal(false);
    expect(await store.ask(sparql`ASK { GRAPH ${iri(graphs.extensions(workspace.id))} { <urn:test:ext> a <${raw(WSM)}Extension> } }`)).to.equal(true);
    // The built-in role and the owner's administrator assignment stay.
    expect(await store.ask(sparql`ASK { GRAPH ?g { ?a <${raw(WSM)}role> ${iri(adminRole)} ; <${raw(WSM)}principal> ${iri(memberPrincipal)} } }`)).to.equal(true);
    // History stays readable.
    const cmds = await t.http.get('/api/v1/packages/acme/alpha/commands').set(bearer(tokens.member));
    expect(cmds.status).to.equal(200);
    expect(cmds.body.data[0].commandType).to.equal('UNINSTALL');
    expect((await t.http.delete('/api/v1/packages/acme/alpha').set(bearer(tokens.owner))).status).to.equal(404);
    expect((await upload(t, tokens.owner, 'acme', await tinyPackage({ name: 'alpha', matrices: [{ name: 'main', uri: 'https://example.org/packages/alpha/main', turtle: sampleMatrixTurtle('https://example.org/packages/alpha/main') }] }))).status).to.equal(202);
  });
});

describe('packages: the auto-update scheduler', function () {
  this.timeout(60_000);
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  before(async () => {
    t = await startTestServer({ WSM_AUTO_UPDATE_INTERVAL: '1' });
    ({ tokens } = await seedWorkspace(t, 'acme'));
    await publishAlpha(t);
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('moves within MAJOR.MINOR only, and leaves an explicitly named version until P3 sets auto-update again', async () => {
    for (const version of ['1.0.1', '1.0.2']) publish(t, 'acme-pub', 'alpha', version, await tinyPackage({ name: 'alpha', version }));
    const commands = async () => (await t.http.get('/api/v1/packages/acme/alpha/commands').set(bearer(tokens.owner))).body.data as Array<{ commandType: string; version: string; status: string }>;
    const on = await t.http.post('/api/v1/packages/acme/registry/acme-pub/alpha/install').set(bearer(tokens.owner)).send({ version: '1.0.0', autoUpdate: true });
    expect(on.status).to.equal(202);
    await waitForCommand(t, tokens.owner, 'acme', on.body.data.id);
    // Pinned: several rounds (one a second) and nothing moves.
    await new Promise((r) => setTimeout(r, 3000));
    let p = (await t.http.get('/api/v1/packages/acme/alpha').set(bearer(tokens.owner))).body.data;
    expect(p).to.include({ currentVersion: '1.0.0', autoUpdate: true, latestVersion: '1.1.0', updateAvailable: true });
    expect((await commands()).map((c) => c.commandType)).to.deep.equal(['INSTALL']);
    // P3 lifts the pin: the next round updates to the newest patch of 1.0, not to 1.1.0.
    expect((await t.http.patch('/api/v1/packages/acme/alpha/auto-update').set(bearer(tokens.owner)).send({ autoUpdate: true })).status).to.equal(200);
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      p = (await t.http.get('/api/v1/packages/acme/alpha').set(bearer(tokens.owner))).body.data ?? p;
      if (p.currentVersion !== '1.0.0') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(p.currentVersion).to.equal('1.0.2');
    const cmds = await commands();
    expect(cmds.map((c) => c.commandType)).to.deep.equal(['UPDATE', 'INSTALL']);
    expect(cmds[0]).to.include({ version: '1.0.2', status: 'completed' });
    // Nothing newer within 1.0: no further command after more rounds.
    await new Promise((r) => setTimeout(r, 2500));
    expect(await commands()).to.have.length(2);
    expect((await t.http.get('/api/v1/packages/acme/alpha').set(bearer(tokens.owner))).body.data.currentVersion).to.equal('1.0.2');
  });
});

describe('packages: an HTTP registry', function () {
  this.timeout(60_000);
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  let registry: import('node:http').Server;
  const archives = new Map<string, { bytes: Buffer; checksum: string }>();
  before(async () => {
    const http = await import('node:http');
    const { createHash } = await import('node:crypto');
    const good = await tinyPackage({ name: 'remote', version: '1.0.0' });
    archives.set('1.0.0', { bytes: good, checksum: createHash('sha256').update(good).digest('hex') });
    const tampered = await tinyPackage({ name: 'remote', version: '1.1.0' });
    archives.set('1.1.0', { bytes: tampered, checksum: '0'.repeat(64) });
    registry = http.createServer((req, res) => {
      const m = /^\/api\/v1\/registry\/packages\/acme-pub\/remote(?:\/([^/]+)\/archive)?$/.exec(req.url ?? '');
      if (!m) { res.writeHead(404).end(); return; }
      if (!m[1]) {
        res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ versions: [...archives.keys()].map((version) => ({ version, engineVersion: '>=1.0 <2.0', publishedAt: null })) }));
        return;
      }
      const a = archives.get(m[1]);
      if (!a) { res.writeHead(404).end(); return; }
      res.writeHead(200, { 'Content-Type': 'application/gzip', 'X-Archive-Checksum': `sha256:${a.checksum}` }).end(a.bytes);
    });
    await new Promise<void>((resolve) => registry.listen(0, '127.0.0.1', resolve));
    const { port } = registry.address() as import('node:net').AddressInfo;
    t = await startTestServer({ WSM_REGISTRY: `http://127.0.0.1:${port}` });
    ({ tokens } = await seedWorkspace(t, 'acme'));
  });
  after(async () => { await t.close(); removeDir(t.dataDir); registry.close(); });

  it('installs from it, fails the command on a checksum mismatch, and reads with the registry down', async () => {
    const ok = await t.http.post('/api/v1/packages/acme/registry/acme-pub/remote/install').set(bearer(tokens.owner)).send({ version: '1.0.0' });
    expect(ok.status).to.equal(202);
    expect((await waitForCommand(t, tokens.owner, 'acme', ok.body.data.id)).status).to.equal('completed');
    let p = (await t.http.get('/api/v1/packages/acme/remote').set(bearer(tokens.member))).body.data;
    expect(p).to.include({ currentVersion: '1.0.0', latestVersion: '1.1.0', updateAvailable: true });

    const bad = await t.http.post('/api/v1/packages/acme/registry/acme-pub/remote/install').set(bearer(tokens.owner)).send({});
    expect(bad.status).to.equal(202);
    expect(bad.body.data).to.include({ version: '1.1.0', commandType: 'UPDATE' });
    const failed = await waitForCommand(t, tokens.owner, 'acme', bad.body.data.id);
    expect(failed.status).to.equal('failed');
    expect(failed.errorMessage).to.match(/Could not download/);
    expect(failed.errorMessage).to.match(/checksum/i);

    await new Promise<void>((resolve) => { registry.close(() => resolve()); registry.closeAllConnections(); });
    p = (await t.http.get('/api/v1/packages/acme/remote').set(bearer(tokens.member))).body.data;
    expect(p).to.include({ currentVersion: '1.0.0', latestVersion: null, updateAvailable: false });
    const list = await t.http.get('/api/v1/packages/acme').set(bearer(tokens.member));
    expect(list.status).to.equal(200);
    const down = await t.http.post('/api/v1/packages/acme/registry/acme-pub/remote/install').set(bearer(tokens.owner)).send({});
    expect(down.status).to.equal(503);
  });
});
