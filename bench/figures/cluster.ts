import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import {
  figure, installPackage, interleave, load, removeDir, ROOT, serviceWithWorkspace, startBaseline, withServiceStore, workDir,
  type Figure, type LoadResult,
} from '../lib.js';
import { sideBySide } from '../side-by-side.js';
import { openClusterStore } from '../../src/store/cluster/open.js';
import { updateOp } from '../../src/store/store.js';
import { Graphs } from '../../src/rdf/graphs.js';
import { integer, iri, sparql } from '../../src/rdf/sparql.js';
import { freshClusterUrl } from '../../test/helpers/cluster.js';
import { clusterStart } from './cluster-start.js';
import { clusterSpread } from './cluster-spread.js';
import { readAnswer, readTargets } from './reads.js';
import { C5_BODY } from './writes.js';
import { rolesPackageArchive } from '../data.js';

/**
 * The cluster store (`WSM_STORE=cluster`, journal and snapshots in
 * PostgreSQL, each instance answering from its own replica), measured
 * three ways:
 *
 * 1. Beside the embedded store: the reads (P5 from the registry, P5 of an
 *    upload, I6) and C5 at 32 connections on a cluster instance and an
 *    embedded one running side by side, windows interleaved, each row the
 *    median of the pairs' ratios (targets 0.8x and 0.5x); then the install
 *    figure once on the embedded store and once with every service on the
 *    cluster store (each data directory a schema of its own in one
 *    PostgreSQL).
 * 2. C5 at 32 connections on a cluster instance against a bare PostgreSQL
 *    baseline: an Express handler inserting the same body as one row with
 *    a pool of 10 connections (the cluster store's pool), answering once
 *    it committed. Windows interleave.
 * 3. Catch-up: records per second a new replica applies from PostgreSQL
 *    (`WSM_BENCH_CLUSTER_RECORDS` single-triple writes over 20 workspace
 *    streams, no snapshot, then a second store opened on the same schema),
 *    against the same rows fetched bare (SELECT of every record, in the
 *    order of their writes).
 * 4. Start with residency (`start`, bench/figures/cluster-start.ts): an
 *    instance's start over many workspaces (time to /health, RSS), and a
 *    fresh instance's first answer in a large workspace against the
 *    embedded store's on the same data.
 * 5. Data spread over three instances (`spread`, bench/figures/cluster-spread.ts):
 *    `WSM_BENCH_CLUSTER_SPREAD_QUADS` (10M) over
 *    `WSM_BENCH_CLUSTER_SPREAD_WORKSPACES` (100) workspaces, three instances
 *    with residency and placement, each workspace loaded on the instance a
 *    hash of its slug routes it to; the largest instance's RSS against one
 *    embedded instance holding all the data (target: at most 0.5x), and P5
 *    at 32 connections on a resident workspace's owner against the
 *    embedded instance, windows interleaved (at least 0.8x).
 *
 * PostgreSQL: started under a temporary directory with `npm run postgres`
 * and stopped at the end; or, with `WSM_BENCH_POSTGRES_URL`, that server
 * (a fresh schema per service; left running). `WSM_BENCH_CLUSTER_PARTS`
 * (`side`, `c5`, `catchup`, `start`, `spread`; all by default) runs some parts only.
 */

const PAIRS = 3;
const WINDOW_S = 3;
const SIDE = ['install'] as const;
const SIDE_PAIRS = 5;
const INSTALL_PAIRS = 3;
const ROLES = 15_000;

const progress = (line: string) => process.stderr.write(`cluster: ${line} (load average ${os.loadavg()[0]!.toFixed(1)})\n`);

export interface Server { url: string; stop(): void }

export function startPostgres(): Server {
  const given = process.env.WSM_BENCH_POSTGRES_URL;
  if (given) return { url: given, stop: () => undefined };
  const dir = workDir('postgres');
  const script = (command: string) => spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'scripts/postgres.ts'), command], {
    cwd: ROOT, env: { ...process.env, WSM_DATA_DIR: dir }, encoding: 'utf8',
  });
  const run = script('start');
  if (run.status !== 0) throw new Error(`npm run postgres failed: ${run.stderr.trim().slice(-500)}`);
  const url = /^WSM_POSTGRES_URL=(.+)$/m.exec(run.stdout)?.[1];
  if (!url) throw new Error(`npm run postgres printed no WSM_POSTGRES_URL: ${run.stdout.slice(0, 300)}`);
  return { url, stop: () => { script('stop'); removeDir(dir); } };
}

/** A window of load at 32 connections: its result, or an error naming what failed. */
function window32(label: string, url: string, token: string, post?: string) {
  return async (): Promise<LoadResult> => {
    const r = await load({
      url, connections: 32, duration: WINDOW_S, headers: { Authorization: `Bearer ${token}`, ...post ? { 'Content-Type': 'application/json' } : {} },
      ...post ? { method: 'POST' as const, uniqueBody: post } : {},
    });
    if (r.non2xx || r.errors) throw new Error(`${label} on ${url}: ${r.non2xx} non-2xx, ${r.errors} errors`);
    return r;
  };
}

/**
 * Part 1a: the reads (P5 from the registry, P5 of an upload, I6) and C5 at
 * 32 connections, on a cluster instance and an embedded one running side
 * by side with the same workspace and packages, their windows interleaved
 * (`SIDE_PAIRS` pairs, the order alternating), the ratio the median of the
 * pairs'. Targets: reads >= 0.8x, C5 >= 0.5x.
 */
async function besideInterleaved(postgres: Server): Promise<Figure[]> {
  const embedded = await serviceWithWorkspace();
  const cluster = await withServiceStore(async () => ({ WSM_STORE: 'cluster', WSM_POSTGRES_URL: await freshClusterUrl(postgres.url) }), () => serviceWithWorkspace());
  try {
    const targets = await readTargets(embedded);
    await readTargets(cluster);
    const figures: Figure[] = [];
    const p99 = (rs: LoadResult[]) => rs.map((r) => r.p99).sort((a, b) => a - b)[Math.floor(rs.length / 2)]!;
    const compare = async (name: string, target: string, least: number, clusterWindow: () => Promise<LoadResult>, embeddedWindow: () => Promise<LoadResult>, note: string) => {
      const loadBefore = os.loadavg()[0]!;
      const m = await interleave(SIDE_PAIRS, clusterWindow, embeddedWindow, (r) => r.rps);
      figures.push(figure({
        name, unit: 'req/s', value: m.serviceMedian, baseline: m.baselineMedian, ratios: m.ratios, target, check: (r) => r >= least,
        note: `baseline: the same on an embedded instance running beside it, windows interleaved (${SIDE_PAIRS} pairs of ${WINDOW_S} s); p99 ${p99(m.service)} vs ${p99(m.baseline)} ms; ${note}; load average ${loadBefore.toFixed(1)}-${os.loadavg()[0]!.toFixed(1)}`,
        cause: 'the cluster instance asks PostgreSQL for the log\'s heads once per request (docs/decisions.md, "Cluster reads") and commits each write there',
      }));
      progress(`${name} measured`);
    };
    for (const target of targets) {
      const { bytes } = await readAnswer(cluster.svc.url, cluster.token, target);
      await readAnswer(embedded.svc.url, embedded.token, target);
      const on = (env: typeof embedded) => window32(target.name, env.svc.url + target.path, env.token);
      await on(cluster)(); // warm-up
      await on(embedded)();
      await compare(`reads: ${target.name}, throughput (${bytes.length} B)`, '>= 0.8x', 0.8, on(cluster), on(embedded), 'reads');
    }
    const c5On = (env: typeof embedded) => window32('C5', `${env.svc.url}/api/v1/commands/${env.slug}`, env.token, C5_BODY);
    await compare('writes: C5 create at 32 connections, throughput', '>= 0.5x', 0.5, c5On(cluster), c5On(embedded), 'each window creates slash commands, so both workspaces grow alike');
    // A package of ROLES roles, a new one (name and matrix) each time, installed on each side in turn.
    const made = new Map<typeof embedded, number>();
    const rolesOn = (env: typeof embedded) => async () => {
      const i = made.get(env) ?? 0;
      made.set(env, i + 1);
      const archive = await rolesPackageArchive(`roles-${i}`, '1.0.0', `https://bench.example/matrix/roles-${i}`, ROLES);
      return (await installPackage(env.svc.url, env.token, env.slug, archive)).ms;
    };
    const loadBefore = os.loadavg()[0]!;
    const installs = await interleave(INSTALL_PAIRS, rolesOn(cluster), rolesOn(embedded), (ms) => ms);
    figures.push(figure({
      name: `install: a ${ROLES.toLocaleString('en')}-role package, P2 to completed`, unit: 'ms',
      value: installs.serviceMedian, baseline: installs.baselineMedian, ratios: installs.ratios, target: '<= 1.5x', check: (r) => r <= 1.5,
      note: `baseline: the same install on an embedded instance running beside it, in turn (${INSTALL_PAIRS} pairs, each install a package of its own into the same workspace); load average ${loadBefore.toFixed(1)}-${os.loadavg()[0]!.toFixed(1)}`,
    }));
    progress('the roles install measured');
    return figures;
  } finally {
    await cluster.close();
    await embedded.close();
  }
}

/** Part 1b: the install figure on the embedded store, then with every service on a schema of its own. */
function beside(postgres: Server): Promise<Figure[]> {
  const wanted = (process.env.WSM_BENCH_CLUSTER_SIDE ?? SIDE.join(',')).split(',');
  return sideBySide(SIDE.filter((n) => wanted.includes(n)), {
    label: 'the cluster',
    on: (_name, fn) => withServiceStore(async () => ({ WSM_STORE: 'cluster', WSM_POSTGRES_URL: await freshClusterUrl(postgres.url) }), fn),
  }, progress);
}

/** Part 2: C5 at 32 connections on a cluster instance against one committed insert per request. */
async function c5(postgres: Server): Promise<Figure[]> {
  const schemaUrl = await freshClusterUrl(postgres.url);
  return withServiceStore(async () => ({ WSM_STORE: 'cluster', WSM_POSTGRES_URL: await freshClusterUrl(postgres.url) }), async () => {
    const env = await serviceWithWorkspace();
    const baseline = await startBaseline('postgres', { BENCH_POSTGRES_URL: schemaUrl });
    try {
      const { svc, token, slug } = env;
      const uniqueBody = JSON.stringify({
        alias: 'bench-{{n}}', description: 'Benchmark command', interpretation: 'Lists every labelled thing.', scriptType: 'CONSTRUCT',
        scriptContent: 'PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> CONSTRUCT { ?s rdfs:label ?l } WHERE { ?s rdfs:label ?l }',
      });
      const window = (url: string) => async (): Promise<LoadResult> => {
        const r = await load({ url, connections: 32, duration: WINDOW_S, method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, uniqueBody });
        if (r.non2xx || r.errors) throw new Error(`C5 on ${url}: ${r.non2xx} non-2xx, ${r.errors} errors`);
        return r;
      };
      const rps = await interleave(PAIRS, window(`${svc.url}/api/v1/commands/${slug}`), window(`${baseline.url}/write`), (r) => r.rps);
      const p99 = (rs: LoadResult[]) => rs.map((r) => r.p99).sort((a, b) => a - b)[Math.floor(rs.length / 2)]!;
      return [figure({
        name: 'C5 create at 32 connections on the cluster, against a bare PostgreSQL insert', unit: 'req/s',
        value: rps.serviceMedian, baseline: rps.baselineMedian, ratios: rps.ratios, target: 'report (no target set)', check: () => true,
        note: `baseline: an Express handler inserting the body as one row (pool of 10, synchronous commit), answering once committed; p99 ${p99(rps.service)} vs ${p99(rps.baseline)} ms`,
      })];
    } finally {
      await baseline.stop();
      await env.close();
    }
  });
}

/** Part 3: records per second a new replica applies from PostgreSQL, against fetching the same rows bare. */
async function catchUp(postgres: Server): Promise<Figure[]> {
  const records = Number(process.env.WSM_BENCH_CLUSTER_RECORDS ?? 5000);
  const url = await freshClusterUrl(postgres.url);
  const graphs = new Graphs('https://workspaces.local/');
  const quiet = { snapshotAfterBytes: 1 << 30, onWarning: () => undefined, onInfo: () => undefined };
  const writer = await openClusterStore(url, quiet);
  try {
    const P = iri('https://bench.example/p');
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < records; i = next++) {
        const graph = graphs.iam(`ws-${i % 20}`);
        await writer.write([updateOp(sparql`INSERT DATA { GRAPH ${iri(graph)} { ${iri(`https://bench.example/s${i}`)} ${P} ${integer(i)} } }`, [graph])]);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
  } finally {
    await writer.close();
  }
  const replay = async () => {
    const started = performance.now();
    const store = await openClusterStore(url, quiet);
    const ms = performance.now() - started;
    await store.close();
    return ms;
  };
  const fetchBare = async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const started = performance.now();
      const { rows } = await client.query<{ record: Buffer }>('SELECT stream, seq, record FROM wsm_journal ORDER BY gseq, stream');
      if (rows.length !== records) throw new Error(`${rows.length} rows in the journal for ${records} writes`);
      return performance.now() - started;
    } finally {
      await client.end();
    }
  };
  const times = await interleave(PAIRS, replay, fetchBare, (ms) => ms);
  return [figure({
    name: `catch-up of a new replica: ${records.toLocaleString('en')} records from PostgreSQL`, unit: 'records/s',
    value: records / (times.serviceMedian / 1000), baseline: records / (times.baselineMedian / 1000), ratios: times.ratios.map((r) => 1 / r),
    target: 'report (no target set)', check: () => true,
    note: `a store opened with no snapshot applies every record (single-triple writes over 20 workspace streams), ${times.serviceMedian.toFixed(0)} ms; baseline: the same rows fetched bare in one SELECT, ${times.baselineMedian.toFixed(0)} ms`,
  })];
}

export async function run(): Promise<Figure[]> {
  const parts = (process.env.WSM_BENCH_CLUSTER_PARTS ?? 'side,c5,catchup,start,spread').split(',');
  const postgres = startPostgres();
  try {
    const figures: Figure[] = [];
    if (parts.includes('side')) figures.push(...await besideInterleaved(postgres), ...await beside(postgres));
    if (parts.includes('c5')) { figures.push(...await c5(postgres)); progress('C5 against PostgreSQL measured'); }
    if (parts.includes('catchup')) { figures.push(...await catchUp(postgres)); progress('catch-up measured'); }
    if (parts.includes('start')) figures.push(...await clusterStart(postgres.url));
    if (parts.includes('spread')) figures.push(...await clusterSpread(postgres.url));
    return figures;
  } finally {
    postgres.stop();
  }
}
