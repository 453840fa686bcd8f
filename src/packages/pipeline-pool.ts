import type { Worker } from 'node:worker_threads';
import { spawnModuleWorker } from '../workers/spawn.js';
import { movableBuffer } from '../workers/transfer.js';
import { CommandFailure } from './commands.js';
import type { DeriveInput, DerivedOutput, ParseInput, ParseOutput, StepFailure, ValidateInput, ValidateOutput } from './pipeline.js';

/*
 * Worker threads for the deployment pipeline (pipeline.ts): a small pool,
 * one worker per job, so the parsing, SHACL validation and derivation of a
 * package never run on the service's event loop. At most `maxWorkers` jobs
 * run at once (the others wait their turn); an idle worker is kept a while
 * for the next job, then stopped.
 */

export type PipelineRequest =
  | { id: number; step: 'parse'; input: ParseInput }
  | { id: number; step: 'validate'; input: ValidateInput }
  | { id: number; step: 'derive'; input: DeriveInput }
  | { id: number; step: 'reset' };

/** A request without its id (the worker wrapper numbers it). */
type StepRequest = PipelineRequest extends infer R ? R extends PipelineRequest ? Omit<R, 'id'> : never : never;

export type PipelineReply = { id: number; ok: unknown } | { id: number; error: string };

export interface PipelinePoolOptions {
  /** Jobs running at once (one worker each). */
  maxWorkers: number;
  /** How long an idle worker is kept for the next job (beyond the `keepWarm` kept always). */
  idleMs: number;
  /** Idle workers kept without a time limit once started (a worker's start costs about a second). */
  keepWarm: number;
  /** Heap limit of a worker: a package that needs more fails its command instead of the process. */
  heapMb: number;
}

const DEFAULTS: PipelinePoolOptions = { maxWorkers: 2, idleMs: 30_000, keepWarm: 1, heapMb: 4096 };

class PipelineWorker {
  private readonly worker: Worker;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private nextId = 1;
  readonly ready: Promise<void>;
  dead: string | null = null;
  idleTimer: NodeJS.Timeout | undefined;

  constructor(heapMb: number, onDeath: (w: PipelineWorker) => void) {
    this.worker = spawnModuleWorker(new URL('./pipeline-worker.ts', import.meta.url), { maxOldGenerationSizeMb: heapMb });
    this.worker.unref();
    this.ready = new Promise((resolve, reject) => {
      this.worker.on('message', (msg: PipelineReply | { ready: true }) => {
        if ('ready' in msg) { resolve(); return; }
        const settle = this.pending.get(msg.id);
        if (!settle) return;
        this.pending.delete(msg.id);
        if ('error' in msg) settle.reject(new Error(msg.error));
        else settle.resolve(msg.ok);
      });
      const die = (reason: string) => {
        if (this.dead) return;
        this.dead = reason;
        reject(new Error(reason));
        for (const settle of this.pending.values()) settle.reject(new CommandFailure(`The deployment worker stopped (${reason})`, 'Install again; if it happens again the package may be too large for this service.'));
        this.pending.clear();
        onDeath(this);
      };
      this.worker.on('error', (err: Error & { code?: string }) => die(err.code === 'ERR_WORKER_OUT_OF_MEMORY' ? 'out of memory' : err.message));
      this.worker.on('exit', (code) => die(`exit code ${code}`));
    });
    this.ready.catch(() => {});
  }

  call(message: StepRequest, transfer: ArrayBuffer[] = []): Promise<unknown> {
    if (this.dead) return Promise.reject(new CommandFailure(`The deployment worker stopped (${this.dead})`, 'Install again.'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ ...message, id }, transfer);
    });
  }

  terminate(): void {
    clearTimeout(this.idleTimer);
    this.dead ??= 'stopped';
    void this.worker.terminate();
  }
}

/** The steps of one job, on the worker it holds. A step's user-facing failure throws a CommandFailure. */
export class PipelineJob {
  constructor(private readonly worker: PipelineWorker) {}

  private async step<T>(message: StepRequest, transfer: ArrayBuffer[] = []): Promise<T> {
    const out = await this.worker.call(message, transfer) as T | StepFailure;
    if (out && typeof out === 'object' && 'failure' in out) throw new CommandFailure(out.failure.message, out.failure.hint);
    return out as T;
  }

  /**
   * Matrix texts given as bytes that hold a buffer of their own (an
   * archive's files) are moved to the worker, not copied: a copy holds the
   * event loop (docs/figures.md). They are empty here afterwards.
   */
  parse(input: ParseInput): Promise<ParseOutput> {
    const transfer: ArrayBuffer[] = [];
    for (const { text } of input.matrices) {
      const buffer = typeof text === 'string' ? null : movableBuffer(text, transfer);
      if (buffer) transfer.push(buffer);
    }
    return this.step({ step: 'parse', input }, transfer);
  }
  validate(input: ValidateInput): Promise<ValidateOutput> { return this.step({ step: 'validate', input }); }
  derive(input: DeriveInput): Promise<DerivedOutput[]> { return this.step({ step: 'derive', input }); }
}

export class PipelinePool {
  private readonly options: PipelinePoolOptions;
  private readonly idle: PipelineWorker[] = [];
  private busy = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(options: Partial<PipelinePoolOptions> = {}) {
    this.options = { ...DEFAULTS, ...options };
  }

  /** Runs `fn` with a worker of its own; the worker's state is cleared after. */
  async run<T>(fn: (job: PipelineJob) => Promise<T>): Promise<T> {
    while (this.busy >= this.options.maxWorkers) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.busy++;
    let worker: PipelineWorker | undefined;
    try {
      worker = this.idle.pop();
      if (worker) clearTimeout(worker.idleTimer);
      else {
        worker = new PipelineWorker(this.options.heapMb, (w) => this.forget(w));
        await worker.ready;
      }
      return await fn(new PipelineJob(worker));
    } finally {
      if (worker && !worker.dead) {
        const w = worker;
        await w.call({ step: 'reset' }).then(() => this.release(w), () => w.terminate());
      }
      this.busy--;
      this.waiting.shift()?.();
    }
  }

  private release(worker: PipelineWorker): void {
    if (worker.dead) return;
    if (this.idle.length >= this.options.keepWarm) {
      worker.idleTimer = setTimeout(() => { this.forget(worker); worker.terminate(); }, this.options.idleMs);
      worker.idleTimer.unref();
    }
    this.idle.push(worker);
  }

  private forget(worker: PipelineWorker): void {
    const i = this.idle.indexOf(worker);
    if (i >= 0) this.idle.splice(i, 1);
  }

  /** Stops the idle workers (running jobs finish on theirs). */
  close(): void {
    for (const w of this.idle.splice(0)) w.terminate();
  }
}

let shared: PipelinePool | undefined;

/** The process's pool (the workers are shared by every service in the process). */
export function sharedPipelinePool(): PipelinePool {
  shared ??= new PipelinePool();
  return shared;
}
