import { expect } from 'chai';
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { openRegistry } from '../../src/packages/registry.js';
import { runWsm } from '../helpers/cli.js';
import { examplePackage, tinyPackage } from '../helpers/packages.js';
import { bearer, removeDir, startTestServer, tempDir, type TestServer } from '../helpers/server.js';
import { EXAMPLES_DIR } from '../../src/packages/examples.js';

describe('wsm publish', function () {
  // Each case runs the CLI as a process (tsx compiles it at every start).
  this.timeout(120_000);
  let work: string;
  let registry: string;
  beforeEach(() => { work = tempDir('wsm-publish-'); registry = path.join(work, 'registry'); });
  afterEach(() => removeDir(work));

  it('copies a package into the registry given by --registry', async () => {
    const file = path.join(work, 'project-tracking.tgz');
    writeFileSync(file, await examplePackage('project-tracking-1.1.0'));
    const res = await runWsm(['publish', file, '--publisher', 'acme', '--registry', registry]);
    expect(res.code, res.stderr).to.equal(0);
    const target = path.join(registry, 'acme', 'project-tracking', '1.1.0.tgz');
    expect(res.stdout.trim()).to.equal(`Published acme/project-tracking 1.1.0 to ${target}`);
    expect(readFileSync(target).equals(readFileSync(file))).to.equal(true);
    const versions = await openRegistry(registry).versions('acme', 'project-tracking');
    expect(versions.map((v) => [v.version, v.engineVersion])).to.deep.equal([['1.1.0', '>=1.0 <2.0']]);
  });

  it('defaults to WSM_REGISTRY', async () => {
    const file = path.join(work, 'tiny.tgz');
    writeFileSync(file, await tinyPackage({ name: 'tiny', version: '0.1.0' }));
    const res = await runWsm(['publish', file, '--publisher', 'acme'], { WSM_REGISTRY: registry, WSM_DATA_DIR: path.join(work, 'data') });
    expect(res.code, res.stderr).to.equal(0);
    expect(existsSync(path.join(registry, 'acme', 'tiny', '0.1.0.tgz'))).to.equal(true);
  });

  it('refuses an invalid archive with the reason, and writes nothing', async () => {
    const file = path.join(work, 'bad.tgz');
    writeFileSync(file, await tinyPackage({ name: 'install' }));
    const res = await runWsm(['publish', file, '--publisher', 'acme', '--registry', registry]);
    expect(res.code).to.equal(1);
    expect(res.stderr.trim()).to.equal('wsm: Invalid manifest.json: name must not be one of "install", "registry", "commands" (reserved by the API)');
    expect(existsSync(registry)).to.equal(false);
  });

  it('refuses other content for a published version', async () => {
    const file = path.join(work, 'tiny.tgz');
    writeFileSync(file, await tinyPackage({ name: 'tiny' }));
    expect((await runWsm(['publish', file, '--publisher', 'acme', '--registry', registry])).code).to.equal(0);
    writeFileSync(file, await tinyPackage({ name: 'tiny', description: 'changed' }));
    const res = await runWsm(['publish', file, '--publisher', 'acme', '--registry', registry]);
    expect(res.code).to.equal(1);
    expect(res.stderr).to.match(/Version 1\.0\.0 of "acme\/tiny" is already published with other content/);
  });

  it('explains its usage', async () => {
    const missing = await runWsm(['publish', 'x.tgz', '--registry', registry]);
    expect(missing.code).to.equal(2);
    expect(missing.stderr).to.match(/usage: wsm publish <folder\|file\.tgz> \[--publisher P\]/);
    expect(missing.stderr).to.contain('--publisher is required for a directory registry');
    const bad = await runWsm(['publish', path.join(work, 'none.tgz'), '--publisher', 'Acme Corp', '--registry', registry]);
    expect(bad.code).to.equal(1);
    expect(bad.stderr).to.match(/Publisher "Acme Corp" must be a lower-case slug/);
    const noCredentials = await runWsm(['publish', path.join(EXAMPLES_DIR, 'project-tracking-1.0.0'), '--url', 'http://127.0.0.1:1'], { WSM_TOKEN: '', WSM_API_KEY: '' });
    expect(noCredentials.code).to.equal(2);
    expect(noCredentials.stderr).to.contain('needs --token T (or WSM_TOKEN) or --api-key K (or WSM_API_KEY)');
  });

  it('packs a folder into a directory registry', async () => {
    const res = await runWsm(['publish', path.join(EXAMPLES_DIR, 'project-tracking-1.0.0'), '--publisher', 'acme', '--registry', registry]);
    expect(res.code, res.stderr).to.equal(0);
    const target = path.join(registry, 'acme', 'project-tracking', '1.0.0.tgz');
    expect(readFileSync(target).equals(await examplePackage('project-tracking-1.0.0'))).to.equal(true);
  });
});

describe('wsm publish to a running service', function () {
  this.timeout(300_000);
  let t: TestServer;
  let work: string;
  let alice: string;
  before(async () => {
    t = await startTestServer({ WSM_REGISTRY: 'self' });
    work = tempDir('wsm-publish-http-');
    alice = await t.token('alice');
    const root = await t.token('root', { systemAdmin: true });
    expect((await t.http.post('/api/v1/registry/publishers').set(bearer(root)).send({ slug: 'acme', owners: ['alice'] })).status).to.equal(201);
  });
  after(async () => { await t.close(); removeDir(t.dataDir); removeDir(work); });

  it('publishes a folder or a .tgz with a token, to the publisher the caller owns; dry run; same bytes again', async () => {
    const folder = path.join(work, 'tiny');
    const archive = await tinyPackage({ name: 'tiny', version: '0.1.0' });
    const file = path.join(work, 'tiny.tgz');
    writeFileSync(file, archive);
    const dry = await runWsm(['publish', file, '--url', t.url, '--token', alice, '--dry-run']);
    expect(dry.code, dry.stderr).to.equal(0);
    expect(dry.stdout).to.contain('Dry run: acme/tiny 0.1.0 passes every check; nothing was stored');
    expect((await t.http.get('/api/v1/registry/packages/acme/tiny')).status).to.equal(404);
    const res = await runWsm(['publish', file, '--url', t.url], { WSM_TOKEN: alice });
    expect(res.code, res.stderr).to.equal(0);
    expect(res.stdout).to.contain(`Published acme/tiny 0.1.0 to ${t.url} (sha256:`);
    const view = await t.http.get('/api/v1/registry/packages/acme/tiny');
    expect(view.body.data.versions.map((v: { version: string }) => v.version)).to.deep.equal(['0.1.0']);
    const again = await runWsm(['publish', file, '--url', t.url, '--token', alice, '--publisher', 'acme']);
    expect(again.code, again.stderr).to.equal(0);
    expect(again.stdout).to.contain('already published with these bytes');
    // A folder (the example's own matrix URI is the "examples" publisher's: it is given another).
    mkdirSync(folder);
    cpSync(path.join(EXAMPLES_DIR, 'project-tracking-1.0.0'), folder, { recursive: true });
    const manifestFile = path.join(folder, 'manifest.json');
    const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as { matrices: Array<{ uri: string; path: string }> };
    for (const matrix of manifest.matrices) {
      const turtleFile = path.join(folder, matrix.path);
      writeFileSync(turtleFile, readFileSync(turtleFile, 'utf8').replaceAll(matrix.uri, `${matrix.uri}-acme`));
      matrix.uri = `${matrix.uri}-acme`;
    }
    writeFileSync(manifestFile, JSON.stringify(manifest, null, 2));
    const fromFolder = await runWsm(['publish', folder, '--url', t.url, '--token', alice]);
    expect(fromFolder.code, fromFolder.stderr).to.equal(0);
    expect((await t.http.get('/api/v1/registry/packages/acme/project-tracking')).body.data.versions[0].version).to.equal('1.0.0');
  });

  it('shows why the service refused it, with exit code 1', async () => {
    const file = path.join(work, 'broken.tgz');
    writeFileSync(file, await tinyPackage({ name: 'broken', matrices: [{ name: 'main', uri: 'https://example.org/b', turtle:
      '@prefix mtx: <https://poliglot.io/os/spec/matrix#> . <https://example.org/b> a mtx:Matrix .' }] }));
    const res = await runWsm(['publish', file, '--url', t.url, '--token', alice]);
    expect(res.code).to.equal(1);
    expect(res.stderr).to.match(/SHACL validation found \d+ violation/);
    expect(res.stderr).to.match(/\n {2}- .*label/);
    const denied = await runWsm(['publish', file, '--url', t.url, '--token', await t.token('bob'), '--publisher', 'acme']);
    expect(denied.code).to.equal(1);
    expect(denied.stderr).to.contain('Only the owners of publisher "acme"');
  });

  it('sends an API key as X-Api-Key', async () => {
    const seen: Array<string | undefined> = [];
    const capture = http.createServer((req, res) => {
      seen.push(req.headers['x-api-key'] as string | undefined);
      res.writeHead(401, { 'Content-Type': 'application/json' }).end(JSON.stringify({ success: false, error: { code: 'UNAUTHORIZED', message: 'unknown key' } }));
    });
    await new Promise<void>((resolve) => capture.listen(0, '127.0.0.1', resolve));
    try {
      const file = path.join(work, 'k.tgz');
      writeFileSync(file, await tinyPackage({ name: 'k' }));
      const res = await runWsm(['publish', file, '--url', `http://127.0.0.1:${(capture.address() as AddressInfo).port}`, '--api-key', 'wsm_test_key', '--publisher', 'acme']);
      expect(res.code).to.equal(1);
      expect(res.stderr).to.contain('unknown key');
      expect(seen).to.deep.equal(['wsm_test_key']);
    } finally {
      capture.close();
    }
  });
});
