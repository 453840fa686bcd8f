import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir, removeDir } from '../helpers/server.js';
import { mintToken } from '../../src/auth/tokens.js';
import { freePort } from '../helpers/ports.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

interface Served { proc: ChildProcess; url: string; stdout: () => string; stderr: () => string; exited: Promise<number | null> }

/** Starts `wsm serve` as a real child process and waits for /health (or for it to exit). */
async function serve(dataDir: string, env: Record<string, string> = {}): Promise<Served> {
  const port = await freePort();
  const proc = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'src/cli.ts'), 'serve'], {
    cwd: root,
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', WSM_DATA_DIR: dataDir, WSM_REGISTRY: path.join(dataDir, 'registry'), WSM_LOG_LEVEL: 'warn', ...env },
  });
  let out = '';
  let err = '';
  proc.stdout!.on('data', (d) => { out += d; });
  proc.stderr!.on('data', (d) => { err += d; });
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline && proc.exitCode === null) {
    try {
      if ((await fetch(`${url}/health`)).ok) break;
    } catch { /* starting */ }
    await new Promise((r) => setTimeout(r, 25));
  }
  return { proc, url, stdout: () => out, stderr: () => err, exited };
}

describe('running the service as a process', function () {
  this.timeout(120_000);
  let dataDir: string;
  before(function () {
    // Remote mode (WSM_TEST_STORE=sparql): these are about the data directory's journal and lock; test/remote/instances.test.ts runs and kills processes on the engine.
    if (process.env.WSM_TEST_STORE === 'sparql') this.skip();
  });
  beforeEach(() => { dataDir = tempDir(); });
  afterEach(() => removeDir(dataDir));

  it('on the first start creates the demo workspace and prints a working token', async () => {
    const s = await serve(dataDir, { WSM_DEMO: 'true' });
    try {
      const lines = s.stdout().split('\n');
      const token = lines.find((l) => /^ey[\w-]+\.[\w-]+\.[\w-]+$/.test(l.trim()))!.trim();
      expect(s.stdout()).to.match(/curl -H "Authorization: Bearer/);
      // It also says how to give the administrator a password to sign in with.
      expect(s.stdout()).to.contain('npm run wsm -- passwd admin --system-admin');
      const res = await fetch(`${s.url}/api/v1/workspaces/demo`, { headers: { Authorization: `Bearer ${token}` } });
      expect(res.status).to.equal(200);
      expect((await res.json() as { data: { owner: { username: string } } }).data.owner.username).to.equal('admin');
    } finally {
      s.proc.kill('SIGTERM');
      expect(await s.exited, s.stderr() + s.stdout()).to.equal(0);
    }
    // A second start does not create it again nor print a new token.
    const again = await serve(dataDir, { WSM_DEMO: 'true' });
    try {
      expect(again.stdout()).not.to.match(/First start/);
    } finally {
      again.proc.kill('SIGTERM');
      await again.exited;
    }
  });

  it('writes the log line of every request answered before a clean stop, though the log is written in the background', async () => {
    const s = await serve(dataDir, { WSM_LOG_LEVEL: 'info' });
    const ids: Array<{ id: string; status: number }> = [];
    try {
      // 600 requests at once, answered 200 and 401, then the stop at once: many lines are still buffered then.
      const answers = await Promise.all(Array.from({ length: 600 }, (_, i) => fetch(`${s.url}${i % 2 ? '/health' : '/api/v1/workspaces'}`)));
      for (const res of answers) {
        await res.arrayBuffer();
        ids.push({ id: res.headers.get('x-request-id')!, status: res.status });
      }
    } finally {
      s.proc.kill('SIGTERM');
    }
    expect(await s.exited, s.stderr()).to.equal(0);
    const lines = s.stdout().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string; req?: { id: string }; res?: { statusCode: number } });
    const logged = new Map(lines.filter((l) => l.req).map((l) => [l.req!.id, l]));
    expect(new Set(ids.map((a) => a.status))).to.deep.equal(new Set([200, 401]));
    for (const { id, status } of ids) {
      expect(logged.get(id), `the line of request ${id}`).to.deep.include({ msg: 'request completed', res: { statusCode: status } });
    }
    // The stop's own line comes after them.
    expect(lines.at(-1)!.msg).to.equal('stopping');
  });

  it('keeps a second process off the data directory', async () => {
    const first = await serve(dataDir);
    try {
      const second = await serve(dataDir);
      const code = await second.exited;
      expect(code).to.not.equal(0);
      expect(second.stderr()).to.match(/data directory/i);
      // The first one still answers.
      expect((await fetch(`${first.url}/health`)).status).to.equal(200);
    } finally {
      first.proc.kill('SIGTERM');
      await first.exited;
    }
  });

  it('loses no acknowledged write when killed with SIGKILL mid-stream', async () => {
    // Throughput matters here (enough writes in flight when it dies): without the suite's
    // check of write declarations, which parses every update (src/store/declared-graphs.ts).
    const s = await serve(dataDir, { WSM_TEST_CHECK_GRAPHS: '0' });
    const token = await mintToken(dataDir, 'root', { systemAdmin: true, ttlSeconds: 600 });
    const acknowledged: string[] = [];
    let stop = false;
    const writer = async (lane: number) => {
      for (let i = 0; !stop; i++) {
        const slug = `ws-${lane}-${i}`;
        try {
          const res = await fetch(`${s.url}/api/v1/workspaces`, {
            method: 'POST',
            headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
            body: JSON.stringify({ slug, owner: `owner-${slug}` }),
          });
          if (res.status === 201) acknowledged.push(slug);
        } catch {
          return; // the process is gone
        }
      }
    };
    const lanes = [0, 1, 2, 3, 4, 5, 6, 7].map(writer);
    await new Promise((r) => setTimeout(r, 1500));
    s.proc.kill('SIGKILL');
    stop = true;
    await Promise.all(lanes);
    await s.exited;
    expect(acknowledged.length).to.be.greaterThan(10);

    const restarted = await serve(dataDir);
    try {
      const res = await fetch(`${restarted.url}/api/v1/workspaces`, { headers: { Authorization: `Bearer ${token}` } });
      const listed = new Set(((await res.json()) as { data: Array<{ slug: string }> }).data.map((w) => w.slug));
      for (const slug of acknowledged) expect(listed.has(slug), `acknowledged ${slug} survives`).to.equal(true);
      // Nothing partial: every workspace that exists has its owner as a working administrator.
      for (const slug of [...listed].slice(-5)) {
        const owner = await mintToken(dataDir, `owner-${slug}`, { ttlSeconds: 600 });
        const got = await fetch(`${restarted.url}/api/v1/workspaces/${slug}`, { headers: { Authorization: `Bearer ${owner}` } });
        expect(got.status, slug).to.equal(200);
      }
    } finally {
      restarted.proc.kill('SIGTERM');
      await restarted.exited;
    }
  });
});
