import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { FromWorker, ToWorker } from './protocol.js';

/**
 * The query workers (the sandbox's pool): `QueryWorker` is one worker
 * thread with its own Oxigraph store, spoken to by messages (`protocol.ts`);
 * `WorkerPool` holds the workers of one view, starts them as its queue
 * needs (one only for a large view) and retires the idle ones.
 */

type Settle = { resolve: (value: FromWorker) => void; reject: (err: Error) => void };

let lastMessageId = 0;

/** A new id for a message to a worker (its answer carries it). */
export function nextMessageId(): number { return ++lastMessageId; }

/** One worker thread with its own store. */
export class QueryWorker {
  readonly worker: Worker;
  readonly ready: Promise<void>;
  isReady = false;
  busy = false;
  dead = false;
  /** The graphs its store holds: name -> version (see `View.graphs`, views.ts). */
  held = new Map<string, number>();
  /** It is loading data for a view. */
  preparing = false;
  /** Its memory right after its last sync (bytes), as it reported. */
  memoryAfterSync = 0;
  lastUsed = Date.now();
  private readonly pending = new Map<number, Settle>();

  constructor(heapMb: number, onDeath: (worker: QueryWorker, reason: string) => void) {
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

/** How many workers a view keeps, and how large they may grow. */
export interface PoolLimits {
  /** Heap limit of a worker (MB). */
  heapMb: number;
  /** Workers kept started even when idle. */
  warmWorkers: number;
  /** Most workers (concurrent queries of one view). */
  maxWorkers: number;
  /** A view holding more quads than this keeps a single worker (one copy of its data). */
  largeViewQuads: number;
  /** An extra worker idle this long is retired. */
  idleMs: number;
}

/** The workers of one view. */
export class WorkerPool {
  private workers: QueryWorker[] = [];

  constructor(private readonly limits: PoolLimits) {}

  /** Workers not known dead (started or starting). */
  alive(): QueryWorker[] { return this.workers.filter((w) => !w.dead); }

  /** A started worker with nothing to do, if there is one. */
  idle(): QueryWorker | undefined { return this.workers.find((w) => w.isReady && !w.busy && !w.dead); }

  /** Some worker is running a job. */
  anyBusy(): boolean { return this.workers.some((w) => w.busy); }

  /**
   * How many workers to start for `queued` waiting jobs. Every worker holds
   * a copy of the view's data: a large view gets one, so memory stays near
   * one copy. Until the first copy is loaded (`quads` unknown) its size is
   * unknown: one worker, so a large view is never copied several times at once.
   */
  toStart(queued: number, quads: number | undefined): number {
    const alive = this.alive();
    const starting = alive.filter((w) => !w.isReady).length;
    const most = quads === undefined || quads > this.limits.largeViewQuads ? 1 : this.limits.maxWorkers;
    return Math.max(this.limits.warmWorkers - alive.length, Math.min(queued - starting, most - alive.length));
  }

  /**
   * Starts one more worker. No spare is kept started ahead: a worker on the
   * bundled code starts quickly but holds memory while it waits, and the
   * view's data it then loads takes far longer than the start (docs/figures.md).
   */
  spawn(events: { ready: () => void; death: (worker: QueryWorker, reason: string) => void }): QueryWorker {
    const worker = new QueryWorker(this.limits.heapMb, events.death);
    this.workers.push(worker);
    worker.ready.then(events.ready, () => {});
    return worker;
  }

  /** Leaves the worker out of the pool (it died, or is being stopped). */
  remove(worker: QueryWorker): void { this.workers = this.workers.filter((w) => w !== worker); }

  /** Stops the worker at once and leaves it out. */
  stop(worker: QueryWorker): void {
    void worker.kill();
    this.remove(worker);
  }

  /** Stops the extra workers (beyond the warm ones) idle longer than the limit. */
  retireIdle(now: number): void {
    const alive = this.alive();
    const idle = alive.filter((w) => !w.busy && now - w.lastUsed > this.limits.idleMs);
    const removable = alive.length - this.limits.warmWorkers;
    for (const w of idle.slice(0, Math.max(0, removable))) this.stop(w);
  }

  /** Stops every worker; resolves when they have ended. */
  async stopAll(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.kill()));
  }

  /** Stops every worker without waiting. */
  killAll(): void {
    for (const w of this.workers) void w.kill();
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
