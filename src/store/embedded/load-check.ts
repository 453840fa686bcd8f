import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import { spawnModuleWorker } from '../../workers/spawn.js';
import { nTriplesSlices } from '../ntriples-slices.js';

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

  /** Checks pieces of loads (each a whole text, or whole lines of N-Triples) in this checker's worker. */
  async check(pieces: Piece[]): Promise<LoadCheckResult> {
    await this.start();
    const id = this.nextId++;
    const answer = new Promise<LoadCheckResult>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    // Each message is copied on this thread: a few hundred kilobytes each, an event-loop turn between them.
    if (pieces.length === 0) pieces = [{ index: -1, format: 'application/n-triples', data: '' }];
    for (const [i, piece] of pieces.entries()) {
      if (!this.pending.has(id)) break; // refused, or the worker stopped
      if (i > 0) await new Promise<void>((resolve) => setImmediate(resolve));
      this.worker?.postMessage({ id, ...piece, last: i === pieces.length - 1 } satisfies LoadCheckRequest);
    }
    return answer;
  }
}

type Piece = { index: number; format: string; data: string };

/** Checkers, started on first use (never holding the process open): one per core, at most two. */
const checkers: LoadChecker[] = [];
const CHECKERS = Math.max(1, Math.min(2, availableParallelism()));
/** Fewer pieces than this go to one checker: splitting a check costs a worker its start. */
const SPLIT_PIECES = 8;

/**
 * Loads each text into throwaway stores of the engine in worker threads;
 * answers null when the engine accepts every one, else the index and the
 * engine's message of the first it refuses. A large check (an install's
 * tens of megabytes) is cut into contiguous runs of pieces, one per
 * checker, checked side by side while the event loop waits: the first
 * refusal in text order is the one answered, so the answer is the same as
 * one checker's.
 */
export async function checkLoadsOffThread(loads: Array<{ format: string; data: string }>): Promise<LoadCheckResult> {
  const pieces: Piece[] = loads.flatMap(({ format, data }, index) => (format === 'application/n-triples'
    ? [...nTriplesSlices(data, PIECE_CHARS)] : [data]).map((piece) => ({ index, format, data: piece })));
  const runs = pieces.length < SPLIT_PIECES ? 1 : CHECKERS;
  const size = Math.ceil(pieces.length / runs);
  const answers = Array.from({ length: runs }, (_, i) => {
    checkers[i] ??= new LoadChecker();
    const answer = checkers[i].check(pieces.slice(i * size, (i + 1) * size));
    answer.catch(() => {}); // awaited below, unless an earlier run was refused
    return answer;
  });
  for (const answer of answers) {
    const refused = await answer;
    if (refused) return refused;
  }
  return null;
}
