import { spawnModuleWorker } from '../../workers/spawn.js';
import type { ClusterSnapshotJob, ClusterSnapshotReply } from './snapshot-worker.js';

export type BuiltSnapshot = Exclude<ClusterSnapshotReply, { ok: false }>;

/**
 * Builds and stores a snapshot in a worker thread (`snapshot-worker.ts`)
 * with connections of its own: the event loop does none of the rebuilding,
 * dumping or sending. Rejects with the worker's reason, or when `signal`
 * aborts (the worker is stopped).
 */
export function snapshotInWorker(job: ClusterSnapshotJob, signal?: AbortSignal): Promise<BuiltSnapshot> {
  return new Promise<BuiltSnapshot>((resolve, reject) => {
    if (signal?.aborted) return reject(new Error('the store closed before the snapshot began'));
    const worker = spawnModuleWorker(new URL('./snapshot-worker.ts', import.meta.url), undefined, job);
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      void worker.terminate();
      fn();
    };
    // Ended with its store: a snapshot not yet committed is rolled back by PostgreSQL as its connection drops.
    signal?.addEventListener('abort', () => settle(() => reject(new Error('the store closed while the snapshot was built'))), { once: true });
    worker.on('message', (reply: ClusterSnapshotReply) => settle(() => (reply.ok ? resolve(reply) : reject(new Error(reply.message)))));
    worker.on('error', (err: Error) => settle(() => reject(new Error(`the snapshot worker failed: ${err.message}`))));
    worker.on('exit', (code) => settle(() => reject(new Error(`the snapshot worker stopped (exit code ${code})`))));
  });
}
