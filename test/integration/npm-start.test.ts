import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir, removeDir } from '../helpers/server.js';
import { freePort } from '../helpers/ports.js';
import { tinyPackage } from '../helpers/packages.js';
import { bigMatrixTurtle } from '../helpers/lifecycle.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

interface Started { proc: ChildProcess; url: string; stdout: () => string; exited: Promise<number | null> }

/** Runs `npm start`, exactly as the README says, and waits for /health. */
async function npmStart(dataDir: string): Promise<Started> {
  const port = await freePort();
  const proc = spawn('npm', ['start'], {
    cwd: root,
    // A 4 MiB journal floor (the default is 16): the installs below then write enough journal for a snapshot.
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', WSM_DATA_DIR: dataDir, WSM_LOG_LEVEL: 'info', WSM_SNAPSHOT_JOURNAL_MB: '4' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  proc.stdout!.on('data', (d) => { out += d; });
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`npm start exited with ${proc.exitCode}:\n${out}`);
    if (Date.now() > deadline) throw new Error(`npm start did not answer /health:\n${out}`);
    try {
      if ((await fetch(`${url}/health`)).ok) break;
    } catch { /* starting */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { proc, url, stdout: () => out, exited };
}

async function stop(s: Started): Promise<number | null> {
  s.proc.kill('SIGTERM');
  return s.exited;
}

describe('npm start: the service from its compiled JavaScript', function () {
  this.timeout(180_000);
  let dataDir: string;
  before(function () {
    // Remote mode (WSM_TEST_STORE=sparql): this is about the default start on the embedded store.
    if (process.env.WSM_TEST_STORE === 'sparql') this.skip();
  });
  beforeEach(() => { dataDir = tempDir(); });
  afterEach(() => removeDir(dataDir));

  it('builds dist/, serves from it with every kind of worker, stops on SIGTERM and starts again with its data', async () => {
    const s = await npmStart(dataDir);
    let base = s.url;
    let token = '';
    const api = async (method: string, p: string, body?: unknown, type = 'application/json'): Promise<{ status: number; json: { data?: unknown; error?: unknown } }> => {
      const res = await fetch(`${base}${p}`, {
        method,
        headers: { Authorization: `Bearer ${token}`, ...(body === undefined || body instanceof FormData ? {} : { 'Content-Type': type }) },
        body: body === undefined ? undefined : body instanceof FormData ? body : typeof body === 'string' ? body : JSON.stringify(body),
      });
      return { status: res.status, json: await res.json() as { data?: unknown } };
    };
    const finished = async (id: string): Promise<{ status: string; errorMessage: string | null }> => {
      for (const deadline = Date.now() + 120_000; Date.now() < deadline;) {
        const res = await api('GET', `/api/v1/packages/demo/commands/${id}`);
        expect(res.status).to.equal(200);
        const c = res.json.data as { status: string; errorMessage: string | null };
        if (c.status === 'completed' || c.status === 'failed') return c;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`command ${id} did not finish`);
    };
    const upload = async (archive: Buffer) => {
      const form = new FormData();
      form.append('file', new Blob([new Uint8Array(archive)], { type: 'application/gzip' }), 'package.tgz');
      const res = await api('POST', '/api/v1/packages/demo/install', form);
      expect(res.status, JSON.stringify(res.json)).to.equal(202);
      return finished((res.json.data as { id: string }).id);
    };
    try {
      // It ran the build: the service is the compiled tree.
      expect(existsSync(path.join(root, 'dist', 'cli.js'))).to.equal(true);
      token = s.stdout().split('\n').map((l) => l.trim()).find((l) => /^ey[\w-]+\.[\w-]+\.[\w-]+$/.test(l))!;
      expect(token, s.stdout()).to.be.a('string');

      // The pipeline worker (parse, SHACL, derivation): an install from the hosted registry, with its dependency.
      const install = await api('POST', '/api/v1/packages/demo/registry/examples/incident-response/install', {});
      expect(install.status, JSON.stringify(install.json)).to.equal(202);
      expect(await finished((install.json.data as { id: string }).id)).to.include({ status: 'completed', errorMessage: null });

      // A large first install and its upgrade (the store's check workers), enough journal for a snapshot (its worker).
      const uri = 'https://example.org/packages/big/main';
      const big = (version: string, triples: number) => tinyPackage({ name: 'big', version, matrices: [{ name: 'main', uri, turtle: bigMatrixTurtle(uri, triples) }] });
      expect(await upload(await big('1.0.0', 30_000))).to.include({ status: 'completed' });
      expect(await upload(await big('1.1.0', 40_000))).to.include({ status: 'completed' });

      // The parse worker (C5 parses the script) and a query worker (the execution). This write, the first after
      // the journal passed its threshold, starts a snapshot (its worker); the stop waits for it.
      const created = await api('POST', '/api/v1/commands/demo', {
        alias: 'roles', scriptType: 'CONSTRUCT',
        scriptContent: 'PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> PREFIX iam: <https://poliglot.io/os/spec/iam#> CONSTRUCT { ?r rdfs:label ?label } WHERE { ?r a iam:Role ; rdfs:label ?label }',
      });
      expect(created.status, JSON.stringify(created.json)).to.equal(200);
      const executed = await api('POST', `/api/v1/commands/demo/${(created.json.data as { id: string }).id}/execute`, {});
      expect(executed.status, JSON.stringify(executed.json)).to.equal(200);
      expect(JSON.stringify(executed.json)).to.include('Incident commander');

      // The web console is bundled from its sources on the first request.
      const app = await fetch(`${s.url}/console/app.js`);
      expect(app.status).to.equal(200);
      expect(app.headers.get('content-type')).to.match(/javascript/);
    } finally {
      expect(await stop(s)).to.equal(0);
    }

    const again = await npmStart(dataDir);
    base = again.url;
    try {
      expect(again.stdout()).to.match(/store opened: snapshot seq [1-9]/);
      const sparql = await api('POST', '/api/v1/sparql/demo', 'SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { <https://example.org/packages/big/main#item19999> ?p ?o } }', 'application/sparql-query');
      // The admin endpoint runs in a query worker too.
      expect(sparql.status, JSON.stringify(sparql.json)).to.equal(200);
      expect(JSON.stringify(sparql.json)).to.match(/"2"|:2\b/);
      const packages = await api('GET', '/api/v1/packages/demo?pageSize=100');
      const names = (packages.json.data as { items: Array<{ name: string; currentVersion: string }> }).items.map((p) => `${p.name}@${p.currentVersion}`);
      expect(names, JSON.stringify(packages.json)).to.include.members(['incident-response@1.0.0', 'big@1.1.0']);
    } finally {
      expect(await stop(again)).to.equal(0);
    }
  });
});
