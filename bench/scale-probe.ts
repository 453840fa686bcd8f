/**
 * Scale probe (not part of `npm run bench`): how the per-request IAM/users
 * path behaves with 10 members against 10,000.
 *
 *   npx tsx bench/scale-probe.ts [--samples 300] [--members 10000] [--keep] [--data DIR]
 *
 * Starts the service in-process on a temp data dir, creates a workspace,
 * adds members through the API (PUT /api/v1/workspaces/{ws}/members/{username},
 * 16 at a time), and times sequential requests (median and p90 of
 * `--samples`, performance.now()) of I5 page 1, I6 and GET workspace at 10
 * members and again at `--members`. `--keep` keeps the data dir and prints it;
 * `--data DIR` reuses a kept one (already grown: only the large figures).
 * `--only i5` (or i6, ws, ...) restricts the targets.
 * `--throughput`: afterwards, the reads figure for I6 on the grown data: the
 * service as a child process (as `npm run bench` runs it) against the
 * static Express baseline answering the same bytes, 32 connections, 5 s.
 * `--after-write`: also times I5 page 1 right after a membership write.
 */
import path from 'node:path';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import os from 'node:os';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { startServer } from '../src/server.js';
import { mintToken } from '../src/auth/tokens.js';
import { load, startBaseline, startService } from './lib.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const samples = Number(arg('samples') ?? 300);
const members = Number(arg('members') ?? 10_000);
const keep = process.argv.includes('--keep');
const reuse = arg('data');
const only = arg('only')?.split(',');
const throughput = process.argv.includes('--throughput');
const afterWrite = process.argv.includes('--after-write');

const dataDir = reuse ?? mkdtempSync(path.join(os.tmpdir(), 'wsm-scale-probe-'));
const grown = !!reuse && existsSync(dataDir);
const config = loadConfig({
  PORT: '0', HOST: '127.0.0.1', WSM_DATA_DIR: dataDir, WSM_REGISTRY: path.join(dataDir, 'registry'),
  WSM_LOG_LEVEL: 'silent', WSM_DEMO: 'false',
});
const server = await startServer(config, createLogger('silent'));
const url = server.url;
const slug = 'probe';

async function call(token: string, method: string, p: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(url + p, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

const root = await mintToken(dataDir, 'root', { systemAdmin: true, ttlSeconds: 7200 });
const owner = await mintToken(dataDir, 'owner', { email: 'owner@probe.example', ttlSeconds: 7200 });
if (!grown) {
  const created = await call(root, 'POST', '/api/v1/workspaces', { slug, owner: 'owner' });
  if (created.status !== 201) throw new Error(`workspace creation answered ${created.status}`);
}
const ws = await call(owner, 'GET', `/api/v1/workspaces/${slug}`);
const ownerId: string = ws.json.data.owner.id;

async function grow(from: number, to: number): Promise<number> {
  const started = performance.now();
  let next = from;
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (next < to) {
      const i = next++;
      const r = await call(owner, 'PUT', `/api/v1/workspaces/${slug}/members/user-${String(i).padStart(5, '0')}`, { email: `user-${i}@probe.example` });
      if (r.status !== 200) throw new Error(`PUT member ${i} answered ${r.status}: ${JSON.stringify(r.json)}`);
    }
  }));
  return performance.now() - started;
}

function pct(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function time(p: string): Promise<{ p50: number; p90: number }> {
  const times: number[] = [];
  for (let i = 0; i < samples + 20; i++) {
    const started = performance.now();
    const res = await fetch(url + p, { headers: { Authorization: `Bearer ${owner}` } });
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`${p} answered ${res.status}`);
    if (i >= 20) times.push(performance.now() - started);
  }
  return { p50: pct(times, 50), p90: pct(times, 90) };
}

const targets = [
  { key: 'i5', name: 'I5 page 1', path: `/api/v1/iam/${slug}/users?page=1&pageSize=20` },
  { key: 'i5last', name: 'I5 page 50', path: `/api/v1/iam/${slug}/users?page=50&pageSize=20` },
  { key: 'i6', name: 'I6 GET owner', path: `/api/v1/iam/${slug}/users/${ownerId}` },
  { key: 'ws', name: 'GET workspace', path: `/api/v1/workspaces/${slug}` },
  { key: 'list', name: 'GET workspaces', path: '/api/v1/workspaces' },
].filter((t) => !only || only.includes(t.key));

async function measureAll(): Promise<Map<string, { p50: number; p90: number }>> {
  const out = new Map<string, { p50: number; p90: number }>();
  for (const t of targets) out.set(t.key, await time(t.path));
  return out;
}

const fmt = (n: number) => n.toFixed(2).padStart(8);
try {
  let small: Map<string, { p50: number; p90: number }> | null = null;
  if (!grown) {
    await grow(0, 9); // 10 members with the owner
    small = await measureAll();
    const ms = await grow(9, members - 1);
    console.log(`grew to ${members} members in ${(ms / 1000).toFixed(1)} s`);
  }
  const large = await measureAll();
  const count = await call(owner, 'GET', `/api/v1/iam/${slug}/users?page=1&pageSize=1`);
  console.log(`members: ${count.json.data.totalItems}, quads: ${await server.services.store.size()}, samples: ${samples}`);
  console.log(`${'target'.padEnd(16)} ${'10 p50'.padStart(8)} ${'10 p90'.padStart(8)} ${'N p50'.padStart(8)} ${'N p90'.padStart(8)}  ratio p50`);
  for (const t of targets) {
    const s = small?.get(t.key);
    const l = large.get(t.key)!;
    console.log(`${t.name.padEnd(16)} ${s ? fmt(s.p50) : '       -'} ${s ? fmt(s.p90) : '       -'} ${fmt(l.p50)} ${fmt(l.p90)}  ${s ? (l.p50 / s.p50).toFixed(2) + 'x' : '-'}`);
  }
  if (afterWrite) {
    const times: number[] = [];
    for (let i = 0; i < 20; i++) {
      await call(owner, 'PUT', `/api/v1/workspaces/${slug}/members/probe-extra`, {});
      const started = performance.now();
      await call(owner, 'GET', targets.find((t) => t.key === 'i5')?.path ?? `/api/v1/iam/${slug}/users?page=1&pageSize=20`);
      times.push(performance.now() - started);
      await call(owner, 'DELETE', `/api/v1/workspaces/${slug}/members/probe-extra`);
    }
    console.log(`I5 page 1 right after a membership write: p50 ${pct(times, 50).toFixed(2)} ms (20 samples)`);
  }
} finally {
  await server.close();
}
if (throughput) {
  const svc = await startService(dataDir, { WSM_DEMO: 'false' });
  const baseline = await startBaseline('static');
  try {
    const p = `/api/v1/iam/${slug}/users/${ownerId}`;
    const probe = await fetch(svc.url + p, { headers: { Authorization: `Bearer ${owner}` } });
    const bytes = Buffer.from(await probe.arrayBuffer());
    if (probe.status !== 200) throw new Error(`I6 answered ${probe.status}`);
    await fetch(`${baseline.url}/__set`, { method: 'POST', headers: { 'X-Content-Type': probe.headers.get('content-type') ?? 'application/json' }, body: bytes });
    const opts = { connections: 32, duration: 5, headers: { Authorization: `Bearer ${owner}` } };
    await load({ ...opts, url: svc.url + p, duration: 1 });
    const service = await load({ ...opts, url: svc.url + p });
    await load({ ...opts, url: baseline.url + p, duration: 1 });
    const base = await load({ ...opts, url: baseline.url + p });
    console.log(`I6 at 32 connections: service ${service.rps.toFixed(0)} req/s (p99 ${service.p99} ms, ${service.non2xx} non-2xx), baseline ${base.rps.toFixed(0)} req/s: ${(service.rps / base.rps).toFixed(2)}x`);
  } finally {
    await baseline.stop();
    await svc.stop();
  }
}
if (keep || reuse) console.log(`data dir: ${dataDir}`);
else rmSync(dataDir, { recursive: true, force: true });
