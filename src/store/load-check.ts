import type { Worker } from 'node:worker_threads';
import { spawnModuleWorker } from '../workers/spawn.js';
import { nTriplesSlices } from './oxigraph-store.js';

/** Characters of N-Triples per message to the worker. */
const PIECE_CHARS = 256 * 1024;

/*
 * The engine's check of a large write's loads, off the event loop. A large
 * write (an install: tens of megabytes of N-Triples) must be checked before
 * it is journaled (a refused write journals nothing), and loading it into
 * a scratch store on the main thread would hold the event loop for seconds.
 * So the texts go to a worker thread that loads them into a throwaway store
 * of the same engine; the same text loads into the service's store exactly
 * when it loads there (a load's acceptance depends on its text only).
 */

/**
 * One piece of a check: `data` goes into the throwaway store of check `id`
 * (N-Triples in pieces cut at line ends, so no one message copies a whole
 * install); `last` ends the check.
 */
export interface LoadCheckRequest { id: number; index: number; format: string; data: string; last: boolean }
export type LoadCheckReply = { id: number; ok: true } | { id: number; ok: false; index: number; message: string };

/** What the check found: null when every load is accepted, else the first refused one. */
export type LoadCheckResult = null | { index: number; message: string };

class LoadChecker {
  private worker: Worker | null = null;
  private ready: Promise<void> | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (r: LoadCheckResult) => void; reject: (e: Error) => void }>();

  private start(): Promise<void> {
    if (this.ready) return this.ready;
    const worker = spawnModuleWorker(new URL('./load-check-worker.ts', import.meta.url));
    worker.unref();
    this.worker = worker;
    this.ready = new Promise<void>((resolve, reject) => {
      worker.on('message', (msg: LoadCheckReply | { ready: true }) => {
        if ('ready' in msg) { resolve(); return; }
        const settle = this.pending.get(msg.id);
        if (!settle) return;
        this.pending.delete(msg.id);
        settle.resolve(msg.ok ? null : { index: msg.index, message: msg.message });
      });
      const die = (reason: string) => {
        if (this.worker !== worker) return;
        this.worker = null;
        this.ready = null;
        const error = new Error(`the load check worker stopped (${reason})`);
        reject(error);
        for (const settle of this.pending.values()) settle.reject(error);
        this.pending.clear();
      };
      worker.on('error', (err: Error) => die(err.message));
      worker.on('exit', (code) => die(`exit code ${code}`));
    });
    this.ready.catch(() => {});
    return this.ready;
  }

  async check(loads: Array<{ format: string; data: string }>): Promise<LoadCheckResult> {
    await this.start();
    const id = this.nextId++;
    const answer = new Promise<LoadCheckResult>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    // Each message is copied on this thread: a few hundred kilobytes each, an event-loop turn between them.
    const pieces = loads.flatMap(({ format, data }, index) => (format === 'application/n-triples'
      ? [...nTriplesSlices(data, PIECE_CHARS)] : [data]).map((piece) => ({ index, format, data: piece })));
    if (pieces.length === 0) pieces.push({ index: -1, format: 'application/n-triples', data: '' });
    for (const [i, piece] of pieces.entries()) {
      if (!this.pending.has(id)) break; // refused, or the worker stopped
      if (i > 0) await new Promise<void>((resolve) => setImmediate(resolve));
      this.worker?.postMessage({ id, ...piece, last: i === pieces.length - 1 } satisfies LoadCheckRequest);
    }
    return answer;
  }
}

let shared: LoadChecker | undefined;

/**
 * Loads each text into a throwaway store of the engine in a worker thread
 * (one shared, started on first use, never holding the process open);
 * answers null when the engine accepts every one, else the index and the
 * engine's message of the first it refuses.
 */
export function checkLoadsOffThread(loads: Array<{ format: string; data: string }>): Promise<LoadCheckResult> {
  shared ??= new LoadChecker();
  return shared.check(loads);
}
