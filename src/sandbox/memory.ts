import type { Logger } from '../logger.js';
import type { Job } from './scheduling.js';

/**
 * The memory bound of running queries. Threads share one address space, so
 * what a query costs cannot be read per worker while it runs (a worker busy
 * in WebAssembly answers nothing), and a worker's heap limit does not cover
 * Oxigraph's WebAssembly memory. The process's RSS is sampled instead,
 * every `sampleMs` while queries run, against its RSS when they began: past
 * half the bound (headroom for the growth until the next sample), every
 * running query is stopped (`onBound`: its worker terminated, which frees
 * its WebAssembly memory, and replaced; its caller answered 503
 * QUERY_MEMORY_LIMIT). While a worker loads a copy of a view's data, the
 * growth is taken as data (the base follows RSS), so that a large sync in
 * one workspace never stops the queries of another.
 */
export class MemoryWatch {
  /** Jobs whose query runs now. */
  private readonly running = new Set<Job>();
  /** While there are any: RSS when they began (raised by syncs), and the sampling timer. */
  private watch: { base: number; timer: NodeJS.Timeout } | undefined;
  /** Workers loading data now: their growth is data, not a query's. */
  private syncing = 0;

  constructor(
    private readonly limits: { maxMemoryMb: number; sampleMs: number },
    private readonly logger: Logger,
    /** Stops a running job at the bound (it has left the watch already). */
    private readonly onBound: (job: Job, running: NonNullable<Job['running']>) => void,
  ) {}

  /** The job's query starts running on `worker` of `view`. */
  start(job: Job, running: NonNullable<Job['running']>): void {
    job.running = running;
    this.running.add(job);
    if (!this.watch) {
      const timer = setInterval(() => this.sample(), this.limits.sampleMs);
      timer.unref();
      this.watch = { base: process.memoryUsage.rss(), timer };
    }
  }

  /** The job's query ended (or never ran). */
  stop(job: Job): void {
    if (!this.running.delete(job)) return;
    job.running = undefined;
    if (this.running.size === 0 && this.watch) {
      clearInterval(this.watch.timer);
      this.watch = undefined;
    }
  }

  /** A worker starts loading a copy of a view's data. */
  syncStarted(): void { this.syncing++; }

  /** A worker's load ended: what the copy added is the new base of the watch. */
  syncEnded(): void {
    this.syncing--;
    if (this.watch) this.watch.base = Math.max(this.watch.base, process.memoryUsage.rss());
  }

  close(): void {
    if (this.watch) clearInterval(this.watch.timer);
    this.watch = undefined;
  }

  private sample(): void {
    const watch = this.watch;
    if (!watch) return;
    const rss = process.memoryUsage.rss();
    if (this.syncing > 0) {
      // A worker is loading a copy of a view's data: its growth is not a query's, and the two cannot be told apart.
      watch.base = Math.max(watch.base, rss);
      return;
    }
    const grown = rss - watch.base;
    if (grown <= 0.5 * this.limits.maxMemoryMb * 2 ** 20) return;
    const jobs = [...this.running];
    this.logger.warn({ grownMb: Math.round(grown / 2 ** 20), queries: jobs.length, maxMemoryMb: this.limits.maxMemoryMb }, 'queries stopped at the memory bound');
    for (const job of jobs) {
      const running = job.running!;
      this.stop(job);
      this.onBound(job, running);
    }
  }
}
