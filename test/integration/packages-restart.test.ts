import { expect } from 'chai';
import n3 from 'n3';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import supertest from 'supertest';
import { startTestServer, removeDir, bearer, seedWorkspace, tempDir, type TestServer } from '../helpers/server.js';
import { tinyPackage } from '../helpers/packages.js';
import { uploadAndWait, bigMatrixTurtle } from '../helpers/lifecycle.js';
import { mintToken } from '../../src/auth/tokens.js';
import { freePort } from '../helpers/ports.js';
import { sparql, iri } from '../../src/rdf/sparql.js';
import { emptyEngine, remoteSettings } from '../helpers/remote.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** On the remote store (WSM_TEST_STORE=sparql) the spawned servers inherit the engine's settings from the environment. */
const REMOTE = process.env.WSM_TEST_STORE === 'sparql';

describe('packages across restarts', function () {
  this.timeout(180_000);

  it('keeps installations, commands, events and reports when the server restarts on the same data dir', async () => {
    const dataDir = tempDir();
    let t: TestServer = await startTestServer({}, dataDir);
    try {
      const { tokens } = await seedWorkspace(t, 'acme');
      const done = await uploadAndWait(t, tokens.owner, 'acme', await tinyPackage({ name: 'alpha' }));
      expect(done.status).to.equal('completed');
      const urls = ['/api/v1/packages/acme/alpha', '/api/v1/packages/acme', '/api/v1/packages/acme/alpha/commands',
        `/api/v1/packages/acme/commands/${done.id}`, `/api/v1/packages/acme/commands/${done.id}/events`, `/api/v1/packages/acme/commands/${done.id}/validation-report`];
      const before = await Promise.all(urls.map(async (u) => (await t.http.get(u).set(bearer(tokens.member))).body));
      await t.close();
      t = await startTestServer({}, dataDir);
      const after = await Promise.all(urls.map(async (u) => (await t.http.get(u).set(bearer(tokens.member))).body));
      expect(after).to.deep.equal(before);
      expect(before[0].data.matrices).to.have.length(1);
    } finally {
      await t.close();
      removeDir(dataDir);
    }
  });

  it('after a SIGKILL during a large install, marks the command failed ("interrupted") and leaves no matrix graph of it', async function () {
    // Remote mode: it reads the data directory's journal after the kill; test/remote/instances.test.ts kills an instance mid-install on the engine.
    if (REMOTE) this.skip();
    const dataDir = tempDir();
    const port = await freePort();
    const env = { ...process.env, PORT: String(port), HOST: '127.0.0.1', WSM_DATA_DIR: dataDir, WSM_REGISTRY: path.join(dataDir, 'registry'), WSM_LOG_LEVEL: 'warn', WSM_DEMO: 'false' };
    const spawnServer = async (): Promise<{ proc: ChildProcess; exited: Promise<unknown> }> => {
      const proc = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'src/cli.ts'), 'serve'], { cwd: root, env, stdio: 'ignore' });
      const exited = new Promise((resolve) => proc.on('exit', resolve));
      for (let i = 0; i < 1200; i++) {
        try { if ((await fetch(`http://127.0.0.1:${port}/health`)).ok) break; } catch { /* starting */ }
        await new Promise((r) => setTimeout(r, 25));
      }
      return { proc, exited };
    };
    const http = supertest(`http://127.0.0.1:${port}`);
    let s = await spawnServer();
    try {
      const rootToken = await mintToken(dataDir, 'root', { systemAdmin: true, ttlSeconds: 600 });
      expect((await http.post('/api/v1/workspaces').set(bearer(rootToken)).send({ slug: 'acme', owner: 'root' })).status).to.equal(201);
      const uri = 'https://example.org/packages/huge/main';
      const archive = await tinyPackage({ name: 'huge', matrices: [{ name: 'main', uri, turtle: bigMatrixTurtle(uri, 100_000) }] });
      const res = await http.post('/api/v1/packages/acme/install').set(bearer(rootToken)).attach('file', archive, 'huge.tgz');
      expect(res.status).to.equal(202);
      const id = res.body.data.id as string;
      let status = 'pending';
      while (status === 'pending') {
        status = (await http.get(`/api/v1/packages/acme/commands/${id}`).set(bearer(rootToken))).body.data.status;
      }
      expect(status).to.equal('in_progress');
      s.proc.kill('SIGKILL');
      await s.exited;

      s = await spawnServer();
      const cmd = (await http.get(`/api/v1/packages/acme/commands/${id}`).set(bearer(rootToken))).body.data;
      expect(cmd.status).to.equal('failed');
      expect(cmd.errorMessage).to.match(/interrupted/i);
      const events = (await http.get(`/api/v1/packages/acme/commands/${id}/events`).set(bearer(rootToken))).body.data as Array<{ level: string; message: string }>;
      expect(events.at(-1)!.level).to.equal('ERROR');
      expect(events.at(-1)!.message).to.match(/interrupted/i);
      expect((await http.get('/api/v1/packages/acme/huge').set(bearer(rootToken))).status).to.equal(404);
      // No graph of the matrix: the admin SPARQL view is not in this area, so ask the data dir through a fresh store after stopping.
      s.proc.kill('SIGTERM');
      await s.exited;
      const { openDurableStore } = await import('../../src/store/embedded/durable.js');
      const store = await openDurableStore(dataDir);
      try {
        const graphs = await store.graphNames();
        expect(graphs.filter((g) => g.includes('/matrices/'))).to.deep.equal([]);
        expect(await store.ask(sparql`ASK { GRAPH ?g { ?s ?p ${iri(uri)} } }`)).to.equal(false);
        expect(await store.ask(sparql`ASK { GRAPH ?g { ${iri(uri)} ?p ?o } }`)).to.equal(false);
      } finally {
        await store.close();
      }
      s = await spawnServer();
      // The package can be installed again afterwards.
      const small = await http.post('/api/v1/packages/acme/install').set(bearer(rootToken)).attach('file', await tinyPackage({ name: 'huge' }), 'small.tgz');
      expect(small.status).to.equal(202);
    } finally {
      s.proc.kill('SIGTERM');
      await s.exited;
      removeDir(dataDir);
    }
  });

  it('on the first start publishes the examples into the hosted registry (the default), prints a request that installs one, and the demo\'s slash command runs over it', async () => {
    const dataDir = tempDir();
    // Remote mode: a base IRI of its own, under which the engine holds nothing yet, so this is a first start.
    const base = `https://first-start-${path.basename(dataDir).replace(/[^a-zA-Z0-9-]/g, '')}.example/`;
    const port = await freePort();
    const proc = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'src/cli.ts'), 'serve'], {
      cwd: root,
      // WSM_REGISTRY unset: the README's quick start.
      env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', WSM_DATA_DIR: dataDir, WSM_REGISTRY: '', WSM_LOG_LEVEL: 'warn', WSM_DEMO: 'true', ...(REMOTE ? { WSM_BASE_IRI: base } : {}) },
    });
    let out = '';
    proc.stdout!.on('data', (d) => { out += d; });
    const exited = new Promise((resolve) => proc.on('exit', resolve));
    try {
      for (let i = 0; i < 4800 && !/API docs/.test(out); i++) await new Promise((r) => setTimeout(r, 25));
      const token = out.split('\n').map((l) => l.trim()).find((l) => /^ey[\w-]+\.[\w-]+\.[\w-]+$/.test(l))!;
      const line = out.split('\n').find((l) => l.includes('/registry/') && l.includes('curl -X POST'));
      expect(line, out).to.be.a('string');
      const url = /(http:\/\/\S+\/install)/.exec(line!)![1]!;
      expect(url).to.match(/\/api\/v1\/packages\/demo\/registry\/examples\/incident-response\/install$/);
      const res = await fetch(url, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body: '{}' });
      expect(res.status).to.equal(202);
      const id = ((await res.json()) as { data: { id: string } }).data.id;
      const http = supertest(`http://127.0.0.1:${port}`);
      let cmd = { status: 'pending', errorMessage: null as string | null };
      for (let i = 0; i < 600 && (cmd.status === 'pending' || cmd.status === 'in_progress'); i++) {
        cmd = (await http.get(`/api/v1/packages/demo/commands/${id}`).set(bearer(token))).body.data;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(cmd.status, cmd.errorMessage ?? '').to.equal('completed');
      const pkg = (await http.get('/api/v1/packages/demo/incident-response').set(bearer(token))).body.data;
      expect(pkg).to.include({ registryPublisher: 'examples', registryName: 'incident-response', latestVersion: pkg.currentVersion, updateAvailable: false });
      expect(pkg.matrices.length).to.be.greaterThan(0);
      // Its dependency came first, as a child of that command.
      const dep = (await http.get('/api/v1/packages/demo/project-tracking/commands').set(bearer(token))).body.data;
      expect(dep[0]).to.include({ commandType: 'INSTALL', status: 'completed', version: '1.1.0', parentCommandId: id });
      // The README's slash command of the demo workspace, run as the README shows it, answers the installed agents.
      const run = await http.post('/api/v1/commands/demo/alias/roles-of-agent/execute').set(bearer(token)).set('Accept', 'text/turtle');
      expect(run.status, run.text).to.equal(200);
      expect(Number(run.headers['x-triple-count'])).to.be.greaterThan(0);
      const agents = new n3.Parser().parse(run.text)
        .filter((q) => q.predicate.value === 'http://www.w3.org/1999/02/22-rdf-syntax-ns#type' && q.object.value === 'https://poliglot.io/os/spec/iam#Agent');
      expect(agents, 'the README says seven agents').to.have.length(7);
    } finally {
      proc.kill('SIGTERM');
      await exited;
      removeDir(dataDir);
      const settings = REMOTE ? remoteSettings() : undefined;
      if (settings) await emptyEngine(settings, base);
    }
  });
});
