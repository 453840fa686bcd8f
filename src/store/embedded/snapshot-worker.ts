import { parentPort, workerData } from 'node:worker_threads';
import oxigraph from 'oxigraph';
import { readJournalRecords, type JournalReadOp } from '../journal-records.js';
import { coalesceUpdates, conditionHolds } from './oxigraph-store.js';
import { RecordReplayer } from './replay.js';
import { loadSnapshot, writeSnapshot } from './snapshot.js';
import type { StoredOp } from '../store.js';
import { giveWayToTheEventLoop } from '../../workers/priority.js';

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
  /**
   * The records after `from` through `seq` the live store did not apply (a
   * condition that did not hold), when it knows them all: every other
   * record's condition held there, so it is applied without asking it again,
   * and records of updates only are joined into fewer engine calls. Absent:
   * each condition is asked, as a restart asks it.
   */
  skipped?: readonly number[];
}

export type SnapshotJobReply = { ok: true; file: string; quads: number; bytes: number } | { ok: false; message: string };

const port = parentPort;
if (!port) throw new Error('the snapshot worker must run in a worker thread');
giveWayToTheEventLoop();

type ReplayOp = Exclude<JournalReadOp, { kind: 'condition' }>;
type ReplayRecord = { seq: number; file: string; writes: ReplayOp[] };

async function run(job: SnapshotJob): Promise<SnapshotJobReply> {
  const raw = job.from ? loadSnapshot(job.from.file, job.from.seq) : new oxigraph.Store();
  const skipped = job.skipped ? new Set(job.skipped) : null;
  const replayer = new RecordReplayer<ReplayRecord>(raw, (r) => applyWrites(raw, r));
  for (const { seq, file, ops } of readJournalRecords(job.dir, job.from?.seq ?? 0, job.seq, { skip: skipped ?? [] })) {
    const condition = ops[0]?.kind === 'condition' ? ops[0] : null;
    const writes = ops.filter((op): op is ReplayOp => op.kind !== 'condition');
    const record = { seq, file, writes };
    // Known to have applied (or without a condition): held to be joined with the records after it.
    if ((skipped || !condition) && replayer.hold(record, writes as unknown as StoredOp[])) continue;
    replayer.flush();
    if (!skipped && condition && !conditionHolds(raw, condition)) continue;
    applyWrites(raw, record);
  }
  replayer.flush();
  if (raw.size !== job.expectedQuads) {
    throw new Error(`the store rebuilt from the snapshot and journal holds ${raw.size} quads, the live store held ${job.expectedQuads} at record ${job.seq}`);
  }
  const written = await writeSnapshot(job.dir, job.seq, raw);
  return { ok: true, ...written };
}

/** A record's writes, applied as `replayRecord` in durable.ts applies them: updates run together, a load's text is read in pieces. */
function applyWrites(raw: oxigraph.Store, { seq, file, writes }: ReplayRecord): void {
  for (const op of coalesceUpdates(writes as unknown as StoredOp[]) as unknown as ReplayOp[]) {
    try {
      if (op.kind === 'update') raw.update(op.sparql);
      else raw.load(op.text(), { format: op.format, to_graph_name: oxigraph.namedNode(op.graph) });
    } catch (err) {
      throw new Error(`journal ${file}: record ${seq} does not replay: ${(err as Error).message}`, { cause: err });
    }
  }
}

run(workerData as SnapshotJob).then(
  (reply) => port.postMessage(reply),
  (err: Error) => port.postMessage({ ok: false, message: err.message } satisfies SnapshotJobReply),
);
