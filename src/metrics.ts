import client from 'prom-client';
import type { RequestHandler, Request } from 'express';

/**
 * Prometheus metrics (docs/decisions.md, "Agents and operators"), served at `GET /metrics` to
 * system administrators. Two parts:
 * - process-wide figures fed by small hooks where things happen (requests,
 *   lifecycle commands, journal fsyncs), in `processRegistry`;
 * - figures read from one running service when scraped (quads, sandbox
 *   workers and time-outs), in the registry `serviceMetrics` makes for it.
 * Label values are bounded: routes are route patterns, never raw paths.
 */

export const processRegistry = new client.Registry();

const requestDuration = new client.Histogram({
  name: 'wsm_http_request_duration_seconds',
  help: 'HTTP requests by method, route pattern and status: latency in seconds (its _count is the number of requests)',
  labelNames: ['method', 'route', 'status'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [processRegistry],
});

const requests = new client.Counter({
  name: 'wsm_http_requests_total',
  help: 'HTTP requests by method, route pattern and status',
  labelNames: ['method', 'route', 'status'] as const,
  registers: [processRegistry],
});

const lifecycleCommands = new client.Counter({
  name: 'wsm_lifecycle_commands_total',
  help: 'Finished lifecycle commands by type (INSTALL, UPDATE, UNINSTALL, REDEPLOY) and outcome (completed, failed)',
  labelNames: ['type', 'outcome'] as const,
  registers: [processRegistry],
});

const fsyncSeconds = new client.Histogram({
  name: 'wsm_journal_fsync_seconds',
  help: 'Time of one journal fsync (one batch of group-committed writes), in seconds',
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
  registers: [processRegistry],
});

const storeThreadStops = new client.Counter({
  name: 'wsm_store_thread_stops_total',
  help: 'Stops of the embedded store\'s thread (crashes), each followed by a restart that recovers the store from its snapshot and journal',
  registers: [processRegistry],
});

/** Hook: the embedded store's thread stopped (it is restarted). */
export function countStoreThreadStop(): void {
  storeThreadStops.inc();
}

/** Where fsyncs go instead of this thread's histogram (the store's own thread sends them to the event loop's). */
let fsyncSink: ((seconds: number) => void) | null = null;

/** Sends this thread's fsync timings to `sink` (the store's thread: `store-worker.ts`). */
export function forwardFsyncs(sink: (seconds: number) => void): void {
  fsyncSink = sink;
}

/** Hook: one journal fsync took `seconds`. */
export function observeFsync(seconds: number): void {
  if (fsyncSink) fsyncSink(seconds);
  else fsyncSeconds.observe(seconds);
}

/** Hook: a lifecycle command finished. */
export function countLifecycleCommand(type: string, outcome: 'completed' | 'failed'): void {
  lifecycleCommands.inc({ type, outcome });
}

/** The route pattern of a request (`/api/v1/packages/:workspace`), or `unmatched`. */
function routeOf(req: Request): string {
  const route = (req as { route?: { path?: unknown } }).route;
  return typeof route?.path === 'string' ? route.path : 'unmatched';
}

/** Middleware: times every request and counts it by route pattern and status. */
export function requestMetrics(): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.once('finish', () => {
      const labels = { method: req.method, route: routeOf(req), status: String(res.statusCode) };
      requests.inc(labels);
      requestDuration.observe(labels, Number(process.hrtime.bigint() - started) / 1e9);
    });
    next();
  };
}

export interface ServiceSources {
  /** Quads in the store (may cost a full count: see `serviceMetrics`). */
  quads(): number | Promise<number>;
  /** A counter bumped on every write, so an unchanged store is never counted again. */
  storeVersion(): number;
  sandbox(): { workers: number; timeouts: number; synced: Record<'knowledge' | 'all', number> };
  /** The cluster store (docs/cluster.md): its residency's counts (undefined without a budget) and how many records its replica is behind. */
  cluster?: {
    residency(): { residentWorkspaces: number; loads: number; evictions: number } | undefined;
    lagRecords(): Promise<number>;
    /** Head lookups made before reads (one per request at most, shared by concurrent ones) and appends refused because a head moved. */
    counts(): { headLookups: number; headConflicts: number; commits: number; writes: number };
    /** Placement's counts (WSM_CLUSTER_PLACEMENT=lease); undefined without it. */
    placement?(): PlacementFigures | undefined;
  };
  /** Shortest time between two counts of the quads. Default 60 s. */
  quadsRefreshMs?: number;
  /** The clock (ms), Date.now unless a test gives its own. */
  now?: () => number;
}

/** A count may take at most this share of the time between counts (1%: a count of 20 s waits 2,000 s for the next). */
const COUNT_SHARE = 0.01;

/**
 * Metrics read from one running service at scrape time, in a registry of its own.
 *
 * `wsm_store_quads` is counted again only after a write, at most once a
 * `quadsRefreshMs`, and no sooner than a hundred times the last count's
 * duration after it: on a remote engine a count visits every quad (22 s at
 * 10M quads), and a scrape every 15 s would keep the engine counting. A
 * scrape never waits for a recount: it answers the last count while the
 * next runs in the background (only the first scrape waits for one).
 */
export function serviceMetrics(sources: ServiceSources): client.Registry {
  const registry = new client.Registry();
  const refreshMs = sources.quadsRefreshMs ?? 60_000;
  let counted: { at: number; tookMs: number; version: number; quads: number } | null = null;
  let counting: Promise<void> | null = null;
  const now = sources.now ?? Date.now;
  const count = (): Promise<void> => counting ??= (async () => {
    const version = sources.storeVersion();
    const started = now();
    try {
      const quads = await sources.quads();
      counted = { at: started, tookMs: now() - started, version, quads };
    } finally {
      counting = null;
    }
  })();
  new client.Gauge({
    name: 'wsm_store_quads',
    help: 'Quads in the store (recounted after a write, at most once a minute and so that counting takes at most 1% of the time)',
    registers: [registry],
    async collect() {
      if (!counted) {
        await count();
      } else if (counted.version !== sources.storeVersion() && now() - counted.at >= Math.max(refreshMs, counted.tookMs / COUNT_SHARE)) {
        // The last count is answered; the next one is ready for a later scrape. A failed count is tried again later.
        count().catch(() => undefined);
      }
      if (counted) this.set(counted.quads);
    },
  });
  new client.Gauge({
    name: 'wsm_sandbox_workers',
    help: 'Query worker threads of the sandbox (started, busy or idle)',
    registers: [registry],
    collect() { this.set(sources.sandbox().workers); },
  });
  const syncsSeen = { knowledge: 0, all: 0 };
  new client.Counter({
    name: 'wsm_sandbox_syncs_total',
    help: 'Times a query worker loaded or brought up to date its copy of a workspace\'s data, by view (knowledge: slash commands; all: the SPARQL endpoint)',
    labelNames: ['view'],
    registers: [registry],
    collect() {
      const { synced } = sources.sandbox();
      for (const view of ['knowledge', 'all'] as const) {
        if (synced[view] > syncsSeen[view]) this.inc({ view }, synced[view] - syncsSeen[view]);
        syncsSeen[view] = synced[view];
      }
    },
  });
  let timeoutsSeen = 0;
  new client.Counter({
    name: 'wsm_query_timeouts_total',
    help: 'User queries (slash commands, SPARQL endpoint, MCP) stopped at the time limit',
    registers: [registry],
    collect() {
      const total = sources.sandbox().timeouts;
      if (total > timeoutsSeen) this.inc(total - timeoutsSeen);
      timeoutsSeen = total;
    },
  });
  if (sources.cluster) clusterMetrics(registry, sources.cluster);
  return registry;
}

/** What placement counts (docs/cluster.md, "Placement"). */
export interface PlacementFigures { held: number; acquired: number; takeovers: number; fenced: number; released: number; forwarded: number; forwardFailures: number; forwardConnections: number; forwardRetries: number; handovers: number }

/**
 * Counters that follow running totals kept elsewhere (the store's own
 * counts): on each scrape each goes up by what its total gained since the
 * last one. `totals` answers undefined while there is nothing to count.
 */
function totalCounters<K extends string>(registry: client.Registry, totals: () => Partial<Record<K, number>> | undefined, counters: ReadonlyArray<readonly [NoInfer<K>, string, string]>): void {
  const seen: Partial<Record<K, number>> = {};
  for (const [key, name, help] of counters) {
    new client.Counter({
      name,
      help,
      registers: [registry],
      collect() {
        const total = totals()?.[key] ?? 0;
        if (total > (seen[key] ?? 0)) this.inc(total - (seen[key] ?? 0));
        seen[key] = total;
      },
    });
  }
}

/** Placement's gauge and counters, when it is on. */
function placementMetrics(registry: client.Registry, figures: () => PlacementFigures | undefined): void {
  if (!figures()) return;
  new client.Gauge({
    name: 'wsm_cluster_leases_held',
    help: 'Workspaces whose lease this instance holds (WSM_CLUSTER_PLACEMENT=lease)',
    registers: [registry],
    collect() { this.set(figures()?.held ?? 0); },
  });
  totalCounters(registry, figures, [
    ['acquired', 'wsm_cluster_leases_acquired_total', 'Workspace leases this instance took (first use, a free or ended lease, a takeover)'],
    ['takeovers', 'wsm_cluster_lease_takeovers_total', 'Workspace leases taken over from an owner no connection could be made to while its lease ran'],
    ['fenced', 'wsm_cluster_appends_fenced_total', 'Appends the log refused because this instance\'s lease had been taken over or had ended (nothing appended)'],
    ['released', 'wsm_cluster_leases_released_total', 'Workspace leases this instance let go (idle, the workspace let go, at close)'],
    ['forwarded', 'wsm_cluster_requests_forwarded_total', 'Requests this instance forwarded to the instance holding their workspace'],
    ['forwardFailures', 'wsm_cluster_forward_failures_total', 'Forwarded requests whose owner failed after the request was sent (answered 502)'],
    ['forwardConnections', 'wsm_cluster_forward_connections_total', 'Connections this instance opened to other instances to forward requests (each kept open for the forwards that follow)'],
    ['forwardRetries', 'wsm_cluster_forward_retries_total', 'Forwarded requests sent again on a new connection because the kept one they were sent on had been closed before any answer'],
    ['handovers', 'wsm_cluster_lease_handovers_total', 'Workspace leases this instance released because their requests all came forwarded from one other instance'],
  ]);
}

/** The cluster store's figures: residency (workspaces held, loads, evictions) and catch-up lag. */
function clusterMetrics(registry: client.Registry, cluster: NonNullable<ServiceSources['cluster']>): void {
  new client.Gauge({
    name: 'wsm_cluster_catch_up_lag_records',
    help: 'Records committed in PostgreSQL that this instance\'s replica has not yet applied (or passed over, for workspaces it does not hold)',
    registers: [registry],
    async collect() {
      try {
        this.set(await cluster.lagRecords());
      } catch {
        // PostgreSQL out of reach: /health says so; the gauge keeps its last value.
      }
    },
  });
  totalCounters(registry, () => cluster.counts(), [
    ['headLookups', 'wsm_cluster_head_lookups_total', 'Lookups of the journal\'s heads in PostgreSQL before reads (at most one per request; concurrent requests share one)'],
    ['headConflicts', 'wsm_cluster_head_conflicts_total', 'Appends refused because another instance had moved a head they were checked against (the write caught up and was tried again)'],
    ['commits', 'wsm_cluster_appends_total', 'Appends this instance committed to the journal in PostgreSQL (one commit each)'],
    ['writes', 'wsm_cluster_appended_writes_total', 'Writes those appends held: more than the appends when writes to one workspace shared a commit'],
  ]);
  if (cluster.placement) placementMetrics(registry, () => cluster.placement!());
  // Residency is on from the store's opening, or never.
  if (!cluster.residency()) return;
  new client.Gauge({
    name: 'wsm_cluster_resident_workspaces',
    help: 'Workspaces whose graphs this instance holds (with WSM_CLUSTER_RESIDENT_QUADS; without it every workspace is held and this is not shown)',
    registers: [registry],
    collect() {
      const figures = cluster.residency();
      if (figures) this.set(figures.residentWorkspaces);
    },
  });
  totalCounters(registry, () => cluster.residency(), [
    ['loads', 'wsm_cluster_workspace_loads_total', 'Workspaces this instance loaded on first use (from the newest snapshot and the records after it)'],
    ['evictions', 'wsm_cluster_workspace_evictions_total', 'Workspaces this instance let go, idle or over WSM_CLUSTER_RESIDENT_QUADS'],
  ]);
}

/** The Prometheus text of the process-wide and the service's metrics. */
export async function renderMetrics(service: client.Registry): Promise<{ contentType: string; body: string }> {
  const merged = client.Registry.merge([processRegistry, service]);
  return { contentType: merged.contentType, body: await merged.metrics() };
}
