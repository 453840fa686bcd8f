import type { Logger } from '../logger.js';
import { StoreUnavailableError } from '../store/store.js';
import { AppError } from '../errors.js';
import type { ResultFormat, ResultKind, RunResult } from './protocol.js';
import { nextMessageId, type QueryWorker } from './pool.js';
import type { OpenViews, View, ViewKind, WorkspaceViews } from './views.js';
import type { ViewSync } from './sync.js';
import type { MemoryWatch } from './memory.js';
import type { SandboxOptions } from './sandbox.js';

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

/** One query from the moment it is queued until its caller has an answer. */
export interface Job {
  request: QueryRequest;
  resolve: (result: RunResult) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
  worker?: QueryWorker;
  done: boolean;
  /** Set while its query runs (after the data sync). */
  running?: { view: View; worker: QueryWorker } | undefined;
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

/** What the sandbox counts (its `stats`). */
export interface SandboxCounters {
  loads: number;
  graphsLoaded: number;
  graphsFromSnapshot: number;
  graphsFromJournal: number;
  runs: number;
  timeouts: number;
  memoryStops: number;
  retired: number;
  handovers: number;
  synced: Record<ViewKind, number>;
}

export function newCounters(): SandboxCounters {
  return { loads: 0, graphsLoaded: 0, graphsFromSnapshot: 0, graphsFromJournal: 0, runs: 0, timeouts: 0, memoryStops: 0, retired: 0, handovers: 0, synced: { knowledge: 0, all: 0 } };
}

const shuttingDown = () => new AppError('SERVICE_UNAVAILABLE', 'The service is shutting down');

/**
 * Runs the queued queries of each view on its workers, with their limits.
 * A job waits in its view's queue for a free worker (`pump`), which first
 * brings its copy of the data up to date (`prepare`: `ViewSync`) and then
 * runs the query (`runQuery`). Each stage has a time limit of its own
 * (`expire`): waiting for a worker the queue limit, preparing the prepare
 * limit, running the query's time limit, past which the worker is
 * terminated and replaced. Running queries are held to the memory bound
 * (`MemoryWatch`).
 */
export class Scheduler {
  private closed = false;

  constructor(
    private readonly opts: Required<SandboxOptions>,
    private readonly views: OpenViews,
    private readonly sync: ViewSync,
    private readonly memory: MemoryWatch,
    private readonly workspaceViews: WorkspaceViews,
    private readonly counters: SandboxCounters,
    private readonly logger: Logger,
  ) {}

  /** The memory bound was passed (`MemoryWatch`): the running job is answered 503 QUERY_MEMORY_LIMIT and its worker replaced. */
  stopAtMemoryBound(job: Job, { view, worker }: NonNullable<Job['running']>): void {
    this.counters.memoryStops++;
    this.settle(job, this.memoryError());
    view.workers.stop(worker);
    this.pump(view);
  }

  /** Queues a query in the view; its wait for a worker has the queue limit. */
  enqueue(view: View, what: Pick<Job, 'request' | 'resolve' | 'reject' | 'knowledgeOnly'>): void {
    const job: Job = { ...what, done: false, queuedAt: Date.now(), timer: setTimeout(() => this.expire(view, job), this.opts.queueTimeoutMs) };
    view.queue.push(job);
    this.pump(view);
  }

  /** Hands queued jobs to idle workers, starting workers as needed. */
  pump(view: View): void {
    // A view dropped while a dispatch of it was ending gets no new workers.
    if (this.closed || !this.views.isOpen(view)) return;
    while (view.queue.length > 0) {
      const idle = view.workers.idle();
      if (!idle) break;
      const job = view.queue.shift()!;
      void this.dispatch(view, idle, job);
    }
    const wanted = view.workers.toStart(view.queue.length, view.quads);
    for (let i = 0; i < wanted; i++) {
      view.workers.spawn({ ready: () => this.pump(view), death: (worker, reason) => this.onWorkerDeath(view, worker, reason) });
    }
  }

  /** Ends the job now with an answer or an error (once; later calls do nothing). */
  settle(job: Job, outcome: RunResult | Error): void {
    if (job.done) return;
    job.done = true;
    clearTimeout(job.timer);
    if (outcome instanceof Error) job.reject(outcome);
    else job.resolve(outcome);
  }

  /** Stops at once: waiting queries are answered 503, every worker is stopped. */
  async close(): Promise<void> {
    this.closed = true;
    this.memory.close();
    for (const view of this.views.values()) {
      for (const job of view.queue) this.settle(job, shuttingDown());
      view.queue = [];
      await view.workers.stopAll();
    }
    this.views.clear();
  }

  private onWorkerDeath(view: View, worker: QueryWorker, reason: string): void {
    if (this.closed) return;
    view.workers.remove(worker);
    this.logger.warn({ view: view.key, reason }, 'query worker stopped');
    if (!worker.isReady) {
      // It never started: fail what waits rather than start workers in a loop; the next query tries again.
      for (const job of view.queue) this.settle(job, new AppError('SERVICE_UNAVAILABLE', 'The query workers could not be started; try again later'));
      view.queue = [];
      return;
    }
    if (this.views.isOpen(view)) this.pump(view);
  }

  /** One job on one worker: its data brought up to date, then its query run; whatever happens, the worker is free again at the end. */
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
      if (await this.prepare(view, worker, job)) await this.runQuery(view, worker, job);
    } catch (err) {
      this.failed(view, worker, job, err);
    } finally {
      view.dispatched.delete(job);
      this.memory.stop(job);
      worker.busy = false;
      worker.lastUsed = Date.now();
      if (job.worker === worker) job.worker = undefined;
      this.pump(view);
      // The whole view was loaded while this view was busy: its copy goes once nothing runs or waits in it.
      if (view.kind === 'knowledge' && this.views.loadedWholeView(view.workspaceId)) this.views.dropIdleKnowledgeView(view.workspaceId);
    }
  }

  /** Brings the worker's copy of the view up to date; false when the job ended meanwhile. */
  private async prepare(view: View, worker: QueryWorker, job: Job): Promise<boolean> {
    // A write while refreshing or dumping marks the view stale again: the next query syncs again.
    await this.sync.refresh(view);
    // Handed over to the whole view (`handOverKnowledgeView`) meanwhile: its worker is gone, nothing to load for it.
    if (job.done && worker.dead) return false;
    if (await this.sync.syncWorker(view, worker)) {
      this.restartQueueWait(view);
      // The whole view is loaded: the knowledge view's queries go there from now on (`OpenViews.wholeViewFor`).
      if (view.kind === 'all') this.views.dropIdleKnowledgeView(view.workspaceId);
    }
    return !job.done;
  }

  /** Runs the job's query on the worker, under the query's time limit and the memory bound, and answers its caller. */
  private async runQuery(view: View, worker: QueryWorker, job: Job): Promise<void> {
    job.preparing = false;
    clearTimeout(job.timer);
    job.timer = setTimeout(() => this.expire(view, job), this.opts.timeoutMs);
    const { request } = job;
    // Read after the copy was brought up to date, as the knowledge view reads its names when it refreshes.
    const knowledge = job.knowledgeOnly ? await this.workspaceViews.knowledgeGraphs(view.workspaceId) : undefined;
    if (job.done) return;
    this.counters.runs++;
    this.memory.start(job, { view, worker });
    const answer = await worker.call({
      type: 'run',
      id: nextMessageId(),
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
  }

  /** A dispatch that threw: answers the job (if nothing did yet) and replaces the worker when its state is unknown. */
  private failed(view: View, worker: QueryWorker, job: Job, err: unknown): void {
    if (job.done) return;
    if (this.closed) {
      this.settle(job, shuttingDown());
    } else if (err instanceof StoreUnavailableError) {
      // The engine could not be reached for the data: the worker is sound (the graphs it missed load next time).
      this.settle(job, err);
    } else if (err instanceof Error && /memory limit|out of memory/i.test(err.message)) {
      // The worker's JS heap limit (a huge result string, say).
      this.counters.memoryStops++;
      view.workers.remove(worker);
      this.settle(job, this.memoryError());
    } else {
      this.logger.error({ err, view: view.key }, 'query worker failed');
      // Its state is unknown: replace it.
      view.workers.stop(worker);
      this.settle(job, new AppError('SERVICE_UNAVAILABLE', 'The query could not be run; try again'));
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

  private memoryError(): AppError {
    return new AppError(
      'QUERY_MEMORY_LIMIT',
      `The query needed more memory than queries may use (${this.opts.maxMemoryMb} MB) and was stopped; narrow it (smaller strings, fewer solutions) and try again`,
      { maxMemoryMb: this.opts.maxMemoryMb },
    );
  }

  private retire(view: View, worker: QueryWorker): void {
    this.counters.retired++;
    view.workers.stop(worker);
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
      view.workers.stop(worker);
      this.logger.warn({ view: view.key, timeoutMs: this.opts.timeoutMs }, 'query stopped at its time limit; worker replaced');
      this.pump(view);
    }
  }
}
