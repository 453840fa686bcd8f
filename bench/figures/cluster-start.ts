import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import pg from 'pg';
import { figure, removeDir, startService, workDir, type Figure } from '../lib.js';
import { generateTriples } from '../data.js';
import { openClusterStore } from '../../src/store/cluster/open.js';
import { dumpByStream } from '../../src/store/cluster/residency.js';
import { openDurableStore } from '../../src/store/embedded/durable.js';
import { Graphs, workspaceStream } from '../../src/rdf/graphs.js';
import { iri, sparql } from '../../src/rdf/sparql.js';
import { UserService } from '../../src/users/service.js';
import { WorkspaceService } from '../../src/workspaces/service.js';
import { ensureWorkspaceIndex } from '../../src/workspaces/workspace-index.js';
import { mintToken } from '../../src/auth/tokens.js';
import { freshClusterUrl } from '../../test/helpers/cluster.js';

/*
 * The cluster's start with residency (`WSM_BENCH_CLUSTER_PARTS=start`),
 * the two figures of docs/cluster.md "Residency":
 *
 * (a) An instance started on PostgreSQL holding `WSM_BENCH_CLUSTER_START_QUADS`
 *     quads (comma-separated sizes, 1M and 3M by default; 10000000 for the
 *     target's 10M) over `WSM_BENCH_CLUSTER_START_WORKSPACES` workspaces
 *     (100): time from the spawn to /health 200, RSS then and after listing
 *     every workspace, workspaces held. Targets: 3 s, 300 MB.
 * (b) A fresh instance serving one workspace of `WSM_BENCH_CLUSTER_FIRST_QUADS`
 *     quads (1M): time from the spawn to the first answer of a GET of that
 *     workspace (which loads it), against the embedded store started on the
 *     same data (its data directory with a snapshot) answering the same GET.
 *     Target: at most 2x.
 *
 * The data is written to PostgreSQL directly, as a snapshot would be: the
 * workspaces, their owner and the index of workspaces are created through
 * the service's code on a cluster store (records), then a snapshot is
 * stored whose parts are what that store holds, each workspace's part with
 * a graph of generated triples (`generateTriples`) added. The whole
 * snapshot (`replica`) is the parts joined by PostgreSQL; past 900 MB
 * (about 7M quads: PostgreSQL's `bytea` limit is 1 GB) it is stored empty
 * with its quad count, which no store opening without residency accepts.
 */

/** The largest whole snapshot stored (below PostgreSQL's 1 GB `bytea` limit). */
const WHOLE_LIMIT_BYTES = 900 * 1024 * 1024;
const BASE = 'https://workspaces.local/';
/** The owner of every workspace `populate` writes. */
export const OWNER = 'bench-owner';
const progress = (line: string) => process.stderr.write(`cluster start: ${line} (load average ${os.loadavg()[0]!.toFixed(1)})\n`);

export interface Populated { url: string; slugs: string[]; quads: number; whole: boolean; nquads: (stream: string) => Promise<string> }

/** A schema holding `workspaces` workspaces of about `quads / workspaces` quads each, in a snapshot with parts. */
export async function populate(postgresUrl: string, workspaces: number, quads: number): Promise<Populated> {
  const url = await freshClusterUrl(postgresUrl);
  const graphs = new Graphs(BASE);
  const store = await openClusterStore(url, { snapshotAfterBytes: Number.MAX_SAFE_INTEGER, baseIri: BASE });
  const slugs: string[] = [];
  const ids: string[] = [];
  let heads;
  let small;
  try {
    const users = new UserService(store, graphs);
    const service = new WorkspaceService(store, graphs, users, '1.0.0');
    for (let i = 0; i < workspaces; i++) {
      const ws = await service.create({ slug: `bench-${i}`, owner: OWNER });
      slugs.push(ws.slug);
      ids.push(ws.id);
    }
    await ensureWorkspaceIndex(store, graphs);
    heads = store.appliedHeads();
    small = dumpByStream(store.replica.raw, graphs);
  } finally {
    await store.close();
  }
  const seq = [...heads.values()].reduce((a, b) => a + b, 0);
  const per = Math.floor((quads - [...small.values()].reduce((n, p) => n + p.quads, 0)) / workspaces);
  const bulk = (i: number) => {
    const graph = graphs.matrix(ids[i]!, 'bulk');
    const lines = generateTriples(per, `https://bench.example/ws${i}/`).split('\n');
    lines.pop();
    return `${lines.map((l) => `${l.slice(0, -1)}<${graph}> .`).join('\n')}\n`;
  };
  const partText = (stream: string, i: number) => (small.get(stream)?.data.toString('utf8') ?? '') + (i >= 0 ? bulk(i) : '');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  let total = 0;
  let whole = false;
  try {
    const headsJson = JSON.stringify(Object.fromEntries(heads));
    const put = async (stream: string, text: string) => {
      const data = Buffer.from(text, 'utf8');
      const n = text.length === 0 ? 0 : text.split('\n').length - 1;
      total += n;
      await client.query('INSERT INTO wsm_snapshots (stream, seq, quads, sha256, data, heads) VALUES ($1, $2, $3, $4, $5, $6)',
        [stream, seq, n, createHash('sha256').update(data).digest(), data, headsJson]);
    };
    await put('service', partText('service', -1));
    for (let i = 0; i < workspaces; i++) await put(workspaceStream(ids[i]!), partText(workspaceStream(ids[i]!), i));
    const { rows } = await client.query<{ bytes: string }>('SELECT sum(octet_length(data)) AS bytes FROM wsm_snapshots WHERE seq = $1', [seq]);
    whole = Number(rows[0]!.bytes) <= WHOLE_LIMIT_BYTES;
    if (whole) {
      await client.query(`INSERT INTO wsm_snapshots (stream, seq, quads, sha256, data, heads)
        SELECT 'replica', $1, $2, sha256(whole), whole, $3::jsonb FROM (SELECT string_agg(data, ''::bytea ORDER BY stream) AS whole FROM wsm_snapshots WHERE seq = $1) w`,
      [seq, total, headsJson]);
    } else {
      await client.query("INSERT INTO wsm_snapshots (stream, seq, quads, sha256, data, heads) VALUES ('replica', $1, $2, sha256(''::bytea), ''::bytea, $3::jsonb)", [seq, total, headsJson]);
    }
  } finally {
    await client.end();
  }
  const nquads = async (stream: string) => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      const { rows } = await c.query<{ data: Buffer }>('SELECT data FROM wsm_snapshots WHERE stream = $1 AND seq = $2', [stream, seq]);
      return rows[0]?.data.toString('utf8') ?? '';
    } finally {
      await c.end();
    }
  };
  return { url, slugs, quads: total, whole, nquads };
}

export const mb = (bytes: number) => Math.round(bytes / 1024 / 1024);

async function get(url: string, token: string): Promise<number> {
  const started = performance.now();
  const res = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });
  await res.arrayBuffer();
  if (!res.ok) throw new Error(`GET ${url}: ${res.status}`);
  return performance.now() - started;
}

/** One metric of the service's /metrics, summed over its labels (NaN when absent). */
export async function metric(svcUrl: string, token: string, name: string): Promise<number> {
  const res = await fetch(`${svcUrl}/metrics`, { headers: { Authorization: `Bearer ${token}` } });
  const lines = (await res.text()).split('\n').filter((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return lines.length ? lines.reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0) : Number.NaN;
}

/** Spawn to /health 200, RSS 2 s later and after listing every workspace (an owner's list, then a system administrator's), workspaces held then. */
async function startOn(url: string, residency: boolean, workspaces: number): Promise<{ ms: number; openMs: number; rssHealth: number; rssIdle: number; rssListed: number; held: number; listMs: number }> {
  const dir = workDir('cluster-start');
  // The service's log kept, for the store's own opening time (`cluster store opened: ... ms`).
  const logs = workDir('cluster-start-log');
  const kept = process.env.BENCH_KEEP_LOGS;
  process.env.BENCH_KEEP_LOGS = logs;
  const svc = await startService(dir, { WSM_STORE: 'cluster', WSM_POSTGRES_URL: url, ...(residency ? { WSM_CLUSTER_RESIDENT_QUADS: '500000' } : {}) }, 900_000)
    .finally(() => { if (kept === undefined) delete process.env.BENCH_KEEP_LOGS; else process.env.BENCH_KEEP_LOGS = kept; });
  try {
    const rssHealth = svc.rss();
    const root = await mintToken(dir, 'root', { systemAdmin: true, ttlSeconds: 3600 });
    const owner = await mintToken(dir, OWNER, { ttlSeconds: 3600 });
    await new Promise((r) => setTimeout(r, 2000));
    const rssIdle = svc.rss();
    const listMs = await get(`${svc.url}/api/v1/workspaces`, owner);
    const listed = await fetch(`${svc.url}/api/v1/workspaces`, { headers: { Authorization: `Bearer ${root}` } });
    const count = ((await listed.json()) as { data: unknown[] }).data.length;
    if (count !== workspaces) throw new Error(`${count} workspaces listed of ${workspaces}`);
    const held = await metric(svc.url, root, 'wsm_cluster_resident_workspaces');
    const log = readdirSync(logs).map((f) => readFileSync(path.join(logs, f), 'utf8')).join('\n');
    const openMs = Number(/cluster store opened: [^"]*?, (\d+) ms/.exec(log)?.[1] ?? Number.NaN);
    return { ms: svc.startMs, openMs, rssHealth, rssIdle, rssListed: svc.rss(), held, listMs };
  } finally {
    await svc.stop();
    removeDir(dir);
    removeDir(logs);
  }
}

/** (a): start over many workspaces, with residency, beside the same start without it (the whole snapshot loaded). */
async function startOver(postgresUrl: string, quads: number, workspaces: number): Promise<Figure[]> {
  const built = performance.now();
  const data = await populate(postgresUrl, workspaces, quads);
  progress(`${data.quads.toLocaleString('en')} quads over ${workspaces} workspaces written to PostgreSQL in ${((performance.now() - built) / 1000).toFixed(0)} s`);
  const resident = await startOn(data.url, true, workspaces);
  // WSM_BENCH_CLUSTER_START_WHOLE=0 leaves the start without residency out (minutes from 1M quads on a loaded machine).
  const whole = data.whole && process.env.WSM_BENCH_CLUSTER_START_WHOLE !== '0' ? await startOn(data.url, false, workspaces) : undefined;
  const where = `${data.quads.toLocaleString('en')} quads in PostgreSQL over ${workspaces} workspaces`;
  const baselineNote = whole ? `baseline: the same start without residency (the whole snapshot loaded; the store opened in ${whole.openMs} ms)`
    : data.whole ? 'no baseline (WSM_BENCH_CLUSTER_START_WHOLE=0)' : 'no baseline: the whole snapshot is over PostgreSQL\'s bytea limit, so an instance without residency cannot start on it';
  return [
    figure({
      name: `cluster start with residency: spawn to /health 200, ${where}`, unit: 'ms', value: resident.ms, baseline: whole?.ms ?? Number.NaN,
      target: '<= 3000 ms', check: (_r, v) => v <= 3000,
      cause: `the machine's load average is ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} cores; the start reads the service's part only (workspaces held after it: ${resident.held})`,
      note: `${baselineNote}; with residency the store opened in ${resident.openMs} ms of it; workspaces held after the start and listing every workspace: ${resident.held}; the owner's list of ${workspaces} answered in ${resident.listMs.toFixed(0)} ms`,
    }),
    figure({
      name: `cluster start with residency: RSS before any workspace is used, ${where}`, unit: 'MB', value: mb(Math.max(resident.rssIdle, resident.rssListed)), baseline: whole ? mb(whole.rssListed) : Number.NaN,
      target: '<= 300 MB', check: (_r, v) => v <= 300,
      note: `${baselineNote}; ${mb(resident.rssHealth)} MB at /health, ${mb(resident.rssIdle)} MB 2 s later, ${mb(resident.rssListed)} MB after listing the workspaces`,
    }),
  ];
}

/** (b): a fresh instance's first answer in a workspace of `quads`, against the embedded store on the same data. */
async function firstAnswer(postgresUrl: string, quads: number): Promise<Figure[]> {
  const data = await populate(postgresUrl, 1, quads);
  progress(`a workspace of ${data.quads.toLocaleString('en')} quads written to PostgreSQL`);
  const embeddedDir = await embeddedDataDir(data, 'cluster-first-embedded');
  const slug = data.slugs[0]!;
  const measure = async (dir: string, env: Record<string, string>) => {
    const svc = await startService(dir, env, 600_000);
    try {
      const token = await mintToken(dir, OWNER, { ttlSeconds: 3600 });
      const ms = await get(`${svc.url}/api/v1/workspaces/${slug}`, token);
      return { health: svc.startMs, first: svc.startMs + ms, rss: svc.rss() };
    } finally {
      await svc.stop();
    }
  };
  const clusterDir = workDir('cluster-first');
  try {
    const cluster = await measure(clusterDir, { WSM_STORE: 'cluster', WSM_POSTGRES_URL: data.url, WSM_CLUSTER_RESIDENT_QUADS: String(Math.max(2 * quads, 1000)) });
    const embedded = await measure(embeddedDir, {});
    return [figure({
      name: `cluster with residency: spawn to the first answer in a workspace of ${data.quads.toLocaleString('en')} quads, against the embedded store on the same data`,
      unit: 'ms', value: cluster.first, baseline: embedded.first, target: '<= 2x', check: (r) => r <= 2,
      note: `cluster: /health at ${cluster.health.toFixed(0)} ms, the GET (which loads the workspace from its part) answered at ${cluster.first.toFixed(0)} ms, RSS ${mb(cluster.rss)} MB; `
        + `embedded: /health at ${embedded.health.toFixed(0)} ms (the snapshot loaded before it listens), the GET at ${embedded.first.toFixed(0)} ms, RSS ${mb(embedded.rss)} MB`,
    })];
  } finally {
    removeDir(clusterDir);
    removeDir(embeddedDir);
  }
}

/**
 * The embedded store's data directory holding what `data` holds in
 * PostgreSQL: every stream's part loaded into a store in this process,
 * then a snapshot of it. The quads pass through this process's Oxigraph
 * (WebAssembly memory, which does not shrink once grown).
 */
export async function embeddedDataDir(data: Populated, prefix: string): Promise<string> {
  const dir = workDir(prefix);
  const store = await openDurableStore(dir, { snapshotAfterBytes: Number.MAX_SAFE_INTEGER });
  try {
    for (const stream of ['service', ...await streamsOf(data.url)]) {
      const text = await data.nquads(stream);
      if (text) store.raw.load(text, { format: 'application/n-quads', no_transaction: true });
    }
    // A journal record, so that the store takes its snapshot.
    await store.update(sparql`INSERT DATA { GRAPH ${iri(`${BASE}system`)} { ${iri(`${BASE}id/bench/1`)} ${iri(`${BASE}ns#built`)} true } }`, [`${BASE}system`]);
    await store.snapshot();
  } finally {
    await store.close();
  }
  return dir;
}

async function streamsOf(url: string): Promise<string[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query<{ stream: string }>("SELECT DISTINCT stream FROM wsm_snapshots WHERE stream LIKE 'ws:%'");
    return rows.map((r) => r.stream);
  } finally {
    await c.end();
  }
}

export async function clusterStart(postgresUrl: string): Promise<Figure[]> {
  const sizes = (process.env.WSM_BENCH_CLUSTER_START_QUADS ?? '1000000,3000000').split(',').map(Number).filter((n) => n > 0);
  const workspaces = Number(process.env.WSM_BENCH_CLUSTER_START_WORKSPACES ?? 100);
  const first = Number(process.env.WSM_BENCH_CLUSTER_FIRST_QUADS ?? 1_000_000);
  const figures: Figure[] = [];
  for (const quads of sizes) {
    figures.push(...await startOver(postgresUrl, quads, workspaces));
    progress(`start over ${quads.toLocaleString('en')} quads measured`);
  }
  if (first > 0) {
    figures.push(...await firstAnswer(postgresUrl, first));
    progress('first answer measured');
  }
  return figures;
}
