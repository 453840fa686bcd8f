import { createHash } from 'node:crypto';
import oxigraph from 'oxigraph';
import pg from 'pg';
import { freeStore } from '../scratch.js';
import { ClusterStore, SERVICE_STREAM, replayOnto, type ClusterOpenInfo, type ClusterStoreOptions } from './cluster-store.js';
import { PgLog } from './log.js';

/** The URL as logs may show it: no password. */
export function redactedUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(not a URL)';
  }
}

/** PostgreSQL could not be reached, or refused the service, at start. */
export class ClusterStartError extends Error {
  constructor(url: string, cause: unknown) {
    super(`cannot use PostgreSQL at WSM_POSTGRES_URL=${redactedUrl(url)}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'ClusterStartError';
  }
}

/** The pool every query of an instance shares; connections that cannot be made in a few seconds fail. */
export function clusterPool(url: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 10, connectionTimeoutMillis: 5000, idleTimeoutMillis: 30_000 });
  // A connection dropped while idle (PostgreSQL restarted): the next query takes another one.
  pool.on('error', () => undefined);
  return pool;
}

/** The newest snapshot that checks (its sha256 and quad count), loaded; older ones when a newer does not check. */
async function loadSnapshot(log: PgLog, stream: string, warn: (message: string) => void): Promise<{ raw: oxigraph.Store; seq: number }> {
  for (const seq of await log.snapshotSeqs(stream)) {
    const snapshot = await log.snapshot(stream, seq);
    if (!snapshot) continue;
    if (!createHash('sha256').update(snapshot.data).digest().equals(snapshot.sha256)) {
      warn(`snapshot ${seq} of stream ${stream} in PostgreSQL fails its checksum: refused, trying an older one`);
      continue;
    }
    const raw = new oxigraph.Store();
    try {
      raw.load(snapshot.data.toString('utf8'), { format: 'application/n-quads', no_transaction: true });
    } catch (err) {
      freeStore(raw);
      warn(`snapshot ${seq} of stream ${stream} in PostgreSQL does not load (${(err as Error).message}): trying an older one`);
      continue;
    }
    if (raw.size !== snapshot.quads) {
      warn(`snapshot ${seq} of stream ${stream} holds ${raw.size} quads where ${snapshot.quads} were stored: trying an older one`);
      freeStore(raw);
      continue;
    }
    return { raw, seq };
  }
  return { raw: new oxigraph.Store(), seq: 0 };
}

/**
 * Opens the cluster store on PostgreSQL at `url`: creates the tables when
 * missing, loads the newest sound snapshot, replays the records after it
 * (each checked against its checksum: a damaged one stops the start),
 * listens for other instances' appends. PostgreSQL out of reach stops the
 * start with a `ClusterStartError` naming the setting.
 */
export async function openClusterStore(url: string, options: ClusterStoreOptions): Promise<ClusterStore> {
  const opts: Required<ClusterStoreOptions> = { probeMs: 1000, onWarning: () => undefined, onInfo: () => undefined, ...options };
  const started = performance.now();
  const log = new PgLog(clusterPool(url));
  try {
    await log.ensureSchema();
  } catch (err) {
    await log.pool.end().catch(() => undefined);
    throw new ClusterStartError(url, err);
  }
  try {
    const stream = SERVICE_STREAM;
    const { raw, seq: snapshotSeq } = await loadSnapshot(log, stream, opts.onWarning);
    const info: ClusterOpenInfo = { snapshotSeq, snapshotQuads: raw.size, recordsReplayed: 0, lastSeq: snapshotSeq, millis: 0 };
    let bytesAfter = 0;
    for (;;) {
      const records = await log.recordsAfter(stream, info.lastSeq, 1024);
      for (const record of records) {
        replayOnto(raw, record);
        info.lastSeq = record.seq;
        info.recordsReplayed++;
        bytesAfter += record.bytes;
      }
      if (records.length < 1024) break;
    }
    info.millis = Math.round(performance.now() - started);
    const listen = async () => {
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
      client.on('error', () => undefined);
      await client.connect();
      return client;
    };
    const store = new ClusterStore(raw, log, listen, info, bytesAfter, opts, stream);
    await store.startListening();
    // Records appended between the replay and LISTEN.
    await store.catchUp();
    opts.onInfo(`cluster store opened: snapshot seq ${snapshotSeq} (${info.snapshotQuads} quads), ${info.recordsReplayed} records replayed, last seq ${store.lastSeq}, ${info.millis} ms`);
    return store;
  } catch (err) {
    await log.pool.end().catch(() => undefined);
    throw new ClusterStartError(url, err);
  }
}
