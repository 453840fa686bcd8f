import { createHash } from 'node:crypto';
import oxigraph from 'oxigraph';
import pg from 'pg';
import { freeStore } from '../scratch.js';
import { ClusterStore, ServiceOnlyRefused, type ClusterOpenInfo, type ClusterStoreOptions, type ClusterStoreSettings } from './cluster-store.js';
import { PgLog, type Heads } from './log.js';
import { SERVICE_STREAM } from '../../rdf/graphs.js';

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
 * Residency: the service's part of the newest snapshot whose part checks
 * (its sha256 and quad count), loaded; undefined when that snapshot was
 * stored without parts (the whole snapshot is loaded then).
 */
async function loadServicePart(log: PgLog, warn: (message: string) => void): Promise<{ raw: oxigraph.Store; seq: number; heads: Heads } | undefined> {
  for (const { seq, heads } of await log.snapshots()) {
    if (!await log.snapshotHasParts(seq)) return undefined;
    const part = await log.snapshotPart(seq, SERVICE_STREAM);
    const raw = new oxigraph.Store();
    if (!part) return { raw, seq, heads };
    if (!createHash('sha256').update(part.data).digest().equals(part.sha256)) {
      warn(`the service's part of snapshot ${seq} in PostgreSQL fails its checksum: refused, trying an older one`);
      freeStore(raw);
      continue;
    }
    try {
      raw.load(part.data.toString('utf8'), { format: 'application/n-quads', no_transaction: true });
    } catch (err) {
      freeStore(raw);
      warn(`the service's part of snapshot ${seq} in PostgreSQL does not load (${(err as Error).message}): trying an older one`);
      continue;
    }
    if (raw.size !== part.quads) {
      warn(`the service's part of snapshot ${seq} holds ${raw.size} quads where ${part.quads} were stored: trying an older one`);
      freeStore(raw);
      continue;
    }
    return { raw, seq, heads };
  }
  return undefined;
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
    const listen = async () => {
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
      client.on('error', () => undefined);
      await client.connect();
      return client;
    };
    let store: ClusterStore | undefined;
    let info: ClusterOpenInfo | undefined;
    let part = '';
    // Residency: the service's part of the snapshot and the service's records only (docs/cluster.md, "Residency").
    const service = opts.residency ? await loadServicePart(log, opts.onWarning) : undefined;
    if (service) {
      info = { snapshotSeq: service.seq, snapshotQuads: service.raw.size, recordsReplayed: 0, streams: 0, millis: 0 };
      const candidate = new ClusterStore(service.raw, log, url, listen, info, service.heads, 0, opts);
      candidate.holdServiceOnly();
      try {
        info.recordsReplayed = await candidate.replay();
        candidate.setBytesSinceSnapshot(await log.bytesAfter(service.heads));
        store = candidate;
        part = ' (its service part)';
      } catch (err) {
        freeStore(service.raw);
        if (!(err instanceof ServiceOnlyRefused)) throw err;
        opts.onInfo('records after the snapshot change graphs of streams they are not in (the one-stream layout): the whole snapshot is loaded');
      }
    }
    if (!store) {
      const { raw, seq: snapshotSeq, heads } = await loadSnapshot(log, opts.onWarning);
      info = { snapshotSeq, snapshotQuads: raw.size, recordsReplayed: 0, streams: 0, millis: 0 };
      store = new ClusterStore(raw, log, url, listen, info, heads, 0, opts);
      info.recordsReplayed = await store.replay();
    }
    info = info!;
    const snapshotSeq = info.snapshotSeq;
    info.streams = store.appliedHeads().size;
    info.millis = Math.round(performance.now() - started);
    await store.startListening();
    // Records appended between the replay and LISTEN.
    await store.catchUp();
    await store.startResidency();
    store.placement?.start();
    opts.onInfo(`cluster store opened: snapshot ${snapshotSeq}${part} (${info.snapshotQuads} quads), ${info.recordsReplayed} writes replayed, ${info.streams} streams, ${info.millis} ms`);
    return store;
  } catch (err) {
    await log.pool.end().catch(() => undefined);
    throw new ClusterStartError(url, err);
  }
}
