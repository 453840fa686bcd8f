import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../logger.js';
import { StoreUnavailableError, StoreUnreachableError, type QuadStore } from '../store/store.js';
import type { GraphPlaces, Graphs } from '../rdf/graphs.js';
import { AppError } from '../errors.js';
import { hasSnapshotCoverage } from '../store/embedded/snapshot-coverage.js';
import type { FromWorker, ResultFormat, ResultKind, RunResult, SyncMessage, ToWorker } from './protocol.js';
import type { ViewKind, WorkspaceViews } from './views.js';

/**
 * The query sandbox. User queries (slash commands, the administrators'
 * SPARQL endpoint) never run on the service's store: each runs in a worker
 * thread that holds its own Oxigraph copy of the graphs its workspace view
 * may see (`WorkspaceViews`). So a query cannot reach any other graph, and a
 * runaway query only occupies its worker: at the time limit the worker is
 * terminated (and replaced) and the caller gets 503 QUERY_TIMEOUT, while the
 * event loop keeps serving everyone else. The limit counts from the moment a
 * worker takes the query; waiting for a free (or starting) worker has a
 * limit of its own (the time limit, but at least 10 s).
 *
 * Cost per execution is one message each way to a warm worker. A view's
 * workers are re-synced only when a write touched a graph the view depends
 * on (the graphs each write declares, `store.onWrite`; `reaches`), lazily, before the next query they run,
 * and then receive only the graphs that changed, which they rebuild
 * themselves from the newest snapshot file and the journal records after
 * it (the main thread sends where those are: `graphSources`); only graphs
 * an update wrote from other graphs' content are dumped from the store.
 */

export interface SandboxOptions {
  timeoutMs: number;
  /**
   * When set, every query is refused with SERVICE_UNAVAILABLE and this
   * message (user queries are not answered on the remote store yet).
   */
  unavailable?: string;
  /** Most triples (graph results) or rows (bindings) in one answer. */
  maxResults: number;
  /** Workers kept warm per view. */
  warmWorkers?: number;
  /** Most workers per view (concurrent queries of one workspace). */
  maxWorkersPerView?: number;
  /** Most views kept; the least recently used idle one goes first. */
  maxViews?: number;
  /** An extra worker idle this long is retired; a view unused this long is dropped. */
  idleMs?: number;
  viewIdleMs?: number;
  /** Heap limit of a worker (default: the memory bound, at least 128 MB). */
  workerHeapMb?: number;
  /**
   * Most memory running queries may add to the process (MB). The heap limit
   * of a worker does not cover Oxigraph's WebAssembly memory, so the
   * process's RSS is sampled while queries run; see `watchMemory`.
   */
  maxMemoryMb?: number;
  /** How often RSS is sampled while queries run. */
  memorySampleMs?: number;
  /** Longest wait for a free worker (default: the time limit, at least 10 s so a worker can start). */
  queueTimeoutMs?: number;
  /** Longest wait for a worker's copy of the data to be brought up to date (default: 30 times the time limit, at least 5 min). */
  prepareTimeoutMs?: number;
  /** A view holding more quads than this keeps a single worker (one copy of its data), whatever `maxWorkersPerView` says. */
  largeViewQuads?: number;
}

export interface QueryRequest {
  /** Query text (already checked by `script.ts`); the worker applies the result limit (`limits.ts`). */
  query: string;
  kind: ResultKind;
  format: ResultFormat;
  prefixes?: Record<string, string>;
  /** Default graph = union of the view's graphs (false when the query names its own dataset). */
  union: boolean;
  /**
   * The dataset: the SPARQL Protocol's (default-graph-uri / named-graph-uri)
   * or the query's own (`ReadQuery.dataset`). A graph named twice counts once.
   */
  defaultGraphs?: string[];
  namedGraphs?: string[];
}

type Settle = { resolve: (value: FromWorker) => void; reject: (err: Error) => void };

let nextMessageId = 1;

/** One worker thread with its own store. */
class QueryWorker {
  readonly worker: Worker;
  readonly ready: Promise<void>;
  isReady = false;
  busy = false;
  dead = false;
  /** The graphs its store holds: name -> version (see `View.graphs`). */
  held = new Map<string, number>();
  /** It is loading data for a view. */
  preparing = false;
  /** Its memory right after its last sync (bytes), as it reported. */
  memoryAfterSync = 0;
  lastUsed = Date.now();
  private readonly pending = new Map<number, Settle>();

  /** `owner`: the view it serves. */
  constructor(readonly owner: View, heapMb: number, onDeath: (worker: QueryWorker, reason: string) => void) {
    this.worker = spawnWorker(heapMb);
    this.worker.unref();
    this.ready = new Promise<void>((resolve, reject) => {
      const onMessage = (msg: FromWorker) => {
        if (msg.type === 'ready') {
          this.isReady = true;
          resolve();
          return;
        }
        if (!('id' in msg)) return;
        const settle = this.pending.get(msg.id);
        if (!settle) return;
        this.pending.delete(msg.id);
        settle.resolve(msg);
      };
      this.worker.on('message', onMessage);
      const die = (reason: string) => {
        if (this.dead) return;
        this.dead = true;
        reject(new Error(reason));
        for (const settle of this.pending.values()) settle.reject(new Error(reason));
        this.pending.clear();
        onDeath(this, reason);
      };
      this.worker.on('error', (err) => die(`query worker failed: ${err.message}`));
      this.worker.on('exit', (code) => die(`query worker exited (code ${code})`));
    });
    this.ready.catch(() => {});
  }

  call(message: ToWorker): Promise<FromWorker> {
    if (this.dead) return Promise.reject(new Error('query worker is gone'));
    return new Promise<FromWorker>((resolve, reject) => {
      this.pending.set(message.id, { resolve, reject });
      this.worker.postMessage(message);
    });
  }

  /** Stops it at once, whatever it is doing; what it was asked fails. */
  kill(): Promise<unknown> {
    if (this.dead) return Promise.resolve();
    this.dead = true;
    for (const settle of this.pending.values()) settle.reject(new Error('query worker stopped'));
    this.pending.clear();
    return this.worker.terminate();
  }
}

/** The ES module entry of `tsx/esm/api`, from tsx's own exports map. */
function tsxEsmApi(from: string): string {
  const manifestPath = createRequire(from).resolve('tsx/package.json');
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { exports: Record<string, { import: { default: string } }> };
  return pathToFileURL(path.join(path.dirname(manifestPath), manifest.exports['./esm/api']!.import.default)).href;
}

/**
 * Starts a worker on `worker.ts`/`worker.js` beside this module. Run from
 * TypeScript sources (tsx), the worker registers tsx's loader first: loader
 * hooks of the main thread do not reach worker threads.
 */
function spawnWorker(heapMb: number): Worker {
  const here = import.meta.url;
  const resourceLimits = { maxOldGenerationSizeMb: heapMb };
  if (here.endsWith('.ts')) return new Worker(workerBundle ?? (tsWorkerCode ??= workerCodeFromSources(here)), { eval: true, resourceLimits });
  return new Worker(new URL('./worker.js', here), { resourceLimits });
}

/**
 * The worker's code bundled as one CommonJS script (esbuild, once per
 * process), its packages required by absolute path. Run from TypeScript
 * sources, a worker started on it does not load tsx, whose compiled modules
 * would be held by every query worker while it stays up (docs/figures.md).
 * Until the bundle is ready, or if it cannot be made, workers start
 * through tsx.
 */
let workerBundle: string | undefined;
let bundling: Promise<void> | undefined;
export function bundleWorkerCode(): Promise<void> {
  const here = import.meta.url;
  if (!here.endsWith('.ts')) return Promise.resolve();
  return bundling ??= (async () => {
    const esbuild = await import('esbuild');
    const require = createRequire(here);
    const result = await esbuild.build({
      entryPoints: [fileURLToPath(new URL('./worker.ts', here))],
      bundle: true,
      platform: 'node',
      format: 'cjs',
      target: 'node20',
      write: false,
      logLevel: 'silent',
      plugins: [{
        name: 'packages-by-path',
        setup(build) {
          // Bare specifiers (packages) stay outside the bundle, resolved from here: the script runs from no file.
          build.onResolve({ filter: /^[^./]/ }, (args) => (args.path.startsWith('node:') ? { external: true } : { path: require.resolve(args.path), external: true }));
        },
      }],
    });
    workerBundle = result.outputFiles[0]!.text;
  })();
}

/**
 * The code a worker runs from TypeScript sources, made once: resolving tsx
 * is a synchronous round trip to the loader's thread that held the event
 * loop each time a worker started (seen in profiles of 5 executions at once).
 */
let tsWorkerCode: string | undefined;
function workerCodeFromSources(here: string): string {
  const target = JSON.stringify(new URL('./worker.ts', here).href);
  // Resolved here, so the worker finds tsx whatever the working directory.
  // (`import.meta.resolve` is missing when tsx loaded this module as CommonJS.)
  const tsx = JSON.stringify(typeof import.meta.resolve === 'function' ? import.meta.resolve('tsx/esm/api') : tsxEsmApi(here));
  return `import(${tsx}).then((tsx) => { tsx.register(); return import(${target}); })`;
}

interface Job {
  request: QueryRequest;
  resolve: (result: RunResult) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
  worker?: QueryWorker;
  done: boolean;
  /** Set while its query runs (after the data sync). */
  running?: { view: View; worker: QueryWorker };
  /** Its worker is bringing its copy of the data up to date (the query's time limit has not started). */
  preparing?: boolean;
  queuedAt: number;
  /** Its time limit passed once already; the answer may have been waiting behind a busy event loop. */
  graced?: boolean;
  /**
   * A knowledge-view query run in the workspace's whole view: it is confined
   * to the knowledge graphs (read when it runs) by the engine's dataset
   * options, so it sees what the knowledge view's copy would hold.
   */
  knowledgeOnly?: boolean;
}

interface Staleness {
  /** Reload every graph (a write it cannot place). */
  everything: boolean;
  /** Which graphs are visible may have changed (records were written). */
  names: boolean;
  /** Graphs written to. */
  graphs: Set<string>;
}

class View {
  workers: QueryWorker[] = [];
  queue: Job[] = [];
  /** Jobs handed to a worker (preparing its copy or running), until their dispatch ends. */
  dispatched = new Set<Job>();
  /** The graphs the view sees: name -> version, bumped when the graph may have changed. */
  graphs = new Map<string, number>();
  /** What writes since the last refresh may have changed. */
  stale: Staleness = { everything: true, names: true, graphs: new Set() };
  /** Shared store: the store revision of each graph the view depends on, at its last refresh. */
  seen = new Map<string, number>();
  /** Quads in its workers' copies (as the last sync reported; unknown before the first). */
  quads: number | undefined;
  lastUsed = Date.now();
  constructor(readonly key: string, readonly workspaceId: string, readonly kind: ViewKind) {}
  alive(): QueryWorker[] { return this.workers.filter((w) => !w.dead); }
}

/** Whether a knowledge-view query may run in the whole view, confined to the knowledge graphs: one that names no dataset of its own (the confinement replaces it). */
function runsInWholeView(request: QueryRequest): boolean {
  return request.union === true && !request.defaultGraphs && !request.namedGraphs;
}

/**
 * Can the write have changed what a view sees? The knowledge view depends
 * on the matrix graphs, the extension graphs, and the records that say
 * which of them are visible (packages and extensions graphs); the whole
 * workspace view on every graph of the workspace and the system graph.
 */
export function reaches(write: GraphPlaces, workspaceId: string, kind: ViewKind): boolean {
  const paths = write.workspaces.get(workspaceId);
  if (kind === 'all') return write.system || paths !== undefined;
  if (!paths) return false;
  for (const graph of paths) {
    if (graph === 'packages' || graph === 'extensions' || graph === 'variables' || graph.startsWith('extensions/')) return true;
    if (graph.startsWith('matrices/') && !graph.endsWith('/derived')) return true;
  }
  return false;
}

export class QuerySandbox {
  private readonly views = new Map<string, View>();
  /** Started workers not yet serving a view. */
  private readonly unsubscribe: () => void;
  private readonly housekeeping: NodeJS.Timeout;
  private closed = false;
  private readonly counters = { loads: 0, graphsLoaded: 0, graphsFromSnapshot: 0, graphsFromJournal: 0, runs: 0, timeouts: 0, memoryStops: 0, retired: 0, handovers: 0, synced: { knowledge: 0, all: 0 } as Record<ViewKind, number> };
  /** Jobs whose query runs now, and the memory watch while there are any. */
  private readonly running = new Set<Job>();
  private memoryWatch: { base: number; timer: NodeJS.Timeout } | undefined;
  /** Workers loading data now: their growth is data, not a query's (see `watchMemory`). */
  private syncing = 0;
  /** Versions of view graphs (see `View.graphs`). */
  private graphVersion = 0;
  private readonly opts: Required<SandboxOptions>;

  constructor(
    private readonly store: QuadStore,
    private readonly graphs: Graphs,
    private readonly workspaceViews: WorkspaceViews,
    private readonly logger: Logger,
    options: SandboxOptions,
  ) {
    this.opts = {
      warmWorkers: 1,
      maxWorkersPerView: 3,
      maxViews: 32,
      idleMs: 60_000,
      viewIdleMs: 15 * 60_000,
      workerHeapMb: Math.max(128, options.maxMemoryMb ?? 384),
      maxMemoryMb: 384,
      memorySampleMs: 20,
      queueTimeoutMs: Math.max(options.timeoutMs, 10_000),
      prepareTimeoutMs: Math.max(options.timeoutMs * 30, 300_000),
      largeViewQuads: 100_000,
      unavailable: '',
      ...options,
    };
    bundleWorkerCode().catch((err: unknown) => this.logger.warn({ err }, 'query workers start through tsx: their code could not be bundled'));
    this.unsubscribe = store.onWrite((graphs) => this.staleAfterWrite(graphs));
    this.housekeeping = setInterval(() => this.tidy(), Math.min(10_000, this.opts.idleMs));
    this.housekeeping.unref();
  }

  get timeoutMs(): number { return this.opts.timeoutMs; }
  get maxResults(): number { return this.opts.maxResults; }

  /**
   * Runs a query in the workspace's view. Rejects with QUERY_TIMEOUT (503)
   * when it does not finish in time or finds no free worker in time,
   * BAD_REQUEST when the engine refuses the query.
   */
  run(workspaceId: string, kind: ViewKind, request: QueryRequest): Promise<RunResult> {
    if (this.closed) return Promise.reject(new AppError('SERVICE_UNAVAILABLE', 'The service is shutting down'));
    if (this.opts.unavailable) return Promise.reject(new AppError('SERVICE_UNAVAILABLE', this.opts.unavailable));
    const whole = kind === 'knowledge' ? this.wholeViewFor(workspaceId, request) : undefined;
    const view = whole ?? this.view(workspaceId, kind);
    view.lastUsed = Date.now();
    return new Promise<RunResult>((resolve, reject) => {
      this.enqueue(view, { request, resolve, reject, ...(whole ? { knowledgeOnly: true } : {}) });
      if (kind === 'all') this.handOverKnowledgeView(view);
    });
  }

  private enqueue(view: View, what: Pick<Job, 'request' | 'resolve' | 'reject' | 'knowledgeOnly'>): void {
    const job: Job = { ...what, done: false, queuedAt: Date.now(), timer: setTimeout(() => this.expire(view, job), this.opts.queueTimeoutMs) };
    view.queue.push(job);
    this.pump(view);
  }

  /** Counters (for tests, logs and health): live workers, views, syncs, graphs (re)loaded (of them, read from the snapshot file by the worker, and rebuilt by the worker from the journal), queries run, queries stopped. */
  stats(): { workers: number; views: number; loads: number; graphsLoaded: number; graphsFromSnapshot: number; graphsFromJournal: number; runs: number; timeouts: number; memoryStops: number; retired: number; handovers: number; synced: Record<ViewKind, number> } {
    let workers = 0;
    for (const view of this.views.values()) workers += view.alive().length;
    return { workers, views: this.views.size, ...this.counters };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribe();
    if (this.memoryWatch) clearInterval(this.memoryWatch.timer);
    this.memoryWatch = undefined;
    clearInterval(this.housekeeping);
    for (const view of this.views.values()) {
      for (const job of view.queue) this.settle(job, new AppError('SERVICE_UNAVAILABLE', 'The service is shutting down'));
      view.queue = [];
      await Promise.all(view.workers.map((w) => w.kill()));
    }
    this.views.clear();
  }

  private view(workspaceId: string, kind: ViewKind): View {
    const key = `${kind}:${workspaceId}`;
    let view = this.views.get(key);
    if (!view) {
      this.evictIfFull();
      view = new View(key, workspaceId, kind);
      this.views.set(key, view);
    }
    return view;
  }

  /**
   * The workspace's whole view, when a knowledge query can run there instead
   * of in a copy of its own: the whole view holds every graph the knowledge
   * view does (docs/slash-commands.md), so one copy of the workspace serves
   * both while administrators query it. Only once its copy is loaded (until
   * then the knowledge view answers, as before), and only for a query that
   * names no dataset of its own (FROM, FROM NAMED, protocol graphs): the
   * confinement replaces the query's dataset. (The knowledge view's copy
   * is dropped when the whole view's copy is loaded, or when the knowledge
   * view goes idle after that: see `dispatch`.)
   */
  private wholeViewFor(workspaceId: string, request: QueryRequest): View | undefined {
    if (!runsInWholeView(request)) return undefined;
    const whole = this.views.get(`all:${workspaceId}`);
    if (!whole || whole.alive().length === 0) return undefined;
    if (whole.quads !== undefined) return whole;
    // The whole view is loading its first copy: wait for it rather than load a second one, unless the knowledge view's copy is there now.
    const knowledge = this.views.get(`knowledge:${workspaceId}`);
    return knowledge && knowledge.quads !== undefined && knowledge.alive().length > 0 ? undefined : whole;
  }

  /**
   * An administrator's query starts the workspace's whole view while its
   * knowledge view is still loading its first copy (scripts and an
   * administrator started querying a cold workspace together): the
   * knowledge view is stopped, and its queries wait for the whole view's
   * copy, confined as in `wholeViewFor`. So the workspace is loaded once,
   * not twice side by side (twice the memory and the CPU). Not when one of
   * them names its own dataset, or runs already.
   */
  private handOverKnowledgeView(whole: View): void {
    const knowledge = this.views.get(`knowledge:${whole.workspaceId}`);
    if (!knowledge || knowledge.quads !== undefined || whole.quads !== undefined || whole.alive().length === 0) return;
    const jobs = [...knowledge.dispatched, ...knowledge.queue].filter((job) => !job.done);
    if (jobs.some((job) => job.running || !runsInWholeView(job.request))) return;
    for (const job of jobs) {
      // The old job ends here without an answer (its dispatch sees it done); the caller's answer comes from the whole view.
      job.done = true;
      clearTimeout(job.timer);
      this.enqueue(whole, { request: job.request, resolve: job.resolve, reject: job.reject, knowledgeOnly: true });
    }
    knowledge.queue = [];
    this.counters.handovers++;
    this.dropView(knowledge);
  }

  /** The workspace's whole view once a copy of it is loaded in a live worker. */
  private loadedWholeView(workspaceId: string): View | undefined {
    const whole = this.views.get(`all:${workspaceId}`);
    return whole && whole.quads !== undefined && whole.alive().length > 0 ? whole : undefined;
  }

  /** Drops the workspace's knowledge view when nothing waits for or runs in it (its queries go to the whole view). */
  private dropIdleKnowledgeView(workspaceId: string): void {
    const knowledge = this.views.get(`knowledge:${workspaceId}`);
    if (knowledge && knowledge.queue.length === 0 && knowledge.workers.every((w) => !w.busy)) this.dropView(knowledge);
  }

  private evictIfFull(): void {
    if (this.views.size < this.opts.maxViews) return;
    const idle = [...this.views.values()]
      .filter((v) => v.queue.length === 0 && v.alive().every((w) => !w.busy))
      .sort((a, b) => a.lastUsed - b.lastUsed)[0];
    if (idle) this.dropView(idle);
  }

  private dropView(view: View): void {
    for (const w of view.workers) void w.kill();
    this.views.delete(view.key);
  }

  /** Marks the views a write can have changed stale, from the graphs the write declared. */
  private staleAfterWrite(declared: ReadonlySet<string>): void {
    const write = this.graphs.placesOf(declared);
    for (const view of this.views.values()) {
      if (!reaches(write, view.workspaceId, view.kind)) continue;
      const stale = view.stale;
      if (write.system) stale.graphs.add(this.graphs.system);
      const prefix = this.graphs.workspacePrefix(view.workspaceId);
      for (const path of write.workspaces.get(view.workspaceId) ?? []) {
        stale.graphs.add(prefix + path);
        // The system graph's excerpt holds the members' user records: who the members are is in the IAM graph.
        if (view.kind === 'all' && prefix + path === this.graphs.iam(view.workspaceId)) stale.graphs.add(this.graphs.system);
        // Records choose the knowledge view's graphs; any new graph may join the whole-workspace view.
        if (view.kind === 'all' || path === 'packages' || path === 'extensions') stale.names = true;
      }
    }
  }

  /**
   * Brings the view's list of graphs up to date after writes: recomputes
   * which graphs it sees when records changed, and gives a new version to
   * each graph that may have changed, so workers reload just those.
   */
  private async refresh(view: View): Promise<void> {
    if (this.store.capabilities.otherInstancesWrite) await this.staleAfterOtherInstances(view);
    const { stale } = view;
    if (!stale.everything && !stale.names && stale.graphs.size === 0) return;
    // Reset first: writes made while the names are read mark the view stale again.
    view.stale = { everything: false, names: false, graphs: new Set() };
    const names = stale.everything || stale.names ? await this.workspaceViews.names(view.workspaceId, view.kind) : [...view.graphs.keys()];
    const next = new Map<string, number>();
    for (const name of names) {
      const version = view.graphs.get(name);
      next.set(name, version !== undefined && !stale.everything && !stale.graphs.has(name) ? version : ++this.graphVersion);
    }
    view.graphs = next;
    if (this.store.capabilities.otherInstancesWrite) {
      // Graphs new to the view: their revisions now, before they are dumped (a write after this moves them).
      const fresh = names.filter((name) => !view.seen.has(name));
      if (fresh.length > 0) {
        await this.store.syncRevisions(fresh);
        for (const name of fresh) view.seen.set(name, this.store.revision(name));
      }
    }
  }

  /**
   * Several instances on one store (`capabilities.otherInstancesWrite`):
   * their writes reach no `onWrite` of this process. The view is checked against the store's revisions of the graphs
   * it depends on (`syncRevisions`: one query for the engine's generations),
   * as the read cache is (docs/store.md, the cache rule): a graph
   * whose revision moved since the last refresh is reloaded, and when one
   * of the records that choose the view's graphs moved, the names are read
   * again. Revisions are taken before the graphs are dumped, so a write
   * during the dump moves them again and the next query reloads.
   */
  private async staleAfterOtherInstances(view: View): Promise<void> {
    const ws = view.workspaceId;
    const records = view.kind === 'knowledge'
      ? [this.graphs.packages(ws), this.graphs.extensions(ws)]
      : [this.graphs.packages(ws), this.graphs.extensions(ws), this.graphs.iam(ws), this.graphs.slashCommands(ws), this.graphs.system];
    const tracked = [...new Set([...records, ...view.graphs.keys()])];
    await this.store.syncRevisions(tracked);
    for (const g of tracked) {
      const revision = this.store.revision(g);
      const before = view.seen.get(g);
      view.seen.set(g, revision);
      // First sight: the view has not loaded it since (a new view is stale as a whole; new names are seen in `refresh`).
      if (before === undefined || before === revision) continue;
      view.stale.graphs.add(g);
      if (records.includes(g)) view.stale.names = true;
      // As in `staleAfterWrite`: the system graph's excerpt depends on the members, in the IAM graph.
      if (view.kind === 'all' && g === this.graphs.iam(ws)) view.stale.graphs.add(this.graphs.system);
    }
  }

  /**
   * Gives the view one more worker, started now. No spare is kept started
   * ahead: a worker on the bundled code starts quickly but holds memory
   * while it waits, and the view's data it then loads takes far longer
   * than the start (docs/figures.md).
   */
  private spawn(view: View): void {
    const worker = new QueryWorker(view, this.opts.workerHeapMb, (w, reason) => this.onWorkerDeath(w, reason));
    view.workers.push(worker);
    worker.ready.then(() => this.pump(view), () => {});
  }

  private onWorkerDeath(worker: QueryWorker, reason: string): void {
    if (this.closed) return;
    const view = worker.owner;
    view.workers = view.workers.filter((w) => w !== worker);
    this.logger.warn({ view: view.key, reason }, 'query worker stopped');
    if (!worker.isReady) {
      // It never started: fail what waits rather than start workers in a loop; the next query tries again.
      for (const job of view.queue) this.settle(job, new AppError('SERVICE_UNAVAILABLE', 'The query workers could not be started; try again later'));
      view.queue = [];
      return;
    }
    if (this.views.get(view.key) === view) this.pump(view);
  }

  /** Hands queued jobs to idle workers, starting workers as needed. */
  private pump(view: View): void {
    // A view dropped while a dispatch of it was ending gets no new workers.
    if (this.closed || this.views.get(view.key) !== view) return;
    while (view.queue.length > 0) {
      const idle = view.workers.find((w) => w.isReady && !w.busy && !w.dead);
      if (!idle) break;
      const job = view.queue.shift()!;
      void this.dispatch(view, idle, job);
    }
    const alive = view.alive();
    const starting = alive.filter((w) => !w.isReady).length;
    // Every worker holds a copy of the view's data: a large view gets one, so memory stays near one copy.
    // Until the first copy is loaded its size is unknown: one worker, so a large view is never copied several times at once.
    const most = view.quads === undefined || view.quads > this.opts.largeViewQuads ? 1 : this.opts.maxWorkersPerView;
    const wanted = Math.max(this.opts.warmWorkers - alive.length, Math.min(view.queue.length - starting, most - alive.length));
    for (let i = 0; i < wanted; i++) this.spawn(view);
  }

  private async dispatch(view: View, worker: QueryWorker, job: Job): Promise<void> {
    view.dispatched.add(job);
    worker.busy = true;
    worker.lastUsed = Date.now();
    job.worker = worker;
    // Bringing the worker's copy up to date has a limit of its own; the query's time limit starts after it.
    clearTimeout(job.timer);
    job.preparing = true;
    job.timer = setTimeout(() => this.expire(view, job), this.opts.prepareTimeoutMs);
    try {
      // A write while refreshing or dumping marks the view stale again: the next query syncs again.
      await this.refresh(view);
      // Handed over to the whole view (`handOverKnowledgeView`) meanwhile: its worker is gone, nothing to load for it.
      if (job.done && worker.dead) return;
      const drop = [...worker.held.keys()].filter((name) => !view.graphs.has(name));
      const load = [...view.graphs].filter(([name, version]) => worker.held.get(name) !== version);
      if (drop.length || load.length) {
        this.counters.loads++;
        this.counters.graphsLoaded += load.length;
        const held = new Map(view.graphs);
        let synced: FromWorker;
        this.syncing++;
        worker.preparing = true;
        try {
          // The worker rebuilds the graphs itself, in its own thread: from the newest snapshot file and
          // the journal records after it, or (the remote store) from the engine's answers, which it asks
          // for. Only the system graph's excerpt is made here, and graphs the journal cannot give (written
          // from other graphs' content) are sent afterwards.
          const names = load.map(([name]) => name);
          const excerpt = names.filter((name) => view.kind === 'all' && name === this.graphs.system);
          const rebuilt = names.filter((name) => !excerpt.includes(name));
          const sources = rebuilt.length > 0 && hasSnapshotCoverage(this.store) ? await this.store.graphSources(rebuilt) : undefined;
          const fetch = !sources ? await this.dumpRequests(rebuilt) : undefined;
          synced = await worker.call({
            type: 'sync',
            id: nextMessageId++,
            drop,
            load: await this.dumpGraphs(view, sources || fetch ? excerpt : names),
            ...(fetch ? { fetch } : {}),
            ...(sources?.snapshot ? { fromSnapshot: sources.snapshot } : {}),
            ...(sources ? { fromJournal: sources.journal } : {}),
          });
          if (synced.type === 'error' && synced.kind === 'snapshot') {
            // Removed by later snapshots, say: the worker left those graphs empty; send them as text.
            this.logger.warn({ view: view.key, reason: synced.message }, 'query worker could not read the snapshot; sending the graphs instead');
            synced = await worker.call({ type: 'sync', id: nextMessageId++, drop: [], load: await this.dumpGraphs(view, rebuilt) });
          } else if (synced.type === 'synced' && sources) {
            const unreplayed = synced.unreplayed ?? [];
            this.counters.graphsFromSnapshot += sources.snapshot?.graphs.length ?? 0;
            this.counters.graphsFromJournal += sources.journal.graphs.length - unreplayed.length;
            if (unreplayed.length > 0) synced = await worker.call({ type: 'sync', id: nextMessageId++, drop: [], load: await this.dumpGraphs(view, unreplayed) });
          }
        } finally {
          worker.preparing = false;
          this.syncing--;
          // What the copy added is the new base of the memory watch.
          if (this.memoryWatch) this.memoryWatch.base = Math.max(this.memoryWatch.base, process.memoryUsage.rss());
        }
        if (synced.type === 'error' && synced.kind === 'unreachable') throw new StoreUnreachableError(synced.message);
        if (synced.type === 'error') throw new Error(`syncing the workspace's graphs failed: ${synced.message}`);
        // A write while syncing bumps versions: the next query syncs again.
        worker.held = held;
        this.restartQueueWait(view);
        if (synced.type === 'synced') {
          this.counters.synced[view.kind]++;
          worker.memoryAfterSync = synced.memory;
          view.quads = synced.quads;
        }
        // The whole view is loaded: the knowledge view's queries go there from now on (`wholeViewFor`).
        if (view.kind === 'all') this.dropIdleKnowledgeView(view.workspaceId);
      }
      if (job.done) return;
      job.preparing = false;
      clearTimeout(job.timer);
      job.timer = setTimeout(() => this.expire(view, job), this.opts.timeoutMs);
      const { request } = job;
      // Read after the copy was brought up to date, as the knowledge view reads its names when it refreshes.
      const knowledge = job.knowledgeOnly ? await this.workspaceViews.knowledgeGraphs(view.workspaceId) : undefined;
      if (job.done) return;
      this.counters.runs++;
      this.startRunning(job, view, worker);
      const answer = await worker.call({
        type: 'run',
        id: nextMessageId++,
        query: request.query,
        kind: request.kind,
        format: request.format,
        prefixes: request.prefixes ?? {},
        maxResults: this.opts.maxResults,
        union: request.union,
        ...(knowledge
          ? { defaultGraphs: knowledge, namedGraphs: knowledge }
          : {
            ...(request.defaultGraphs ? { defaultGraphs: [...new Set(request.defaultGraphs)] } : {}),
            ...(request.namedGraphs ? { namedGraphs: [...new Set(request.namedGraphs)] } : {}),
          }),
      });
      if (answer.type === 'result') {
        this.settle(job, answer.result);
        // WebAssembly memory never shrinks: a worker a query made grow by half the bound is replaced (its next query re-syncs).
        if (answer.memory > worker.memoryAfterSync + (this.opts.maxMemoryMb * 2 ** 20) / 2) this.retire(view, worker);
      }
      else if (answer.type === 'error' && answer.kind === 'query') this.settle(job, new AppError('BAD_REQUEST', `The query failed: ${answer.message}`));
      else if (answer.type === 'error' && answer.kind === 'format') this.settle(job, new AppError('NOT_ACCEPTABLE', answer.message));
      else throw new Error(answer.type === 'error' ? answer.message : `unexpected answer ${answer.type}`);
    } catch (err) {
      if (!job.done && this.closed) {
        this.settle(job, new AppError('SERVICE_UNAVAILABLE', 'The service is shutting down'));
      } else if (!job.done && err instanceof StoreUnavailableError) {
        // The engine could not be reached for the data: the worker is sound (the graphs it missed load next time).
        this.settle(job, err);
      } else if (!job.done && err instanceof Error && /memory limit|out of memory/i.test(err.message)) {
        // The worker's JS heap limit (a huge result string, say).
        this.counters.memoryStops++;
        view.workers = view.workers.filter((w) => w !== worker);
        this.settle(job, this.memoryError());
      } else if (!job.done) {
        this.logger.error({ err, view: view.key }, 'query worker failed');
        // Its state is unknown: replace it.
        void worker.kill();
        view.workers = view.workers.filter((w) => w !== worker);
        this.settle(job, new AppError('SERVICE_UNAVAILABLE', 'The query could not be run; try again'));
      }
    } finally {
      view.dispatched.delete(job);
      this.stopRunning(job);
      worker.busy = false;
      worker.lastUsed = Date.now();
      if (job.worker === worker) job.worker = undefined;
      this.pump(view);
      // The whole view was loaded while this view was busy: its copy goes once nothing runs or waits in it.
      if (view.kind === 'knowledge' && this.loadedWholeView(view.workspaceId)) this.dropIdleKnowledgeView(view.workspaceId);
    }
  }

  /**
   * The data is ready: queries that waited for it now wait for a free
   * worker, and that wait has its own limit from now on (else the queries
   * queued behind a long preparation would all expire at once, each behind
   * the few milliseconds of the one before).
   */
  private restartQueueWait(view: View): void {
    for (const job of view.queue) {
      clearTimeout(job.timer);
      job.queuedAt = Date.now();
      job.timer = setTimeout(() => this.expire(view, job), this.opts.queueTimeoutMs);
    }
  }

  /** Requests a worker sends itself for graphs of the remote store (`QuadStore.graphDumpRequest`); undefined on other stores. */
  private async dumpRequests(names: string[]): Promise<SyncMessage['fetch']> {
    const request = this.store.graphDumpRequest?.bind(this.store);
    if (!request) return undefined;
    return await Promise.all(names.map(async (name) => ({ name, request: await request(name) })));
  }

  /** Graphs of a view as N-Triples, one engine call each, with an event-loop turn before each. */
  private async dumpGraphs(view: View, names: string[]): Promise<Array<{ name: string; ntriples: string }>> {
    const out: Array<{ name: string; ntriples: string }> = [];
    for (const name of names) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      out.push({ name, ntriples: await this.workspaceViews.dump(view.workspaceId, view.kind, name) });
    }
    return out;
  }

  private memoryError(): AppError {
    return new AppError(
      'QUERY_MEMORY_LIMIT',
      `The query needed more memory than queries may use (${this.opts.maxMemoryMb} MB) and was stopped; narrow it (smaller strings, fewer solutions) and try again`,
      { maxMemoryMb: this.opts.maxMemoryMb },
    );
  }

  private retire(view: View, worker: QueryWorker): void {
    this.counters.retired++;
    void worker.kill();
    view.workers = view.workers.filter((w) => w !== worker);
  }

  private startRunning(job: Job, view: View, worker: QueryWorker): void {
    job.running = { view, worker };
    this.running.add(job);
    if (!this.memoryWatch) {
      const timer = setInterval(() => this.watchMemory(), this.opts.memorySampleMs);
      timer.unref();
      this.memoryWatch = { base: process.memoryUsage.rss(), timer };
    }
  }

  private stopRunning(job: Job): void {
    if (!this.running.delete(job)) return;
    job.running = undefined;
    if (this.running.size === 0 && this.memoryWatch) {
      clearInterval(this.memoryWatch.timer);
      this.memoryWatch = undefined;
    }
  }

  /**
   * The memory bound. Threads share one address space, so what a query
   * costs cannot be read per worker while it runs (a worker busy in
   * WebAssembly answers nothing). The process's RSS is sampled instead,
   * every `memorySampleMs` while queries run, against its RSS when they
   * began: past half the bound (headroom for the growth until the next
   * sample), every running query is stopped, its worker terminated (which
   * frees its WebAssembly memory) and replaced, and its caller answered 503
   * QUERY_MEMORY_LIMIT. While a worker loads a copy of a view's data, the
   * growth is taken as data (the base follows RSS), so that a large sync in
   * one workspace never stops the queries of another.
   */
  private watchMemory(): void {
    const watch = this.memoryWatch;
    if (!watch) return;
    const rss = process.memoryUsage.rss();
    if (this.syncing > 0) {
      // A worker is loading a copy of a view's data: its growth is not a query's, and the two cannot be told apart.
      watch.base = Math.max(watch.base, rss);
      return;
    }
    const grown = rss - watch.base;
    if (grown <= 0.5 * this.opts.maxMemoryMb * 2 ** 20) return;
    const jobs = [...this.running];
    this.logger.warn({ grownMb: Math.round(grown / 2 ** 20), queries: jobs.length, maxMemoryMb: this.opts.maxMemoryMb }, 'queries stopped at the memory bound');
    for (const job of jobs) {
      const { view, worker } = job.running!;
      this.stopRunning(job);
      this.counters.memoryStops++;
      this.settle(job, this.memoryError());
      void worker.kill();
      view.workers = view.workers.filter((w) => w !== worker);
      this.pump(view);
    }
  }

  private settle(job: Job, outcome: RunResult | Error): void {
    if (job.done) return;
    job.done = true;
    clearTimeout(job.timer);
    if (outcome instanceof Error) job.reject(outcome);
    else job.resolve(outcome);
  }

  /**
   * A time limit passed: a job still waiting for a worker leaves the queue;
   * a running one has its worker stopped (and replaced).
   */
  private expire(view: View, job: Job): void {
    if (job.done) return;
    const waited = Date.now() - job.queuedAt;
    if (!job.worker && waited < this.opts.prepareTimeoutMs && view.alive().some((w) => w.preparing || !w.isReady)) {
      // Waiting for the view's data to be loaded (or a worker to start), not for other queries: wait on.
      job.timer = setTimeout(() => this.expire(view, job), Math.min(1_000, this.opts.prepareTimeoutMs - waited));
      return;
    }
    const worker = job.worker;
    if (worker && !job.preparing && !job.graced) {
      // An answer that arrived while the event loop was busy is handled before this check runs.
      job.graced = true;
      setImmediate(() => this.expire(view, job));
      return;
    }
    const queued = view.queue.indexOf(job);
    if (queued !== -1) view.queue.splice(queued, 1);
    this.counters.timeouts++;
    if (worker && job.preparing) {
      // The worker is still loading the data: let it finish, so the next query finds it ready.
      this.settle(job, new AppError(
        'QUERY_TIMEOUT',
        `The workspace's data for queries was not ready within ${this.opts.prepareTimeoutMs} ms (it is still being prepared); try again shortly`,
        { timeoutMs: this.opts.prepareTimeoutMs },
      ));
      return;
    }
    this.settle(job, new AppError(
      'QUERY_TIMEOUT',
      worker
        ? `The query did not finish within ${this.opts.timeoutMs} ms and was stopped; narrow it (fewer unbound patterns, a LIMIT) and try again`
        : `The query waited ${this.opts.queueTimeoutMs} ms for a free query worker of this workspace (other queries are running); try again`,
      { timeoutMs: worker ? this.opts.timeoutMs : this.opts.queueTimeoutMs },
    ));
    if (worker) {
      void worker.kill();
      view.workers = view.workers.filter((w) => w !== worker);
      this.logger.warn({ view: view.key, timeoutMs: this.opts.timeoutMs }, 'query stopped at its time limit; worker replaced');
      this.pump(view);
    }
  }

  /** Retires extra idle workers and unused views. */
  private tidy(): void {
    const now = Date.now();
    for (const view of [...this.views.values()]) {
      const busy = view.queue.length > 0 || view.workers.some((w) => w.busy);
      if (!busy && now - view.lastUsed > this.opts.viewIdleMs) {
        this.dropView(view);
        continue;
      }
      const idle = view.alive().filter((w) => !w.busy && now - w.lastUsed > this.opts.idleMs);
      const removable = view.alive().length - this.opts.warmWorkers;
      for (const w of idle.slice(0, Math.max(0, removable))) {
        void w.kill();
        view.workers = view.workers.filter((x) => x !== w);
      }
    }
  }
}
