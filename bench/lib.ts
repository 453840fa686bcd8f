import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, readFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** One measured figure beside its baseline from the same run. */
export interface Figure {
  name: string;
  unit: string;
  value: number;
  baseline: number;
  /** value / baseline. */
  ratio: number;
  /** Human-readable target, e.g. ">= 0.5x". */
  target: string;
  met: boolean;
  note?: string;
}

export function figure(f: Omit<Figure, 'ratio' | 'met'> & { check: (ratio: number, value: number, baseline: number) => boolean }): Figure {
  const ratio = f.baseline === 0 ? Number.POSITIVE_INFINITY : f.value / f.baseline;
  const { check, ...rest } = f;
  return { ...rest, ratio, met: check(ratio, f.value, f.baseline) };
}

export const workDir = (prefix: string): string => mkdtempSync(path.join(os.tmpdir(), `wsm-bench-${prefix}-`));
export const removeDir = (dir: string): void => rmSync(dir, { recursive: true, force: true });

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

export interface Proc {
  url: string;
  proc: ChildProcess;
  stop(): Promise<void>;
  /** Resident set size of the process in bytes (Linux /proc). */
  rss(): number;
}

export function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status);
  return kb ? Number(kb[1]) * 1024 : 0;
}

async function waitFor(url: string, proc: ChildProcess, timeoutMs: number): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < timeoutMs) {
    if (proc.exitCode !== null) throw new Error(`process exited with ${proc.exitCode} before ${url} answered`);
    try {
      const res = await fetch(url);
      if (res.ok) return performance.now() - started;
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`);
}

/** Spawns a TypeScript entry point with node --import tsx and waits until `readyPath` answers 200. */
export async function spawnTs(script: string, args: string[], env: Record<string, string>, readyPath = '/health', timeoutMs = 120_000): Promise<Proc & { startMs: number }> {
  const port = await freePort();
  const started = performance.now();
  const proc = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, script), ...args], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', WSM_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  proc.stdout!.on('data', (d) => { stdout += d; if (stdout.length > 1e6) stdout = stdout.slice(-1e5); });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(url + readyPath, proc, timeoutMs);
  const startMs = performance.now() - started;
  return {
    url,
    proc,
    startMs,
    rss: () => rssOf(proc.pid!),
    stop: () => new Promise<void>((resolve) => {
      if (proc.exitCode !== null) return resolve();
      proc.once('exit', () => resolve());
      proc.kill('SIGTERM');
      setTimeout(() => proc.kill('SIGKILL'), 10_000).unref();
    }),
  };
}

/** Starts the service on a data dir. */
export const startService = (dataDir: string, env: Record<string, string> = {}) =>
  spawnTs('src/cli.ts', ['serve'], { WSM_DATA_DIR: dataDir, WSM_REGISTRY: path.join(dataDir, 'registry'), ...env });

/** Starts a baseline server (bench/baseline-server.ts) in a mode. */
export const startBaseline = (mode: 'static' | 'fsync', env: Record<string, string> = {}) =>
  spawnTs('bench/baseline-server.ts', [mode], env, '/ready');

export interface LoadResult { rps: number; p50: number; p99: number; errors: number; non2xx: number }

/** Runs autocannon against one request shape. */
export async function load(opts: autocannon.Options): Promise<LoadResult> {
  const result = await autocannon({ duration: 5, ...opts });
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
  };
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export async function mintToken(dataDir: string, username: string, systemAdmin = false): Promise<string> {
  const { mintToken: mint } = await import('../src/auth/tokens.js');
  return mint(dataDir, username, { systemAdmin, ttlSeconds: 3600 });
}

export async function api(url: string, token: string, method: string, pathName: string, body?: unknown): Promise<{ status: number; json: any; text: string }> {
  const res = await fetch(url + pathName, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, json, text };
}

/** Uploads a package (P2) and waits until its command completes; answers the time from request to completion. */
export async function installPackage(url: string, token: string, workspace: string, archive: Buffer, name = 'package.tgz'): Promise<{ ms: number; commandId: string }> {
  const started = performance.now();
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(archive)], { type: 'application/gzip' }), name);
  const res = await fetch(`${url}/api/v1/packages/${workspace}/install`, { method: 'POST', headers: { Authorization: `Bearer ${token}` }, body: form });
  const body = await res.json() as any;
  if (res.status !== 202) throw new Error(`install answered ${res.status}: ${JSON.stringify(body.error ?? body)}`);
  const commandId: string = body.data.id;
  for (;;) {
    const cmd = await api(url, token, 'GET', `/api/v1/packages/${workspace}/commands/${commandId}`);
    const status = cmd.json?.data?.status;
    if (status === 'completed') return { ms: performance.now() - started, commandId };
    if (status === 'failed') throw new Error(`install failed: ${cmd.json.data.errorMessage ?? 'see events'}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** A running service with a workspace and an administrator token. */
export async function serviceWithWorkspace(slug = 'bench'): Promise<{ svc: Proc; dataDir: string; token: string; slug: string; close(): Promise<void> }> {
  const dataDir = workDir('svc');
  const svc = await startService(dataDir, { WSM_DEMO: 'false' });
  const root = await mintToken(dataDir, 'root', true);
  const created = await api(svc.url, root, 'POST', '/api/v1/workspaces', { slug, owner: 'owner' });
  if (created.status !== 201) throw new Error(`workspace creation answered ${created.status}`);
  const token = await mintToken(dataDir, 'owner');
  return { svc, dataDir, token, slug, close: async () => { await svc.stop(); removeDir(dataDir); } };
}

/** Sequential requests with sub-millisecond timing (autocannon's histogram counts whole milliseconds). */
export async function sampleLatency(n: number, send: () => Promise<Response>): Promise<{ p50: number; p99: number }> {
  const times: number[] = [];
  for (let i = 0; i < n + 20; i++) {
    const started = performance.now();
    const res = await send();
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`answered ${res.status}`);
    if (i >= 20) times.push(performance.now() - started); // the first 20 warm up
  }
  return { p50: percentile(times, 50), p99: percentile(times, 99) };
}
