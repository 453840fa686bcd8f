import { createHash } from 'node:crypto';
import os from 'node:os';
import pg from 'pg';
import {
  figure, installPackage, interleave, load, removeDir, startService, workDir,
  type Figure, type LoadResult, type Proc,
} from '../lib.js';
import { packageArchive } from '../data.js';
import { mintToken } from '../../src/auth/tokens.js';
import { embeddedDataDir, mb, metric, OWNER, populate } from './cluster-start.js';

/*
 * Data spread over three instances with residency and placement
 * (`WSM_BENCH_CLUSTER_PARTS=spread`; alone: `npx tsx bench/cluster-spread.ts`):
 *
 *   `WSM_BENCH_CLUSTER_SPREAD_QUADS` quads (10M) over
 *   `WSM_BENCH_CLUSTER_SPREAD_WORKSPACES` workspaces (100), written to
 *   PostgreSQL as a snapshot with parts (`populate`, cluster-start.ts).
 *   Three instances on that schema (`WSM_CLUSTER_PLACEMENT=lease`,
 *   `WSM_CLUSTER_RESIDENT_QUADS`), each its own process; each workspace's
 *   requests go to one of them by a hash of its slug, as the balancer
 *   routes by workspace (scripts/balancer.ts), and one GET of each
 *   workspace there loads it and takes its lease. Beside them, one
 *   embedded instance started on a data directory whose snapshot holds the
 *   same quads, after a GET of every workspace.
 *
 * Figures, all in the same run:
 * - RSS: the largest cluster instance's against the embedded instance's,
 *   once every workspace is loaded, before the install below (target: at
 *   most 0.5x). An install reads other workspaces' records (docs/cluster.md,
 *   "Not done yet"), which loads every workspace on its instance: the notes
 *   say what it loaded and the RSS after it and after P5.
 * - P5 (`GET /api/v1/packages/{workspace}/{package}`, the package installed
 *   through the API on both sides) at 32 connections on a workspace of the
 *   instance holding the most workspaces, sent to that instance, against
 *   the same on the embedded instance; windows interleave (target: at
 *   least 0.8x).
 *
 * Every instance runs with `WSM_CLUSTER_IDLE_SECONDS=86400`, so that no
 * workspace is let go (nor its lease released) for being idle during the
 * run, and the residency budget is twice an instance's even share of the
 * quads, so that the budget lets none go either: what an instance holds is
 * what the balancer's split sends it. Node's heap limit is raised for all
 * four (`--max-old-space-size`, `WSM_BENCH_CLUSTER_SPREAD_HEAP_MB`, 8192)
 * so that the embedded instance's start on the whole data is not short of
 * heap; the quads themselves are in Oxigraph's WebAssembly memory, outside
 * the heap. The schema is dropped at the end.
 */

const INSTANCES = 3;
const PAIRS = 3;
const WINDOW_S = 3;
const PACKAGE = 'spread';

const progress = (line: string) => process.stderr.write(`cluster spread: ${line} (load average ${os.loadavg()[0]!.toFixed(1)})\n`);
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/**
 * The instance a balancer routing by workspace sends `slug`'s requests to:
 * a hash of the slug over the instances. HAProxy (`balance hash` on the
 * workspace segment, consistent) uses a ring of its own; this split is as
 * even as a hash makes it (100 slugs `bench-0` to `bench-99`: 35, 30, 35
 * here, 34, 31, 35 through `npm run balancer` with three instances), and
 * the figure's notes say how many workspaces each instance got.
 */
export function instanceFor(slug: string, instances: number): number {
  return createHash('sha256').update(slug).digest().readUInt32BE(0) % instances;
}

/** GETs each workspace in `slugs` on `svc` one after the other (each loads it on the cluster); the time they took. */
async function touch(svc: Proc, token: string, slugs: string[]): Promise<number> {
  const started = performance.now();
  for (const slug of slugs) {
    const res = await fetch(`${svc.url}/api/v1/workspaces/${slug}`, { headers: { Authorization: `Bearer ${token}` } });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`GET of workspace ${slug} on ${svc.url}: ${res.status}`);
    // Served where it was sent, not forwarded: this instance holds the workspace's lease.
    const owner = res.headers.get('x-wsm-owner');
    if (owner) throw new Error(`GET of workspace ${slug} on ${svc.url} was forwarded to ${owner}`);
  }
  return performance.now() - started;
}

async function dropSchema(url: string): Promise<void> {
  const schema = /search_path=(\w+)/.exec(decodeURIComponent(new URL(url).searchParams.get('options') ?? ''))?.[1];
  if (!schema) return;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA ${schema} CASCADE`);
  } finally {
    await client.end();
  }
}

export async function clusterSpread(postgresUrl: string): Promise<Figure[]> {
  const quads = Number(process.env.WSM_BENCH_CLUSTER_SPREAD_QUADS ?? 10_000_000);
  const workspaces = Number(process.env.WSM_BENCH_CLUSTER_SPREAD_WORKSPACES ?? 100);
  const heap = { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --max-old-space-size=${Number(process.env.WSM_BENCH_CLUSTER_SPREAD_HEAP_MB ?? 8192)}`.trim() };
  const loadBefore = os.loadavg()[0]!;

  let started = performance.now();
  const data = await populate(postgresUrl, workspaces, quads);
  const populateMs = performance.now() - started;
  progress(`${data.quads.toLocaleString('en')} quads over ${workspaces} workspaces written to PostgreSQL in ${seconds(populateMs)}`);
  const dirs: string[] = [];
  const running: Proc[] = [];
  try {
    started = performance.now();
    const embeddedDir = await embeddedDataDir(data, 'cluster-spread-embedded');
    dirs.push(embeddedDir);
    const embeddedDirMs = performance.now() - started;
    progress(`the embedded data directory (a snapshot of the same quads) built in ${seconds(embeddedDirMs)}`);

    // The three instances, started together, each a process of its own.
    const budget = Math.ceil((2 * data.quads) / INSTANCES);
    const clusterEnv = {
      ...heap, WSM_STORE: 'cluster', WSM_POSTGRES_URL: data.url, WSM_CLUSTER_PLACEMENT: 'lease',
      WSM_CLUSTER_RESIDENT_QUADS: String(budget), WSM_CLUSTER_IDLE_SECONDS: '86400',
    };
    const instanceDirs = Array.from({ length: INSTANCES }, () => workDir('cluster-spread'));
    dirs.push(...instanceDirs);
    const instances = await Promise.all(instanceDirs.map(async (dir) => {
      const svc = await startService(dir, clusterEnv, 900_000);
      running.push(svc);
      return svc;
    }));
    progress(`${INSTANCES} cluster instances started in ${instances.map((s) => seconds(s.startMs)).join(', ')}`);
    // The instances share one signing key (through PostgreSQL): a token minted in one data directory is good on all.
    const token = await mintToken(instanceDirs[0]!, OWNER, { ttlSeconds: 7200 });
    const root = await mintToken(instanceDirs[0]!, 'root', { systemAdmin: true, ttlSeconds: 7200 });

    // The balancer's split: each workspace loaded (and leased) by the instance its requests go to.
    const routed = instances.map((_, i) => data.slugs.filter((slug) => instanceFor(slug, INSTANCES) === i));
    started = performance.now();
    const loadMs = await Promise.all(instances.map((svc, i) => touch(svc, token, routed[i]!)));
    const clusterLoadMs = performance.now() - started;
    progress(`every workspace loaded on its instance in ${seconds(clusterLoadMs)} (${loadMs.map(seconds).join(', ')})`);

    // The embedded instance on the same quads, after a GET of every workspace.
    const embedded = await startService(embeddedDir, heap, 1_800_000);
    running.push(embedded);
    progress(`the embedded instance started in ${seconds(embedded.startMs)}`);
    const embeddedToken = await mintToken(embeddedDir, OWNER, { ttlSeconds: 7200 });
    const embeddedLoadMs = await touch(embedded, embeddedToken, data.slugs);

    // RSS once every workspace is loaded where the split sends it, and quiet.
    await new Promise((r) => setTimeout(r, 2000));
    const rss = instances.map((svc) => svc.rss());
    const embeddedRss = embedded.rss();
    const scrape = (name: string) => Promise.all(instances.map((svc) => metric(svc.url, root, name)));
    const held = await scrape('wsm_cluster_resident_workspaces');
    const leases = await scrape('wsm_cluster_leases_held');
    const quadsHeld = await scrape('wsm_store_quads');
    const loadsBefore = await scrape('wsm_cluster_workspace_loads_total');
    progress(`RSS ${rss.map(mb).join(', ')} MB on the instances, ${mb(embeddedRss)} MB embedded`);

    const each = instances.map((_, i) => `instance ${i + 1}: ${mb(rss[i]!)} MB, ${routed[i]!.length} workspaces routed, ${held[i]} resident, ${leases[i]} leases, ${quadsHeld[i]!.toLocaleString('en')} quads, loaded in ${seconds(loadMs[i]!)}`);
    const where = `${data.quads.toLocaleString('en')} quads over ${workspaces} workspaces`;
    const loadNote = (p5Load: number[]) => `load average ${loadBefore.toFixed(1)} at the start${p5Load.length ? `, ${p5Load.map((l) => l.toFixed(1)).join('-')} over P5` : ''}; ${os.cpus().length} cores`;
    const rssFigure = (after: string, p5Load: number[]) => figure({
      name: `spread: the largest of ${INSTANCES} cluster instances' RSS, each holding the workspaces routed to it, against one embedded instance holding all ${where}`,
      unit: 'MB', value: mb(Math.max(...rss)), baseline: mb(embeddedRss), target: '<= 0.5x', check: (r) => r <= 0.5,
      cause: `each instance holds the service's graphs and its process's own memory beside its share of the workspaces (${routed.map((slugs) => slugs.length).join(', ')} of ${workspaces}); ${loadNote(p5Load)}`,
      note: `measured once every workspace was loaded, before the install; ${each.join('; ')}; residency budget ${budget.toLocaleString('en')} quads, every workspace loaded in ${seconds(clusterLoadMs)} `
        + `(instances in parallel, one GET at a time each); embedded: started (its snapshot loaded) in ${seconds(embedded.startMs)}, a GET of every workspace in ${seconds(embeddedLoadMs)}; `
        + `${after}; data written to PostgreSQL in ${seconds(populateMs)}, the embedded data directory built in ${seconds(embeddedDirMs)}; ${loadNote(p5Load)}`,
    });
    const p5Name = `spread: P5 at 32 connections on a resident workspace, on its owner instance (of ${INSTANCES}) against the embedded instance holding all ${where}`;

    // The package P5 reads, installed through the API: in a workspace of the instance holding the most workspaces, and in the same workspace on the embedded instance.
    const busiest = routed.reduce((best, slugs, i) => (slugs.length > routed[best]!.length ? i : best), 0);
    const slug = routed[busiest]![0]!;
    const owner = instances[busiest]!;
    const p5Load: number[] = [];
    // The RSS figure stands when what follows fails (an install on a large store is the longest step after the loads).
    try {
      const archive = await packageArchive(PACKAGE, '1.0.0', `https://bench.example/matrix/${PACKAGE}`, 200);
      const installs = [await installPackage(owner.url, token, slug, archive), await installPackage(embedded.url, embeddedToken, slug, archive)];
      progress(`the package installed in ${slug} (instance ${busiest + 1}, and embedded) in ${installs.map((r) => seconds(r.ms)).join(' and ')}`);
      await new Promise((r) => setTimeout(r, 2000));
      const rssInstalled = [...instances.map((svc) => svc.rss()), embedded.rss()];
      const loadsInstalled = await metric(owner.url, root, 'wsm_cluster_workspace_loads_total');
      const installHeld = await metric(owner.url, root, 'wsm_cluster_resident_workspaces');
      const installLeases = await metric(owner.url, root, 'wsm_cluster_leases_held');
      const lookupsBefore = await metric(owner.url, root, 'wsm_cluster_head_lookups_total');
      const requestsBefore = await metric(owner.url, root, 'wsm_http_requests_total');

      // P5 on the owner against the embedded instance, windows interleaved.
      const path = `/api/v1/packages/${slug}/${PACKAGE}`;
      const window = (url: string, bearer: string, duration = WINDOW_S) => async (): Promise<LoadResult> => {
        const r = await load({ url: url + path, connections: 32, duration, headers: { Authorization: `Bearer ${bearer}` } });
        if (r.non2xx || r.errors) throw new Error(`P5 on ${url}: ${r.non2xx} non-2xx, ${r.errors} errors`);
        return r;
      };
      p5Load.push(os.loadavg()[0]!);
      await window(owner.url, token, 1)(); // warm-up
      await window(embedded.url, embeddedToken, 1)();
      const p5 = await interleave(PAIRS, window(owner.url, token), window(embedded.url, embeddedToken), (r) => r.rps);
      p5Load.push(os.loadavg()[0]!);
      const lookups = (await metric(owner.url, root, 'wsm_cluster_head_lookups_total')) - lookupsBefore;
      // Less the two scrapes counted between (this one's own and the lookups' scrape).
      const requests = (await metric(owner.url, root, 'wsm_http_requests_total')) - requestsBefore - 2;
      const heldAfter = await metric(owner.url, root, 'wsm_cluster_resident_workspaces');
      const p5Loads = (await metric(owner.url, root, 'wsm_cluster_workspace_loads_total')) - loadsInstalled;
      const evictions = await scrape('wsm_cluster_workspace_evictions_total');
      const rssAfter = [...instances.map((svc) => svc.rss()), embedded.rss()];
      const p99 = (rs: LoadResult[]) => rs.map((r) => r.p99).sort((a, b) => a - b)[Math.floor(rs.length / 2)]!;
      progress('P5 on the owner and on the embedded instance measured');
      // What the install did to its instance: reads it cannot name the graphs of load every workspace (docs/cluster.md, "Not done yet").
      const installNote = `the install in ${slug} took ${seconds(installs[0]!.ms)} on instance ${busiest + 1} (embedded ${seconds(installs[1]!.ms)}) and loaded ${loadsInstalled - loadsBefore[busiest]!} workspaces there, `
        + `leaving ${installHeld} resident and ${installLeases} leases; RSS after the install ${rssInstalled.map(mb).join(', ')} MB, after P5 ${rssAfter.map(mb).join(', ')} MB (instances 1-${INSTANCES}, embedded); `
        + `workspaces let go by the end ${evictions.join(', ')}`;
      return [
        rssFigure(installNote, p5Load),
        figure({
          name: p5Name, unit: 'req/s', value: p5.serviceMedian, baseline: p5.baselineMedian, ratios: p5.ratios, target: '>= 0.8x', check: (r) => r >= 0.8,
          cause: `${(lookups / requests).toFixed(2)} PostgreSQL head lookups per request on the owner (concurrent requests share one); ${loadNote(p5Load)}`,
          note: `workspace ${slug} on instance ${busiest + 1} (${routed[busiest]!.length} workspaces routed), the requests sent to it directly (not forwarded); p99 ${p99(p5.service)} vs ${p99(p5.baseline)} ms; `
            + `${lookups} head lookups for ${requests} requests on the owner (${(lookups / requests).toFixed(2)} per request; concurrent requests share one); ${heldAfter} workspaces resident on it after, ${p5Loads} loaded during P5; ${loadNote(p5Load)}`,
        }),
      ];
    } catch (err) {
      const why = (err as Error).message.slice(0, 300);
      progress(`the install or P5 failed: ${why}`);
      return [
        rssFigure(`the install in ${slug} on instance ${busiest + 1} or P5 after it failed (${why})`, p5Load),
        figure({ name: `${p5Name}: not measured`, unit: '', value: Number.NaN, baseline: Number.NaN, target: '>= 0.8x', check: () => false, cause: why }),
      ];
    }
  } finally {
    await Promise.all(running.map((svc) => svc.stop()));
    for (const dir of dirs) removeDir(dir);
    await dropSchema(data.url);
  }
}
