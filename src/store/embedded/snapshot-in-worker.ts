import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { spawnModuleWorker } from '../../workers/spawn.js';
import { snapshotFileName, type WrittenSnapshot } from './snapshot.js';
import type { SnapshotJob, SnapshotJobReply } from './snapshot-worker.js';

/**
 * Writes the snapshot of record `job.seq` in a worker thread
 * (`snapshot-worker.ts`), from the previous snapshot and the journal: the
 * event loop does none of the dumping, and writes need not wait for it.
 * Rejects with the worker's reason (its temporary file removed) when it
 * cannot: a journal record missing, a store that does not come out as the
 * live one was, the disk.
 */
export function snapshotInWorker(job: SnapshotJob): Promise<WrittenSnapshot> {
  return new Promise<WrittenSnapshot>((resolve, reject) => {
    const worker = spawnModuleWorker(new URL('./snapshot-worker.ts', import.meta.url), undefined, job);
    let settled = false;
    const fail = (message: string) => {
      if (settled) return;
      settled = true;
      void worker.terminate();
      rm(`${join(job.dir, snapshotFileName(job.seq))}.tmp`, { force: true }).catch(() => {}).finally(() => reject(new Error(message)));
    };
    worker.on('message', (reply: SnapshotJobReply) => {
      if (!reply.ok) return fail(reply.message);
      settled = true;
      void worker.terminate();
      resolve({ file: reply.file, quads: reply.quads, bytes: reply.bytes });
    });
    worker.on('error', (err: Error) => fail(`the snapshot worker failed: ${err.message}`));
    worker.on('exit', (code) => fail(`the snapshot worker stopped (exit code ${code})`));
  });
}
