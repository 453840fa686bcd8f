import { StoreUnavailableError, WriteRefusedError, type StoreHealth } from '../store.js';
import { JournalCorruptError, LostHistoryError, type DurableStore } from './durable.js';

/*
 * The messages between the service's event loop and the thread that holds
 * the embedded store (`threaded-store.ts`, `store-worker.ts`). Everything in
 * them survives a structured clone: plain objects, strings, numbers.
 */

/** What the store's thread is asked to do: a method of the `DurableStore` it holds. */
export type StoreCall =
  | 'select' | 'selectIris' | 'ask' | 'construct' | 'queryRaw'
  | 'write' | 'writeIf' | 'dumpGraph' | 'graphNames' | 'size' | 'isEmpty'
  | 'graphSources' | 'unchangedInSnapshot' | 'snapshot' | 'health' | 'close';

/** A call's arguments: those of the `DurableStore` method it names, so the compiler checks both sides. */
export type StoreArgs<C extends StoreCall> = Parameters<DurableStore[C]>;

/** A call's answer: what the `DurableStore` method it names resolves to. */
export type StoreAnswer<C extends StoreCall> = Awaited<ReturnType<DurableStore[C]>>;

/** A request for one call. */
export interface StoreRequestOf<C extends StoreCall> {
  id: number;
  call: C;
  args: StoreArgs<C>;
  /**
   * A write's loads whose bytes were moved here (indexes into its ops): the
   * answer moves them back, in this order (`returned`).
   */
  lent?: number[];
}

/** Any request: a union discriminated by `call`, so a `switch` on it knows each call's arguments. */
export type StoreRequest = { [C in StoreCall]: StoreRequestOf<C> }[StoreCall];

/** An error as it crosses the threads: the store's own error classes keep their class and fields. */
export interface ThreadError {
  name: string;
  message: string;
  opIndex?: number;
  engineMessage?: string;
  errno?: string;
  retryAfterSeconds?: number;
  file?: string;
  offset?: number;
}

export type StoreMessage =
  /** The answer to request `id`; a write's answer carries the store's health after it. */
  | { kind: 'answer'; id: number; value: unknown; health?: StoreHealth; returned?: Uint8Array[] }
  | { kind: 'error'; id: number; error: ThreadError; health?: StoreHealth; returned?: Uint8Array[] }
  /** The store is open (or could not be opened). */
  | { kind: 'ready' }
  | { kind: 'failed'; error: ThreadError }
  /** A line for the service's log (replay summary, recovered problems, failed snapshots). */
  | { kind: 'log'; level: 'info' | 'warn'; message: string }
  /** Journal fsyncs since the last such message, each in seconds (the fsync histogram of /metrics). */
  | { kind: 'fsyncs'; seconds: number[] };

/** What the thread is started with. */
export interface StoreThreadData {
  dataDir: string;
  /** A restart after this process's previous store thread stopped: the lock it left names this process. */
  restart?: boolean;
  journalProbeMs?: number;
  journalProbeMaxMs?: number;
  snapshotMinBytes?: number;
}

export function toThreadError(err: unknown): ThreadError {
  if (!(err instanceof Error)) return { name: 'Error', message: String(err) };
  const out: ThreadError = { name: err.name, message: err.message };
  if (err instanceof WriteRefusedError) {
    out.opIndex = err.opIndex;
    out.engineMessage = err.engineMessage;
  }
  if (err instanceof StoreUnavailableError) {
    if (err.errno !== undefined) out.errno = err.errno;
    out.retryAfterSeconds = err.retryAfterSeconds;
  }
  if (err instanceof JournalCorruptError) {
    out.file = err.file;
    out.offset = err.offset;
  }
  return out;
}

/** The error on this side: the store's own errors (a refusal, an unwritable journal, a store that cannot be opened) as themselves, others as an `Error` of the same name and message. */
export function fromThreadError(error: ThreadError): Error {
  if (error.name === 'WriteRefusedError' && error.opIndex !== undefined) return new WriteRefusedError(error.opIndex, error.engineMessage ?? error.message);
  if (error.name === 'StoreUnavailableError') {
    const err = new StoreUnavailableError(error.message, error.errno);
    if (error.retryAfterSeconds !== undefined) err.retryAfterSeconds = error.retryAfterSeconds;
    return err;
  }
  if (error.name === 'JournalCorruptError') return new JournalCorruptError(error.message, error.file ?? '', error.offset ?? 0);
  if (error.name === 'LostHistoryError') return new LostHistoryError(error.message);
  const err = new Error(error.message);
  err.name = error.name;
  return err;
}
