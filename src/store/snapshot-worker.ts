import { parentPort, workerData } from 'node:worker_threads';
import oxigraph from 'oxigraph';
import { journalPayloads, loadText, payloadOps, type PayloadOp } from './journal-records.js';
import { coalesceUpdates, conditionHolds } from './oxigraph-store.js';
import { loadSnapshot, writeSnapshot } from './snapshot.js';
import type { StoredOp } from './store.js';
import { giveWayToTheEventLoop } from '../workers/priority.js';

/*
 * Writes a snapshot off the event loop (`snapshot-in-worker.ts`): rebuilds
 * the store as it was at record `seq` from the files alone (the previous
 * snapshot, then the journal records after it, replayed exactly as a
 * restart replays them), checks that it holds as many quads as the live
 * store held at that record, and writes it as the snapshot of `seq`. The
 * service's store is never read here, so writes go on meanwhile.
 */

/** What the main thread asks for. */
export interface SnapshotJob {
  dir: string;
  /** The snapshot to start from (null: an empty store, the journal from record 1). */
  from: { file: string; seq: number } | null;
  seq: number;
  /** Quads the live store held at `seq`. */
  expectedQuads: number;
}

export type SnapshotJobReply = { ok: true; file: string; quads: number; bytes: number } | { ok: false; message: string };

const port = parentPort;
if (!port) throw new Error('the snapshot worker must run in a worker thread');
giveWayToTheEventLoop();

type ReplayOp = Exclude<PayloadOp, { kind: 'condition' }>;

async function run(job: SnapshotJob): Promise<SnapshotJobReply> {
  const raw = job.from ? loadSnapshot(job.from.file, job.from.seq) : new oxigraph.Store();
  for (const { seq, payload, file } of journalPayloads(job.dir, job.from?.seq ?? 0, job.seq)) {
    const ops = payloadOps(payload, file, seq);
    const condition = ops[0]?.kind === 'condition' ? ops[0] : null;
    if (condition && !conditionHolds(raw, condition)) continue;
    const writes = ops.filter((op): op is ReplayOp => op.kind !== 'condition');
    // As `replayRecord` in durable.ts: updates run together, a load's text is read in pieces.
    for (const op of coalesceUpdates(writes as unknown as StoredOp[]) as unknown as ReplayOp[]) {
      try {
        if (op.kind === 'update') raw.update(op.sparql);
        else raw.load(loadText(payload, op.data), { format: op.format, to_graph_name: oxigraph.namedNode(op.graph) });
      } catch (err) {
        throw new Error(`journal ${file}: record ${seq} does not replay: ${(err as Error).message}`, { cause: err });
      }
    }
  }
  if (raw.size !== job.expectedQuads) {
    throw new Error(`the store rebuilt from the snapshot and journal holds ${raw.size} quads, the live store held ${job.expectedQuads} at record ${job.seq}`);
  }
  const written = await writeSnapshot(job.dir, job.seq, raw);
  return { ok: true, ...written };
}

run(workerData as SnapshotJob).then(
  (reply) => port.postMessage(reply),
  (err: Error) => port.postMessage({ ok: false, message: err.message } satisfies SnapshotJobReply),
);
