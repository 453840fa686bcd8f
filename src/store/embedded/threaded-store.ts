import type { Worker } from 'node:worker_threads';
import { spawnModuleWorker } from '../../workers/spawn.js';
import { movableBuffer } from '../../workers/transfer.js';
import { countStoreThreadStop, observeFsync } from '../../metrics.js';
import { ExclusiveSections } from '../sections.js';
import { GraphRevisions } from '../revisions.js';
import { MAX_KEPT_ANSWERS, MAX_KEPT_ROWS, answerKey, readDelayFromEnv } from './oxigraph-store.js';
import { StoreUnavailableError, WriteRefusedError, declaredGraphs, type Binding, type QuadStore, type QueryScope, type StoreCapabilities, type StoreHealth, type WriteCondition, type WriteInput } from '../store.js';
import { fromThreadError, type StoreAnswer, type StoreArgs, type StoreCall, type StoreMessage, type StoreRequest, type StoreRequestOf, type StoreThreadData } from './store-thread.js';
import type { GraphSources, SnapshotCoverage } from './snapshot-coverage.js';
import type { Sparql } from '../../rdf/sparql.js';

/*
 * The embedded store in a thread of its own (docs/store.md, "The
 * store's thread"). The durable Oxigraph store, its journal and its
 * snapshots live in a worker thread (`store-worker.ts`); this class is the
 * `QuadStore` the service holds on its event loop, and each call is one
 * message to that thread. The engine's calls are synchronous and some take
 * long (an install's graphs loaded slice by slice, a slice far longer when
 * the engine's indexes grow; a SELECT of many rows; the journal record of
 * a large write encoded; docs/figures.md): there they hold that thread, not the one that
 * answers `/health` and cached reads.
 *
 * Kept here, on the event loop, because the service reads them
 * synchronously or on every request: the graphs' revisions and the version
 * (moved when a write's answer arrives: `writing`), the write listeners, the exclusive sections, the
 * health of the journal (as the last write's answer left it, asked again
 * while it is unwritable), and the answers of small SELECTs and ASKs made
 * since the last write (the same rule as `OxigraphStore`'s).
 */

export interface ThreadedStoreOptions {
  onWarning?: (message: string) => void;
  onInfo?: (message: string) => void;
  /**
   * On a stop of the store's thread (a crash) and on each restart that
   * failed: until a restart succeeds, the service answers 503 to everything
   * that needs the store.
   */
  onError?: (message: string) => void;
  /** First wait before restarting a stopped store thread; doubles after each failed restart, at most 60 s. Default 500 ms. */
  restartMs?: number;
  journalProbeMs?: number;
  journalProbeMaxMs?: number;
  /** The automatic snapshot threshold's floor (`DurableStoreOptions.snapshotMinBytes`). */
  snapshotMinBytes?: number;
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
  lent?: Lent;
}

type LoadInput = Extract<WriteInput, { kind: 'load' }>;

/** The ops of a write whose bytes were moved to the store's thread (and their indexes in the write), their buffers, and the bytes moved back. */
interface Lent {
  ops: LoadInput[];
  indexes: number[];
  buffers: ArrayBuffer[];
  returned: Uint8Array[];
}

/**
 * Opens the durable embedded store of `dataDir` in its own thread; resolves
 * once it is recovered (snapshot loaded, journal replayed), rejects with the
 * reason when it cannot be opened.
 */
export async function openThreadedStore(dataDir: string, options: ThreadedStoreOptions = {}): Promise<ThreadedStore> {
  const data: StoreThreadData = {
    dataDir,
    ...(options.journalProbeMs !== undefined ? { journalProbeMs: options.journalProbeMs } : {}),
    ...(options.journalProbeMaxMs !== undefined ? { journalProbeMaxMs: options.journalProbeMaxMs } : {}),
    ...(options.snapshotMinBytes !== undefined ? { snapshotMinBytes: options.snapshotMinBytes } : {}),
  };
  const store = new ThreadedStore(data, options);
  await store.opened;
  return store;
}

const MAX_RESTART_MS = 60_000;
const spawnStoreThread = (data: StoreThreadData): Worker => spawnModuleWorker(new URL('./store-worker.ts', import.meta.url), undefined, data);

export class ThreadedStore implements QuadStore, SnapshotCoverage {
  /** The durable store, written by this process alone. */
  readonly capabilities: StoreCapabilities = { otherInstancesWrite: false, durable: true, graphPatternNamesGraphs: true };
  /** Resolves once the store's thread has opened the store. */
  readonly opened: Promise<void>;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private readonly revisions = new GraphRevisions();
  private versionCounter = 0;
  private readonly listeners = new Set<(graphs: ReadonlySet<string>) => void>();
  private readonly sections = new ExclusiveSections();
  /** Small answers since the last write's answer (`generation`). */
  private readonly answers = new Map<string, Binding[] | boolean>();
  /** Moves when a write's answer arrives: an answer asked before it is not kept (in the test read-delay mode, answers may come out of order). */
  private generation = 0;
  private sizeAt: { version: number; size: number } | undefined;
  private storeHealth: StoreHealth = { writable: true };
  private healthProbe: NodeJS.Timeout | null = null;
  /** Set while no thread answers: it stopped (a crash: until a restart succeeds), or `close`. */
  private stopped: Error | null = null;
  private closing: Promise<void> | undefined;
  private worker: Worker;
  /** The errors calls were rejected with when a thread stopped: a write rejected so may have been applied. */
  private readonly stops = new WeakSet<Error>();
  private restartTimer: NodeJS.Timeout | null = null;
  private restartWait: number;
  private restartsDone = 0;
  /** The test read-delay mode: every read goes to the thread, which delays it (no answer kept here). */
  private readonly readDelay = readDelayFromEnv();

  constructor(private readonly data: StoreThreadData, private readonly options: ThreadedStoreOptions) {
    this.restartWait = options.restartMs ?? 500;
    let ready!: () => void;
    let failed!: (err: Error) => void;
    this.opened = new Promise<void>((resolve, reject) => { ready = resolve; failed = reject; });
    this.worker = this.attach(spawnStoreThread(data), { ready, failed }, false);
  }

  /**
   * Listens to a store thread: its answers, logs and fsync timings; its
   * `ready` or `failed` once the store is opened; and its stop. A thread
   * that stops after it opened the store (a crash: the engine out of
   * memory, a fault of its own) is restarted, as a start of the service
   * would: it reopens the data directory and recovers from the snapshot and
   * the journal, so every acknowledged write is there. Meanwhile every call
   * is answered with `StoreUnavailableError` (503) and `/health` says the
   * storage cannot be read. Writes that were waiting for their answer were
   * maybe applied (journaled before the stop): their callers get the 503,
   * their graphs' revisions move and listeners hear of them as of writes
   * that changed them.
   */
  private attach(worker: Worker, opening: { ready: () => void; failed: (err: Error) => void }, restart: boolean): Worker {
    let opened = false;
    let stopped = false;
    worker.on('message', (message: StoreMessage) => {
      switch (message.kind) {
        case 'answer':
        case 'error': {
          if (message.health) this.healthIs(message.health);
          const waiting = this.pending.get(message.id);
          if (!waiting) return;
          this.pending.delete(message.id);
          if (waiting.lent && message.returned) waiting.lent.returned = message.returned;
          if (this.pending.size === 0) this.worker.unref();
          if (message.kind === 'answer') waiting.resolve(message.value);
          else waiting.reject(fromThreadError(message.error));
          return;
        }
        case 'ready':
          opened = true;
          if (this.pending.size === 0) worker.unref(); // held only while an answer is awaited
          opening.ready();
          return;
        case 'failed': opening.failed(fromThreadError(message.error)); return;
        case 'log': (message.level === 'warn' ? this.options.onWarning : this.options.onInfo)?.(message.message); return;
        case 'fsyncs': for (const seconds of message.seconds) observeFsync(seconds); return;
      }
    });
    const stop = (reason: string) => {
      if (stopped) return;
      stopped = true;
      const error = new StoreUnavailableError(`the store's thread stopped: ${reason}`, undefined);
      this.stops.add(error);
      this.stopped = error;
      opening.failed(error);
      if (!this.closing) this.options.onError?.(`${error.message}${opened ? '; it is restarted' : ''}`);
      for (const waiting of this.pending.values()) waiting.reject(error);
      this.pending.clear();
      if (this.healthProbe) clearTimeout(this.healthProbe);
      this.healthProbe = null;
    };
    worker.on('error', (err: Error) => stop(err.message));
    worker.on('exit', (code) => {
      stop(`exit code ${code}`);
      // A first start that fails is the caller's to report (`openThreadedStore` rejects); a failed restart is tried again.
      if (opened && !this.closing) countStoreThreadStop();
      if ((opened || restart) && !this.closing) this.scheduleRestart();
    });
    return worker;
  }

  private scheduleRestart(): void {
    const wait = this.restartWait;
    this.restartWait = Math.min(this.restartWait * 2, MAX_RESTART_MS);
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      if (this.closing) return;
      let reopened!: () => void;
      let failed!: (err: Error) => void;
      const opening = new Promise<void>((resolve, reject) => { reopened = resolve; failed = reject; });
      opening.catch(() => {}); // a restart that fails is reported by its thread's exit
      const worker = this.attach(spawnStoreThread({ ...this.data, restart: true }), { ready: reopened, failed }, true);
      this.worker = worker;
      opening.then(() => {
        if (this.closing || this.worker !== worker) return;
        this.restartWait = this.options.restartMs ?? 500;
        this.restartsDone++;
        this.stopped = null;
        this.storeHealth = { writable: true };
        this.generation++;
        this.answers.clear();
        this.sizeAt = undefined;
        this.options.onInfo?.('the store\'s thread was restarted: the store was recovered from its snapshot and journal');
      }, (err: Error) => {
        if (this.closing) return;
        this.options.onError?.(`the store's thread could not be restarted (tried again in ${Math.round(this.restartWait / 1000)} s at the latest): ${err.message}`);
        // Its thread ends by itself after a failed open (`store-worker.ts`), and its exit schedules the next attempt.
        void worker.terminate();
      });
    }, wait);
    this.restartTimer.unref();
  }

  /** Restarts of the store's thread that succeeded. */
  get restarts(): number {
    return this.restartsDone;
  }

  /** Stops the store's thread as a crash would (no close, the lock left behind): tests of the restart. */
  async stopThreadAsCrash(): Promise<void> {
    await this.worker.terminate();
  }

  private request<C extends StoreCall>(call: C, args: StoreArgs<C>, lent?: Lent): Promise<StoreAnswer<C>> {
    // A new error: a call refused before it was sent changed nothing (unlike the calls a stop cut off, `stops`).
    if (this.stopped) return Promise.reject(new StoreUnavailableError(this.stopped.message, undefined));
    const id = this.nextId++;
    return new Promise<StoreAnswer<C>>((resolve, reject) => {
      if (this.pending.size === 0) this.worker.ref(); // the process waits for the answer
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject, ...(lent ? { lent } : {}) });
      const typed: StoreRequestOf<C> = { id, call, args, ...(lent?.indexes.length ? { lent: lent.indexes } : {}) };
      // One call's request is one member of the union; the compiler cannot see that for a generic `C`.
      const request = typed as StoreRequest;
      try {
        this.worker.postMessage(request, lent?.buffers ?? []);
      } catch (err) {
        this.pending.delete(id);
        if (this.pending.size === 0) this.worker.unref();
        reject(err as Error);
      }
    });
  }

  // Reads.

  select(query: Sparql, scope?: QueryScope): Promise<Binding[]> {
    const key = answerKey('select', query, scope);
    const known = this.readDelay ? undefined : this.answers.get(key);
    if (known !== undefined) return Promise.resolve((known as Binding[]).slice());
    const generation = this.generation;
    return this.request('select', [query, scope]).then((bindings) => {
      if (bindings.length > MAX_KEPT_ROWS || generation !== this.generation) return bindings;
      for (const b of bindings) {
        for (const v of Object.values(b)) Object.freeze(v);
        Object.freeze(b);
      }
      this.keep(key, bindings);
      return bindings.slice();
    });
  }

  ask(query: Sparql, scope?: QueryScope): Promise<boolean> {
    const key = answerKey('ask', query, scope);
    const known = this.readDelay ? undefined : this.answers.get(key);
    if (known !== undefined) return Promise.resolve(known as boolean);
    const generation = this.generation;
    return this.request('ask', [query, scope]).then((answer) => {
      if (generation === this.generation) this.keep(key, answer);
      return answer;
    });
  }

  private keep(key: string, answer: Binding[] | boolean): void {
    if (this.answers.size >= MAX_KEPT_ANSWERS) this.answers.clear();
    this.answers.set(key, answer);
  }

  selectIris(query: Sparql, variable: string, scope?: QueryScope): Promise<string[]> {
    return this.request('selectIris', [query, variable, scope]);
  }

  construct(query: Sparql, scope?: QueryScope): Promise<string> {
    return this.request('construct', [query, scope]);
  }

  queryRaw(query: Sparql, resultsFormat: string, scope?: QueryScope): Promise<string | boolean> {
    return this.request('queryRaw', [query, resultsFormat, scope]);
  }

  dumpGraph(graph: string): Promise<string> {
    return this.request('dumpGraph', [graph]);
  }

  graphNames(): Promise<string[]> {
    return this.request('graphNames', []);
  }

  /** The thread counts every quad once per write: the count is kept here until the next write. */
  async size(): Promise<number> {
    const version = this.versionCounter;
    if (this.sizeAt?.version === version) return this.sizeAt.size;
    const size = await this.request('size', []);
    if (version === this.versionCounter) this.sizeAt = { version, size };
    return size;
  }

  isEmpty(): Promise<boolean> {
    return this.request('isEmpty', []);
  }

  graphSources(graphs: string[]): Promise<GraphSources | undefined> {
    if (this.stopped) return Promise.resolve(undefined);
    return this.request('graphSources', [graphs]);
  }

  unchangedInSnapshot(graphs: string[]): Promise<{ file: string; graphs: string[] } | undefined> {
    if (this.stopped) return Promise.resolve(undefined);
    return this.request('unchangedInSnapshot', [graphs]);
  }

  /** Writes a snapshot now (`DurableStore.snapshot`); automatic snapshots need no call. */
  snapshot(): Promise<void> {
    return this.request('snapshot', []);
  }

  // Writes.

  async write(ops: WriteInput[]): Promise<void> {
    await this.writing(ops, () => this.lending(ops, (lent) => this.request('write', [ops], lent)).then(() => true));
  }

  writeIf(condition: WriteCondition, ops: WriteInput[]): Promise<boolean> {
    return this.writing(ops, () => this.lending(ops, (lent) => this.request('writeIf', [condition, ops], lent)));
  }

  /**
   * Sends a write whose loads given as bytes are lent to the store's thread:
   * their buffers are moved there, not copied (a copy holds the event loop,
   * a move does not: docs/figures.md), and moved back
   * with the answer, when each op's `data` is set to its bytes again (a
   * failed command writes its report again). Bytes that share their buffer
   * with other data (a slice of Node's pool) are copied instead.
   */
  private async lending<T>(ops: WriteInput[], send: (lent: Lent) => Promise<T>): Promise<T> {
    const lent: Lent = { ops: [], indexes: [], buffers: [], returned: [] };
    ops.forEach((op, index) => {
      if (op.kind !== 'load' || typeof op.data === 'string') return;
      const buffer = movableBuffer(op.data, lent.buffers);
      if (!buffer) return;
      lent.ops.push(op);
      lent.indexes.push(index);
      lent.buffers.push(buffer);
    });
    try {
      return await send(lent);
    } finally {
      lent.ops.forEach((op, i) => {
        const back = lent.returned[i];
        if (back) op.data = back;
      });
    }
  }

  update(sparql: Sparql, graphs: readonly string[]): Promise<void> {
    return this.write([{ kind: 'update', sparql, graphs }]);
  }

  /**
   * Sends a write. Its graphs' revisions move, and the kept answers go, when
   * its answer arrives, not when it is sent: an answer read before the write
   * applied was sent by the thread before the write's answer (the thread
   * answers in order), so it is kept, if at all, before that move, which
   * makes it stale. A write in flight (an install's, seconds long) leaves
   * the cached reads of its graphs answering until it is applied, as on the
   * event loop's store, where reads of a large write's graphs wait for it
   * whole. Listeners hear of it once it was applied (or may have been in
   * part: an error other than a refusal or an unwritable journal, which
   * leave nothing).
   */
  private async writing(ops: WriteInput[], send: () => Promise<boolean>): Promise<boolean> {
    const touched = declaredGraphs(ops);
    let changed = false;
    try {
      const applied = await send();
      changed = applied;
      return applied;
    } catch (err) {
      // A refusal or an unwritable journal leave nothing; a stop of the thread may have come after the journal.
      changed = !(err instanceof WriteRefusedError) && !(err instanceof StoreUnavailableError && !this.stops.has(err));
      throw err;
    } finally {
      this.moved(touched);
      if (changed) {
        this.versionCounter++;
        for (const listener of this.listeners) listener(touched);
      }
    }
  }

  private moved(touched: ReadonlySet<string>): void {
    this.revisions.bump(touched);
    this.generation++;
    this.answers.clear();
  }

  // What the service reads synchronously.

  get version(): number {
    return this.versionCounter;
  }

  revision(graph: string): number {
    return this.revisions.get(graph);
  }

  /** No other instance writes this store: its revisions are always up to date. */
  syncRevisions(): Promise<void> {
    return Promise.resolve();
  }

  onWrite(listener: (graphs: ReadonlySet<string>) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  exclusive<T>(key: string, fn: () => Promise<T>): Promise<T> {
    return this.sections.run(key, fn);
  }

  /**
   * As the journal's health was at the last write's answer; while it is
   * unwritable, the thread is asked again (the journal probes itself and
   * becomes writable without a client's write).
   */
  health(): StoreHealth {
    if (this.stopped) return { writable: false, readable: false, reason: this.stopped.message, retryAfterSeconds: 5 };
    return this.storeHealth;
  }

  private healthIs(health: StoreHealth): void {
    this.storeHealth = health;
    if (health.writable || this.healthProbe || this.stopped) return;
    const wait = Math.min(1000, Math.max(100, (health.retryAfterSeconds ?? 1) * 250));
    this.healthProbe = setTimeout(() => {
      this.healthProbe = null;
      this.request('health', []).then((now) => this.healthIs(now), () => {});
    }, wait);
    this.healthProbe.unref();
  }

  /** Closes the store in its thread (journal flushed, lock released), then stops the thread. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.healthProbe) clearTimeout(this.healthProbe);
      if (this.restartTimer) clearTimeout(this.restartTimer);
      try {
        if (!this.stopped) await this.request('close', []);
      } finally {
        await this.worker.terminate();
      }
    })();
    return this.closing;
  }
}
