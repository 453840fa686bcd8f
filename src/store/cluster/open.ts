import { createHash } from 'node:crypto';
import oxigraph from 'oxigraph';
import pg from 'pg';
import { freeStore } from '../scratch.js';
import { ClusterStore, type ClusterOpenInfo, type ClusterStoreOptions, type ClusterStoreSettings } from './cluster-store.js';
import { PgLog, type Heads } from './log.js';

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
async function loadSnapshot(log: PgLog, warn: (message: string) => void): Promise<{ raw: oxigraph.Store; seq: number; heads: Heads }> {
  for (const { seq } of await log.snapshots()) {
    const snapshot = await log.snapshot(seq);
    if (!snapshot) continue;
    if (!createHash('sha256').update(snapshot.data).digest().equals(snapshot.sha256)) {
      warn(`snapshot ${seq} in PostgreSQL fails its checksum: refused, trying an older one`);
      continue;
    }
    const raw = new oxigraph.Store();
    try {
      raw.load(snapshot.data.toString('utf8'), { format: 'application/n-quads', no_transaction: true });
    } catch (err) {
      freeStore(raw);
      warn(`snapshot ${seq} in PostgreSQL does not load (${(err as Error).message}): trying an older one`);
      continue;
    }
    if (raw.size !== snapshot.quads) {
      warn(`snapshot ${seq} holds ${raw.size} quads where ${snapshot.quads} were stored: trying an older one`);
      freeStore(raw);
      continue;
    }
    return { raw, seq, heads: snapshot.heads };
  }
  return { raw: new oxigraph.Store(), seq: 0, heads: new Map() };
}

/**
 * Opens the cluster store on PostgreSQL at `url`: creates the tables when
 * missing, loads the newest sound snapshot, replays the records after it
 * (each checked against its checksum: a damaged one stops the start),
 * listens for other instances' appends. PostgreSQL out of reach stops the
 * start with a `ClusterStartError` naming the setting.
 */
export async function openClusterStore(url: string, options: ClusterStoreOptions): Promise<ClusterStore> {
  const opts: ClusterStoreSettings = { probeMs: 1000, onWarning: () => undefined, onInfo: () => undefined, ...options };
  const started = performance.now();
  const log = new PgLog(clusterPool(url));
  try {
    await log.ensureSchema();
  } catch (err) {
    await log.pool.end().catch(() => undefined);
    throw new ClusterStartError(url, err);
  }
  try {
    const { raw, seq: snapshotSeq, heads } = await loadSnapshot(log, opts.onWarning);
    const info: ClusterOpenInfo = { snapshotSeq, snapshotQuads: raw.size, recordsReplayed: 0, streams: 0, millis: 0 };
    const listen = async () => {
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
      client.on('error', () => undefined);
      await client.connect();
      return client;
    };
    const store = new ClusterStore(raw, log, listen, info, heads, 0, opts);
    info.recordsReplayed = await store.replay();
    info.streams = store.appliedHeads().size;
    info.millis = Math.round(performance.now() - started);
    await store.startListening();
    // Records appended between the replay and LISTEN.
    await store.catchUp();
    await store.startResidency();
    store.placement?.start();
    opts.onInfo(`cluster store opened: snapshot ${snapshotSeq} (${info.snapshotQuads} quads), ${info.recordsReplayed} writes replayed, ${info.streams} streams, ${info.millis} ms`);
    return store;
  } catch (err) {
    await log.pool.end().catch(() => undefined);
    throw new ClusterStartError(url, err);
  }
}
