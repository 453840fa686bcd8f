import type { Logger } from '../logger.js';
import type { QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { AppError } from '../errors.js';
import type { RunResult } from './protocol.js';
import { bundleWorkerCode } from './pool.js';
import { OpenViews, runsInWholeView, type View, type ViewKind, type WorkspaceViews } from './views.js';
import { ViewSync } from './sync.js';
import { MemoryWatch } from './memory.js';
import { newCounters, Scheduler, type QueryRequest, type SandboxCounters } from './scheduling.js';

export type { QueryRequest } from './scheduling.js';
export { reaches } from './sync.js';

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
 *
 * `QuerySandbox` composes the parts, one job each: the workers
 * (`pool.ts`), the views kept and which one answers a query (`views.ts`),
 * keeping the workers' copies up to date (`sync.ts`), and running the
 * queued queries under their limits (`scheduling.ts`, with the memory
 * bound in `memory.ts`).
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
   * process's RSS is sampled while queries run; see `MemoryWatch` (memory.ts).
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

export class QuerySandbox {
  private readonly views: OpenViews;
  private readonly sync: ViewSync;
  private readonly scheduler: Scheduler;
  private readonly unsubscribe: () => void;
  private readonly housekeeping: NodeJS.Timeout;
  private closed = false;
  private readonly counters: SandboxCounters = newCounters();
  private readonly opts: Required<SandboxOptions>;

  constructor(
    store: QuadStore,
    graphs: Graphs,
    workspaceViews: WorkspaceViews,
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
    const o = this.opts;
    this.views = new OpenViews({
      heapMb: o.workerHeapMb, warmWorkers: o.warmWorkers, maxWorkers: o.maxWorkersPerView, largeViewQuads: o.largeViewQuads,
      idleMs: o.idleMs, maxViews: o.maxViews, viewIdleMs: o.viewIdleMs,
    });
    const memory = new MemoryWatch({ maxMemoryMb: o.maxMemoryMb, sampleMs: o.memorySampleMs }, logger, (job, running) => this.scheduler.stopAtMemoryBound(job, running));
    this.sync = new ViewSync(store, graphs, workspaceViews, logger, this.counters, memory);
    this.scheduler = new Scheduler(o, this.views, this.sync, memory, workspaceViews, this.counters, logger);
    bundleWorkerCode().catch((err: unknown) => this.logger.warn({ err }, 'query workers start through tsx: their code could not be bundled'));
    this.unsubscribe = store.onWrite((declared) => this.sync.staleAfterWrite(declared, this.views.values()));
    this.housekeeping = setInterval(() => this.views.tidy(), Math.min(10_000, o.idleMs));
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
    const whole = kind === 'knowledge' ? this.views.wholeViewFor(workspaceId, request) : undefined;
    const view = whole ?? this.views.open(workspaceId, kind);
    view.lastUsed = Date.now();
    return new Promise<RunResult>((resolve, reject) => {
      this.scheduler.enqueue(view, { request, resolve, reject, ...(whole ? { knowledgeOnly: true } : {}) });
      if (kind === 'all') this.handOverKnowledgeView(view);
    });
  }

  /** Counters (for tests, logs and health): live workers, views, syncs, graphs (re)loaded (of them, read from the snapshot file by the worker, and rebuilt by the worker from the journal), queries run, queries stopped. */
  stats(): { workers: number; views: number } & SandboxCounters {
    let workers = 0;
    for (const view of this.views.values()) workers += view.alive().length;
    return { workers, views: this.views.size, ...this.counters };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribe();
    clearInterval(this.housekeeping);
    await this.scheduler.close();
  }

  /**
   * An administrator's query starts the workspace's whole view while its
   * knowledge view is still loading its first copy (scripts and an
   * administrator started querying a cold workspace together): the
   * knowledge view is stopped, and its queries wait for the whole view's
   * copy, confined as in `OpenViews.wholeViewFor`. So the workspace is
   * loaded once, not twice side by side (twice the memory and the CPU).
   * Not when one of them names its own dataset, or runs already.
   */
  private handOverKnowledgeView(whole: View): void {
    const knowledge = this.views.get(whole.workspaceId, 'knowledge');
    if (!knowledge || knowledge.quads !== undefined || whole.quads !== undefined || whole.alive().length === 0) return;
    const jobs = [...knowledge.dispatched, ...knowledge.queue].filter((job) => !job.done);
    if (jobs.some((job) => job.running || !runsInWholeView(job.request))) return;
    for (const job of jobs) {
      // The old job ends here without an answer (its dispatch sees it done); the caller's answer comes from the whole view.
      job.done = true;
      clearTimeout(job.timer);
      this.scheduler.enqueue(whole, { request: job.request, resolve: job.resolve, reject: job.reject, knowledgeOnly: true });
    }
    knowledge.queue = [];
    this.counters.handovers++;
    this.views.drop(knowledge);
  }
}
