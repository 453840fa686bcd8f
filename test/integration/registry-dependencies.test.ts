import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { bearer, removeDir, seedWorkspace, startTestServer, type TestServer } from '../helpers/server.js';
import { tinyPackage, sampleMatrixTurtle } from '../helpers/packages.js';
import { eventsOf, upload, waitForCommand, type CommandJson } from '../helpers/lifecycle.js';

type Tokens = Awaited<ReturnType<typeof seedWorkspace>>['tokens'];

/** A package archive with dependencies; its one matrix is https://example.org/packages/<name>/main. */
function withDeps(name: string, version: string, dependencies: Array<{ publisher: string; name: string; versionRange: string }>) {
  const uri = `https://example.org/packages/${name}/main`;
  return tinyPackage({ name, matrices: [{ name: 'main', uri, turtle: sampleMatrixTurtle(uri) }], manifest: {
    name, version, engineVersion: '>=1.0 <2.0', dependencies, matrices: [{ name: 'main', path: 'main/assembly.ttl', uri }],
  } });
}

async function registryInstall(t: TestServer, token: string, publisher: string, name: string, body: object = {}): Promise<CommandJson> {
  const res = await t.http.post(`/api/v1/packages/acme/registry/${publisher}/${name}/install`).set(bearer(token)).send(body);
  expect(res.status, JSON.stringify(res.body)).to.equal(202);
  return waitForCommand(t, token, 'acme', res.body.data.id);
}

async function commandsOf(t: TestServer, token: string, name: string): Promise<CommandJson[]> {
  const res = await t.http.get(`/api/v1/packages/acme/${name}/commands`).set(bearer(token));
  expect(res.status, JSON.stringify(res.body)).to.equal(200);
  return res.body.data;
}

describe('dependencies, with the hosted registry as the default', function () {
  this.timeout(180_000);
  let t: TestServer;
  let tokens: Tokens;
  let alice: string;

  const publishTo = async (name: string, version: string, archive: Buffer) => {
    const res = await t.http.post(`/api/v1/registry/publishers/deps/packages/${name}/versions`).set(bearer(alice))
      .attach('file', archive, { filename: `${name}.tgz`, contentType: 'application/gzip' });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
  };

  before(async () => {
    // WSM_REGISTRY unset: the service's own registry, with the examples published at the first start.
    t = await startTestServer({ WSM_REGISTRY: '' });
    ({ tokens } = await seedWorkspace(t, 'acme'));
    alice = await t.token('alice');
    const made = await t.http.post('/api/v1/registry/publishers').set(bearer(tokens.root)).send({ slug: 'deps', owners: ['alice'] });
    expect(made.status).to.equal(201);
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('installs a missing dependency first as a child command, shown by P8, P7 and the parent\'s events', async () => {
    const parent = await registryInstall(t, tokens.owner, 'examples', 'incident-response');
    expect(parent.status, parent.errorMessage ?? '').to.equal('completed');
    expect(parent.parentCommandId).to.equal(null);
    const children = await commandsOf(t, tokens.owner, 'project-tracking');
    expect(children).to.have.length(1);
    const child = children[0]!;
    expect(child).to.include({ commandType: 'INSTALL', status: 'completed', version: '1.1.0', parentCommandId: parent.id });
    const p8 = await t.http.get(`/api/v1/packages/acme/commands/${child.id}`).set(bearer(tokens.member));
    expect(p8.body.data.parentCommandId).to.equal(parent.id);
    // The child finished before its parent did.
    expect(child.updatedAt < parent.updatedAt).to.equal(true);
    const events = (await eventsOf(t, tokens.owner, 'acme', parent.id)).map((e) => e.message);
    expect(events.join('\n')).to.contain(`Installed dependency examples/project-tracking 1.1.0 for this package (command ${child.id})`);
    const pt = await t.http.get('/api/v1/packages/acme/project-tracking').set(bearer(tokens.owner));
    expect(pt.body.data).to.include({ currentVersion: '1.1.0', registryPublisher: 'examples' });
  });

  it('refuses (409) to uninstall a package another installed package depends on, naming it', async () => {
    const refused = await t.http.delete('/api/v1/packages/acme/project-tracking').set(bearer(tokens.owner));
    expect(refused.status).to.equal(409);
    expect(refused.body.error.message).to.contain('"incident-response"');
    expect(refused.body.error.details).to.deep.equal({ dependents: ['incident-response'] });
    expect((await t.http.get('/api/v1/packages/acme/project-tracking').set(bearer(tokens.owner))).status).to.equal(200);
  });

  it('accepts a dependency installed inside its range, and fails the command naming both versions outside it', async () => {
    await publishTo('base', '1.0.0', await withDeps('base', '1.0.0', []));
    await publishTo('base', '2.0.0', await withDeps('base', '2.0.0', []));
    await publishTo('needs-two', '1.0.0', await withDeps('needs-two', '1.0.0', [{ publisher: 'deps', name: 'base', versionRange: '>=2.0 <3.0' }]));
    await publishTo('needs-one', '1.0.0', await withDeps('needs-one', '1.0.0', [{ publisher: 'deps', name: 'base', versionRange: '>=1.0 <2' }]));
    expect((await registryInstall(t, tokens.owner, 'deps', 'base', { version: '1.0.0' })).status).to.equal('completed');
    const bad = await registryInstall(t, tokens.owner, 'deps', 'needs-two');
    expect(bad.status).to.equal('failed');
    expect(bad.errorMessage).to.contain('needs deps/base ">=2.0 <3.0", but version 1.0.0 is installed');
    expect((await t.http.get('/api/v1/packages/acme/needs-two').set(bearer(tokens.owner))).status).to.equal(404);
    const good = await registryInstall(t, tokens.owner, 'deps', 'needs-one');
    expect(good.status, good.errorMessage ?? '').to.equal('completed');
    expect((await eventsOf(t, tokens.owner, 'acme', good.id)).map((e) => e.message)).to.include('Dependency deps/base ">=1.0 <2": version 1.0.0 is installed');
    expect(await commandsOf(t, tokens.owner, 'base')).to.have.length(1);
  });

  it('refuses (409) to move a dependency outside the range an installed package needs, by P1 or P2, naming it', async () => {
    // After the test before: base 1.0.0 is installed, and needs-one needs it in ">=1.0 <2".
    const p1 = await t.http.post('/api/v1/packages/acme/registry/deps/base/install').set(bearer(tokens.owner)).send({ version: '2.0.0' });
    expect(p1.status, JSON.stringify(p1.body)).to.equal(409);
    expect(p1.body.error.message).to.contain('installed package "needs-one" needs it in ">=1.0 <2"');
    expect(p1.body.error.details).to.deep.include({ dependents: ['needs-one'] });
    const p2 = await upload(t, tokens.owner, 'acme', await withDeps('base', '2.0.0', []));
    expect(p2.status, JSON.stringify(p2.body)).to.equal(409);
    expect(p2.body.error.details.dependents).to.deep.equal(['needs-one']);
    expect((await t.http.get('/api/v1/packages/acme/base').set(bearer(tokens.owner))).body.data.currentVersion).to.equal('1.0.0');
    expect(await commandsOf(t, tokens.owner, 'base')).to.have.length(1);
    // Inside the range is fine.
    await publishTo('base', '1.1.0', await withDeps('base', '1.1.0', []));
    const inside = await registryInstall(t, tokens.owner, 'deps', 'base', { version: '1.1.0' });
    expect(inside.status, inside.errorMessage ?? '').to.equal('completed');
  });

  it('installs recursively, the newest version in range that is not yanked', async () => {
    await publishTo('leaf', '1.0.0', await withDeps('leaf', '1.0.0', []));
    await publishTo('leaf', '1.1.0', await withDeps('leaf', '1.1.0', []));
    await publishTo('leaf', '1.2.0', await withDeps('leaf', '1.2.0', []));
    await publishTo('leaf', '2.0.0', await withDeps('leaf', '2.0.0', []));
    const yank = await t.http.post('/api/v1/registry/publishers/deps/packages/leaf/versions/1.2.0/yank').set(bearer(alice)).send({ reason: 'broken' });
    expect(yank.status).to.equal(200);
    await publishTo('middle', '1.0.0', await withDeps('middle', '1.0.0', [{ publisher: 'deps', name: 'leaf', versionRange: '>=1.0 <2.0' }]));
    await publishTo('top', '1.0.0', await withDeps('top', '1.0.0', [{ publisher: 'deps', name: 'middle', versionRange: '>=1' }]));
    const top = await registryInstall(t, tokens.owner, 'deps', 'top');
    expect(top.status, top.errorMessage ?? '').to.equal('completed');
    const [middle] = await commandsOf(t, tokens.owner, 'middle');
    const [leaf] = await commandsOf(t, tokens.owner, 'leaf');
    expect(middle).to.include({ parentCommandId: top.id, status: 'completed' });
    expect(leaf).to.include({ parentCommandId: middle!.id, status: 'completed', version: '1.1.0' });
    // A yanked version still installs when named, with a warning.
    const named = await registryInstall(t, tokens.owner, 'deps', 'leaf', { version: '1.2.0' });
    expect(named.status).to.equal('completed');
    const warnings = (await eventsOf(t, tokens.owner, 'acme', named.id)).filter((e) => e.level === 'WARNING').map((e) => e.message);
    expect(warnings.join('\n')).to.contain('1.2.0 of deps/leaf is yanked');
  });

  it('P1 without a version never picks a yanked one; named, it installs with a warning', async () => {
    await publishTo('gone', '1.0.0', await withDeps('gone', '1.0.0', []));
    const yank = await t.http.post('/api/v1/registry/publishers/deps/packages/gone/versions/1.0.0/yank').set(bearer(alice)).send({ reason: 'withdrawn', force: true });
    expect(yank.status).to.equal(200);
    const refused = await t.http.post('/api/v1/packages/acme/registry/deps/gone/install').set(bearer(tokens.owner)).send({});
    expect(refused.status).to.equal(404);
    expect(refused.body.error.message).to.contain('Every version of the package is yanked (1.0.0); name one to install it anyway');
    const named = await registryInstall(t, tokens.owner, 'deps', 'gone', { version: '1.0.0' });
    expect(named.status).to.equal('completed');
    expect((await eventsOf(t, tokens.owner, 'acme', named.id)).some((e) => e.level === 'WARNING' && e.message.includes('yanked'))).to.equal(true);
  });

  it('refuses a cycle clearly, and installs nothing of it', async () => {
    await publishTo('cyc-a', '1.0.0', await withDeps('cyc-a', '1.0.0', [{ publisher: 'deps', name: 'cyc-b', versionRange: '>=1' }]));
    await publishTo('cyc-b', '1.0.0', await withDeps('cyc-b', '1.0.0', [{ publisher: 'deps', name: 'cyc-a', versionRange: '>=1' }]));
    const a = await registryInstall(t, tokens.owner, 'deps', 'cyc-a');
    expect(a.status).to.equal('failed');
    expect(a.errorMessage).to.contain('Dependency cycle: cyc-a -> cyc-b -> cyc-a');
    const [b] = await commandsOf(t, tokens.owner, 'cyc-b');
    expect(b).to.include({ status: 'failed', parentCommandId: a.id });
    for (const name of ['cyc-a', 'cyc-b']) expect((await t.http.get(`/api/v1/packages/acme/${name}`).set(bearer(tokens.owner))).status).to.equal(404);
  });

  it('a missing dependency the registry cannot satisfy fails the command saying so', async () => {
    const archive = await withDeps('orphan', '1.0.0', [{ publisher: 'deps', name: 'nothing-here', versionRange: '>=1' }]);
    const res = await upload(t, tokens.owner, 'acme', archive);
    expect(res.status).to.equal(202);
    const c = await waitForCommand(t, tokens.owner, 'acme', res.body.data.id);
    expect(c.status).to.equal('failed');
    expect(c.errorMessage).to.contain('deps/nothing-here is not installed and could not be found in the registry');
  });

  it('uploads check dependency ranges at the request (400) and resolve dependencies in the command', async () => {
    const bad = await upload(t, tokens.owner, 'acme', await withDeps('uploaded', '1.0.0', [{ publisher: 'deps', name: 'leaf', versionRange: 'banana' }]));
    expect(bad.status).to.equal(400);
    expect(bad.body.error.message).to.contain('versionRange "banana"');
    const ok = await upload(t, tokens.owner, 'acme', await withDeps('uploaded', '1.0.0', [{ publisher: 'deps', name: 'base', versionRange: '>=1.0 <2.0' }]));
    expect(ok.status).to.equal(202);
    expect((await waitForCommand(t, tokens.owner, 'acme', ok.body.data.id)).status).to.equal('completed');
    // base is now needed by two packages.
    const refused = await t.http.delete('/api/v1/packages/acme/base').set(bearer(tokens.owner));
    expect(refused.status).to.equal(409);
    expect(refused.body.error.details.dependents).to.deep.equal(['needs-one', 'uploaded']);
  });
});

describe('a second instance installing from the first one\'s registry', function () {
  this.timeout(180_000);
  let first: TestServer;
  let second: TestServer;
  let tokens: Tokens;

  before(async () => {
    first = await startTestServer({ WSM_REGISTRY: 'self' });
    // Its own base IRI: on a remote engine (WSM_TEST_STORE=sparql) both instances would otherwise share their graphs.
    second = await startTestServer({ WSM_REGISTRY: `http://127.0.0.1:${new URL(first.url).port}`, WSM_BASE_IRI: 'https://second.workspaces.local/' });
    ({ tokens } = await seedWorkspace(second, 'acme'));
  });
  after(async () => {
    await second.close();
    await first.close();
    removeDir(second.dataDir);
    removeDir(first.dataDir);
  });

  it('installs incident-response and, first, its dependency project-tracking over HTTP', async () => {
    const parent = await registryInstall(second, tokens.owner, 'examples', 'incident-response');
    expect(parent.status, parent.errorMessage ?? '').to.equal('completed');
    const [child] = await commandsOf(second, tokens.owner, 'project-tracking');
    expect(child).to.include({ status: 'completed', version: '1.1.0', parentCommandId: parent.id });
    const installed = await second.http.get('/api/v1/packages/acme/incident-response').set(bearer(tokens.owner));
    expect(installed.body.data).to.include({ currentVersion: '1.0.0', registryPublisher: 'examples', latestVersion: '1.0.0' });
    expect((await second.http.get('/api/v1/packages/acme/project-tracking').set(bearer(tokens.owner))).body.data.latestVersion).to.equal('1.1.0');
  });

  it('never picks a version the first one yanked', async () => {
    const admin = await first.token('admin');
    const yank = await first.http.post('/api/v1/registry/publishers/examples/packages/project-tracking/versions/1.1.0/yank').set(bearer(admin)).send({ reason: 'test' });
    expect(yank.status).to.equal(200);
    const p = await second.http.get('/api/v1/packages/acme/project-tracking').set(bearer(tokens.owner));
    expect(p.body.data).to.include({ currentVersion: '1.1.0', latestVersion: '1.0.0', updateAvailable: false });
    const un = await first.http.post('/api/v1/registry/publishers/examples/packages/project-tracking/versions/1.1.0/unyank').set(bearer(admin));
    expect(un.status).to.equal(200);
  });
});

describe('a registry package with an invalid dependency range', function () {
  this.timeout(60_000);
  let t: TestServer;
  let tokens: Tokens;
  let registry: http.Server;
  before(async () => {
    // Another registry (not this service) offers it: the archive is read in the command.
    const uri = 'https://example.org/packages/broken/main';
    const bytes = await tinyPackage({ name: 'broken', matrices: [{ name: 'main', uri, turtle: sampleMatrixTurtle(uri) }], manifest: {
      name: 'broken', version: '1.0.0', engineVersion: '>=1.0', dependencies: [{ publisher: 'pub', name: 'x', versionRange: '^1.2.3' }],
      matrices: [{ name: 'main', path: 'main/assembly.ttl', uri }],
    } });
    registry = http.createServer((req, res) => {
      if (req.url === '/api/v1/registry/packages/pub/broken') {
        res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ versions: [{ version: '1.0.0', engineVersion: '>=1.0', publishedAt: null }] }));
      } else if (req.url === '/api/v1/registry/packages/pub/broken/1.0.0/archive') {
        res.writeHead(200, { 'X-Archive-Checksum': `sha256:${createHash('sha256').update(bytes).digest('hex')}` }).end(bytes);
      } else {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((resolve) => registry.listen(0, '127.0.0.1', resolve));
    t = await startTestServer({ WSM_REGISTRY: `http://127.0.0.1:${(registry.address() as AddressInfo).port}` });
    ({ tokens } = await seedWorkspace(t, 'acme'));
  });
  after(async () => { await t.close(); removeDir(t.dataDir); registry.close(); });

  it('fails the command clearly', async () => {
    const c = await registryInstall(t, tokens.owner, 'pub', 'broken');
    expect(c.status).to.equal('failed');
    expect(c.errorMessage).to.contain('dependencies[0].versionRange: versionRange "^1.2.3"');
    expect((await t.http.get('/api/v1/packages/acme/broken').set(bearer(tokens.owner))).status).to.equal(404);
  });
});
