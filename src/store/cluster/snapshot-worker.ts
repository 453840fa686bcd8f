import { parentPort, workerData } from 'node:worker_threads';
import pg from 'pg';
import { Graphs } from '../../rdf/graphs.js';
import { freeStore } from '../scratch.js';
import { giveWayToTheEventLoop } from '../../workers/priority.js';
import { PgLog } from './log.js';
import { ResidencyRetry, dumpByStream, materialize } from './residency.js';

/*
 * Builds and stores a snapshot of the cluster's journal off the event loop
 * (`snapshot-in-worker.ts`): every stream at the heads one statement reads,
 * rebuilt from the newest snapshot behind them and the records after it
 * (`materialize`), dumped by stream and stored in PostgreSQL with its
 * parts. The instance's replica is never read here, so its reads and
 * writes go on meanwhile, as the embedded store's snapshots do.
 */

/** What the main thread asks for. */
export interface ClusterSnapshotJob {
  /** WSM_POSTGRES_URL (with the schema the instance uses). */
  url: string;
  /** The service's base IRI: which graphs are a workspace's. */
  baseIri: string;
  /** The newest snapshot the instance knows of: nothing is stored unless the heads moved past it. */
  knownSeq: number;
}

export type ClusterSnapshotReply =
  | { ok: true; stored: false }
  | { ok: true; stored: true; seq: number; quads: number; streams: number; records: number; bytesAfter: number }
  | { ok: false; message: string };

const port = parentPort;
if (!port) throw new Error('the cluster snapshot worker must run in a worker thread');
giveWayToTheEventLoop();

async function run(job: ClusterSnapshotJob): Promise<ClusterSnapshotReply> {
  const pool = new pg.Pool({ connectionString: job.url, max: 2, connectionTimeoutMillis: 5000 });
  pool.on('error', () => undefined);
  const log = new PgLog(pool);
  const graphs = new Graphs(job.baseIri);
  try {
    for (let attempt = 1; ; attempt++) {
      const upto = await log.heads();
      const total = [...upto.values()].reduce((a, b) => a + b, 0);
      if (total <= job.knownSeq) return { ok: true, stored: false };
      let built;
      try {
        built = await materialize(log, graphs, new Set(upto.keys()), upto);
      } catch (err) {
        // Another instance's snapshot pruned the records this one started from.
        if (err instanceof ResidencyRetry && attempt < 3) continue;
        throw err;
      }
      let parts;
      try {
        parts = dumpByStream(built.store, graphs);
      } finally {
        freeStore(built.store);
      }
      const quads = [...parts.values()].reduce((n, part) => n + part.quads, 0);
      const seq = await log.putSnapshot(upto, quads, Buffer.concat([...parts.values()].map((part) => part.data)), parts);
      return { ok: true, stored: true, seq, quads, streams: upto.size, records: built.records, bytesAfter: await log.bytesAfter(upto) };
    }
  } finally {
    await pool.end().catch(() => undefined);
  }
}

run(workerData as ClusterSnapshotJob).then(
  (reply) => port.postMessage(reply),
  (err: unknown) => port.postMessage({ ok: false, message: err instanceof Error ? err.message : String(err) } satisfies ClusterSnapshotReply),
);
