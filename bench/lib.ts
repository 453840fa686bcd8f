import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, readFileSync, openSync, closeSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { buildService } from '../scripts/build.js';

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
  /** Lowest and highest ratio over the interleaved pairs, when measured in pairs. */
  spread?: [number, number];
  /** How many service/baseline pairs the ratio is the median of. */
  pairs?: number;
  note?: string;
  /** Why the target was missed (printed after "missed"). */
  cause?: string;
}

export const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

type Check = (ratio: number, value: number, baseline: number) => boolean;

/**
 * A figure. With `ratios` (one per interleaved pair), the ratio is their
 * median and the spread their range; `value` and `baseline` are then the
 * medians of the two sides. `cause` says why a missed target was missed;
 * when some pairs met it and others did not, that is said too.
 */
export function figure(f: Omit<Figure, 'ratio' | 'met' | 'spread' | 'pairs' | 'cause'> & {
  check: Check;
  ratios?: number[];
  cause?: string | ((ratio: number, value: number, baseline: number) => string);
}): Figure {
  const { check, ratios, cause, ...rest } = f;
  const ratio = ratios?.length ? median(ratios) : f.baseline === 0 ? Number.POSITIVE_INFINITY : f.value / f.baseline;
  const met = check(ratio, f.value, f.baseline);
  const out: Figure = { ...rest, ratio, met };
  if (ratios?.length) {
    out.spread = [Math.min(...ratios), Math.max(...ratios)];
    out.pairs = ratios.length;
  }
  if (!met) {
    const why = typeof cause === 'function' ? cause(ratio, f.value, f.baseline) : cause ?? 'cause not analysed';
    const passing = ratios ? ratios.filter((r) => check(r, f.value, f.baseline)).length : 0;
    out.cause = passing > 0 ? `${why}; ${passing} of ${ratios!.length} pairs met it, so load on the machine moves it` : why;
  }
  return out;
}

/**
 * Measures service and baseline in `pairs` interleaved pairs of windows
 * (the order alternates, so drift on the machine falls on both sides) and
 * answers each side's measurements and the per-pair ratios.
 */
export async function interleave<T>(pairs: number, service: () => Promise<T>, baseline: () => Promise<T>, metric: (t: T) => number): Promise<{ service: T[]; baseline: T[]; ratios: number[]; serviceMedian: number; baselineMedian: number }> {
  const s: T[] = [];
  const b: T[] = [];
  const ratios: number[] = [];
  for (let i = 0; i < pairs; i++) {
    let sv: T;
    let bv: T;
    if (i % 2 === 0) { sv = await service(); bv = await baseline(); } else { bv = await baseline(); sv = await service(); }
    s.push(sv);
    b.push(bv);
    ratios.push(metric(bv) === 0 ? Number.POSITIVE_INFINITY : metric(sv) / metric(bv));
  }
  return { service: s, baseline: b, ratios, serviceMedian: median(s.map(metric)), baselineMedian: median(b.map(metric)) };
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

/** Node's arguments that run each entry point spawned so far, compiled once per bench process (see `compiled`). */
const entries = new Map<string, Promise<string[]>>();

/**
 * The node arguments that run `script` compiled to JavaScript. The service
 * (`src/cli.ts`) is built into `dist/` and run with source maps, as
 * `npm start` runs it. A bench script (baseline server, bare load) is
 * compiled alone into bench/.work, so that a baseline does not pay tsx's
 * start-up either; these scripts import packages only.
 */
function compiled(script: string): Promise<string[]> {
  let entry = entries.get(script);
  if (!entry) {
    entry = script === 'src/cli.ts'
      ? buildService().then(() => ['--enable-source-maps', path.join(ROOT, 'dist/cli.js')])
      : (async () => {
        const out = path.join(ROOT, 'bench/.work', `${path.basename(script, '.ts')}.mjs`);
        await esbuild.build({ entryPoints: [path.join(ROOT, script)], outfile: out, bundle: false, platform: 'node', format: 'esm', target: 'node20', logLevel: 'warning' });
        return [out];
      })();
    entries.set(script, entry);
  }
  return entry;
}

/**
 * Spawns a TypeScript entry point compiled to JavaScript (`compiled`) and
 * waits until `readyPath` answers 200. `startMs` counts from the spawn: the
 * compilation is not part of a start.
 */
export async function spawnTs(script: string, args: string[], env: Record<string, string | undefined>, readyPath = '/health', timeoutMs = 120_000, nodeArgs: string[] = []): Promise<Proc & { startMs: number }> {
  const entry = await compiled(script);
  const port = await freePort();
  const started = performance.now();
  // Its output (the service's request log, at the service's default level)
  // goes to a file, written by the kernel: no process of the bench reads it.
  // BENCH_KEEP_LOGS=<dir>: the files are kept there, one per process started.
  const kept = process.env.BENCH_KEEP_LOGS;
  const logDir = kept ? path.resolve(kept) : workDir('log');
  if (kept) mkdirSync(logDir, { recursive: true });
  const out = openSync(path.join(logDir, kept ? `${path.basename(script, '.ts')}-${Date.now()}-${port}.log` : 'stdout.log'), 'a');
  // BENCH_CPU_PROF=<dir>: the service writes a CPU profile there when it stops (read it to find what holds the event loop).
  const profile = process.env.BENCH_CPU_PROF && script === 'src/cli.ts' ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  const proc = spawn(process.execPath, [...profile, ...nodeArgs, ...entry, ...args], {
    cwd: ROOT,
    // A key given as undefined is removed from the inherited environment.
    env: Object.fromEntries(Object.entries({ ...process.env, PORT: String(port), HOST: '127.0.0.1', ...env }).filter(([, v]) => v !== undefined)),
    stdio: ['ignore', out, 'inherit'],
  });
  closeSync(out);
  if (!kept) proc.once('exit', () => removeDir(logDir));
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

/**
 * Starts the service on a data dir, with its defaults (log level, the
 * hosted registry) unless `env` says otherwise. WSM_LOG_LEVEL and
 * WSM_REGISTRY set in the bench's own environment are not passed on.
 * BENCH_SERVICE_NODE_ARGS, when set, are node options (space-separated)
 * given to the service only: `--cpu-prof --cpu-prof-dir=DIR` profiles the
 * service under a figure's load (the profile is written when it stops).
 */
/** The store a bench's shell set (`WSM_STORE=cluster` printed by `npm run postgres`) never reaches a service: a figure says which store it runs on. */
const storeSettingsCleared = Object.fromEntries(Object.keys(process.env).filter((k) => /^WSM_(STORE|POSTGRES_URL|SPARQL_|CLUSTER_)/.test(k)).map((k) => [k, undefined]));

export const startService = async (dataDir: string, env: Record<string, string> = {}, timeoutMs = 120_000) =>
  spawnTs('src/cli.ts', ['serve'], { ...storeSettingsCleared, WSM_LOG_LEVEL: undefined, WSM_REGISTRY: undefined, WSM_DATA_DIR: dataDir, ...await serviceStore(dataDir), ...env },
    '/health', timeoutMs, (process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(' ').filter(Boolean));

/** Settings of the store a started service runs on, by its data directory; none: the embedded store. */
let serviceStore: (dataDir: string) => Promise<Record<string, string>> = () => Promise.resolve({});

/**
 * Runs `fn` with every service started meanwhile on the store `settings`
 * gives for its data directory (a restart on the same directory gets the
 * same settings): the cluster figure runs the other figures this way.
 */
export async function withServiceStore<T>(settings: (dataDir: string) => Promise<Record<string, string>>, fn: () => Promise<T>): Promise<T> {
  const previous = serviceStore;
  const byDir = new Map<string, Promise<Record<string, string>>>();
  serviceStore = (dataDir) => {
    const key = path.resolve(dataDir);
    if (!byDir.has(key)) byDir.set(key, settings(key));
    return byDir.get(key)!;
  };
  try {
    return await fn();
  } finally {
    serviceStore = previous;
  }
}

/** Starts a baseline server (bench/baseline-server.ts) in a mode. */
export const startBaseline = (mode: 'static' | 'fsync' | 'postgres', env: Record<string, string> = {}) =>
  spawnTs('bench/baseline-server.ts', [mode], env, '/ready');

/** One request kind's latency in a load of several kinds (milliseconds, fractional). */
export interface KindResult { kind: string; count: number; non2xx: number; p50: number; p99: number; max: number }

export interface LoadResult { rps: number; p50: number; p99: number; max: number; errors: number; non2xx: number; byKind?: KindResult[] }

/**
 * One request shape for the load generator; `uniqueBody` has `{{n}}` replaced
 * per request; `label` names the kind in `LoadResult.byKind`.
 */
export interface LoadRequest { method?: 'GET' | 'POST' | 'PUT' | 'DELETE'; path?: string; headers?: Record<string, string>; body?: string; uniqueBody?: string; label?: string }

/** What bench/loadgen.ts runs (autocannon's options that survive JSON). */
export interface LoadSpec extends LoadRequest {
  url: string;
  connections: number;
  duration: number;
  requests?: LoadRequest[];
  /** Requests per second per connection (autocannon's `connectionRate`); unset: as fast as answers come. */
  connectionRate?: number;
}

/**
 * Runs autocannon in a process of its own (bench/loadgen.ts), so the load
 * generator does not share a process, or an event loop, with what it
 * measures or with the bench.
 */
export async function load(spec: Omit<LoadSpec, 'duration'> & { duration?: number }): Promise<LoadResult> {
  const full: LoadSpec = { duration: 5, ...spec };
  if (full.uniqueBody !== undefined && !full.requests) {
    const { method, path: p, headers, uniqueBody } = full;
    full.requests = [{ method, path: p, headers, uniqueBody }];
    delete full.uniqueBody;
  }
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/loadgen.ts'), JSON.stringify(full)], {
      cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d: string) => { out += d; });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`load generator exited with ${code}`));
      try { resolve(JSON.parse(out) as LoadResult); } catch { reject(new Error(`load generator printed ${out.slice(0, 200)}`)); }
    });
  });
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export async function mintToken(dataDir: string, username: string, systemAdmin = false): Promise<string> {
  const { mintToken: mint } = await import('../src/auth/tokens.js');
  return mint(dataDir, username, { systemAdmin, ttlSeconds: 3600 });
}

/**
 * A GET, retried once when the connection was closed under it: a kept-alive
 * socket the server closes as its idle timeout ends can be picked by the
 * client at that moment (more likely on a loaded machine, where timers
 * fire late). Only idempotent requests are retried.
 */
async function fetchRetryingGet(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (err) {
    const code = (err as { cause?: { code?: string } }).cause?.code;
    if ((init.method ?? 'GET') !== 'GET' || (code !== 'UND_ERR_SOCKET' && code !== 'ECONNRESET')) throw err;
    return fetch(url, init);
  }
}

export async function api(url: string, token: string, method: string, pathName: string, body?: unknown): Promise<{ status: number; json: any; text: string }> {
  const res = await fetchRetryingGet(url + pathName, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, json, text };
}

/**
 * Uploads a package (P2) and waits until its command completes; answers the
 * time from request to completion. Its status is polled (P8) every `pollMs`:
 * 2 ms times one install closely; many clients growing a workspace poll less
 * often, or their polling becomes most of what the service does.
 */
export async function installPackage(url: string, token: string, workspace: string, archive: Buffer, name = 'package.tgz', pollMs = 2): Promise<{ ms: number; commandId: string }> {
  const started = performance.now();
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(archive)], { type: 'application/gzip' }), name);
  const res = await fetch(`${url}/api/v1/packages/${workspace}/install`, { method: 'POST', headers: { Authorization: `Bearer ${token}` }, body: form });
  const body = await res.json() as any;
  if (res.status !== 202) throw new Error(`install answered ${res.status}: ${JSON.stringify(body.error ?? body)}`);
  return waitForCommand(url, token, workspace, body.data.id as string, started, pollMs);
}

/**
 * Publishes a package to the service's hosted registry (the default
 * registry) under `publisher`, created for `owner` with the system
 * administrator's token, then installs it from there (P1) and waits for
 * its command.
 */
export async function installFromRegistry(url: string, rootToken: string, token: string, owner: string, workspace: string, publisher: string, pkgName: string, archive: Buffer): Promise<{ ms: number; commandId: string }> {
  const created = await api(url, rootToken, 'POST', '/api/v1/registry/publishers', { slug: publisher, owners: [owner] });
  if (created.status !== 201 && created.status !== 409) throw new Error(`publisher creation answered ${created.status}: ${created.text.slice(0, 200)}`);
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(archive)], { type: 'application/gzip' }), 'package.tgz');
  const published = await fetch(`${url}/api/v1/registry/publishers/${publisher}/packages/${pkgName}/versions`, { method: 'POST', headers: { Authorization: `Bearer ${token}` }, body: form });
  if (published.status !== 201 && published.status !== 200) throw new Error(`publish answered ${published.status}: ${(await published.text()).slice(0, 300)}`);
  const started = performance.now();
  const res = await api(url, token, 'POST', `/api/v1/packages/${workspace}/registry/${publisher}/${pkgName}/install`, {});
  if (res.status !== 202) throw new Error(`registry install answered ${res.status}: ${res.text.slice(0, 300)}`);
  return waitForCommand(url, token, workspace, res.json.data.id as string, started);
}

export async function waitForCommand(url: string, token: string, workspace: string, commandId: string, started: number, pollMs = 2): Promise<{ ms: number; commandId: string }> {
  for (;;) {
    const cmd = await api(url, token, 'GET', `/api/v1/packages/${workspace}/commands/${commandId}`);
    const status = cmd.json?.data?.status;
    if (status === 'completed') return { ms: performance.now() - started, commandId };
    if (status === 'failed') throw new Error(`install failed: ${cmd.json.data.errorMessage ?? 'see events'}`);
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

/** A running service with a workspace and an administrator token. */
export async function serviceWithWorkspace(slug = 'bench', startTimeoutMs?: number, env: Record<string, string> = {}): Promise<{ svc: Proc; dataDir: string; token: string; root: string; slug: string; close(): Promise<void> }> {
  const dataDir = workDir('svc');
  const svc = await startService(dataDir, { WSM_DEMO: 'false', ...env }, startTimeoutMs);
  const root = await mintToken(dataDir, 'root', true);
  const created = await api(svc.url, root, 'POST', '/api/v1/workspaces', { slug, owner: 'owner' });
  if (created.status !== 201) throw new Error(`workspace creation answered ${created.status}`);
  const token = await mintToken(dataDir, 'owner');
  return { svc, dataDir, token, root, slug, close: async () => { await svc.stop(); removeDir(dataDir); } };
}

/** Sequential requests with sub-millisecond timing (autocannon's histogram counts whole milliseconds). */
export async function sampleLatency(n: number, send: () => Promise<Response>, warmup = 20): Promise<{ p50: number; p99: number }> {
  const times: number[] = [];
  for (let i = 0; i < n + warmup; i++) {
    const started = performance.now();
    const res = await send();
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`answered ${res.status}`);
    if (i >= warmup) times.push(performance.now() - started); // the first `warmup` warm up
  }
  return { p50: percentile(times, 50), p99: percentile(times, 99) };
}
