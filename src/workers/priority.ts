import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';

/** The niceness of the service's background worker threads (query workers, snapshots), where the system allows. */
export const WORKER_NICE = 10;

/**
 * Makes the calling worker thread give way to the service's event loop: a
 * worker loading a million quads, or running a long query, keeps a core
 * busy for seconds, and on a machine with few cores the event loop would
 * wait for a turn (docs/figures.md). Linux gives each thread its own
 * niceness: the thread id is read from `/proc/thread-self`. Elsewhere, or
 * when refused, the thread keeps the process's priority.
 */
export function giveWayToTheEventLoop(nice: number = WORKER_NICE): void {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isInteger(tid) && tid > 0 && tid !== process.pid) setPriority(tid, nice);
  } catch {
    // Not Linux, or not allowed: the same priority as the event loop.
  }
}
