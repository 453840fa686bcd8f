import { createHash } from 'node:crypto';
import pg from 'pg';
import { scanJournal, type JournalRecord } from '../journal.js';
import type { ArchiveFiles } from '../../registry/archives.js';

/*
 * The cluster's system of record in PostgreSQL (docs/cluster.md):
 *
 *   wsm_journal    (stream, seq) -> record: the file journal's record bytes
 *                  (length, checksum, seq, payload), one row per write;
 *                  the primary key makes an append at a taken seq fail
 *   wsm_snapshots  (stream, seq) -> the whole store after record seq, as
 *                  N-Quads, with its quad count and sha256
 *   wsm_archives   sha256 -> bytes: the hosted registry's archives
 *   wsm_shared     name -> value: what every instance must agree on (the
 *                  token issuer's key)
 *
 * An append notifies channel `wsm_journal` with `<stream>:<seq>` when it
 * commits.
 */

export const CHANNEL = 'wsm_journal';

/** The seq was taken by another instance's append: catch up and try again. */
export class HeadMovedError extends Error {
  constructor(readonly stream: string, readonly seq: number) {
    super(`record ${seq} of stream ${stream} was appended by another instance`);
    this.name = 'HeadMovedError';
  }
}

/** A record read back from PostgreSQL does not check: the log is damaged. */
export class LogCorruptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LogCorruptError';
  }
}

/**
 * An append's connection dropped and PostgreSQL could not be asked, within
 * the wait, whether its record committed: it may be in the history (every
 * replica then applies it) or not.
 */
export class CommitOutcomeUnknownError extends Error {
  constructor(readonly stream: string, readonly seq: number, waitedMs: number, cause: unknown) {
    super(`whether record ${seq} of stream ${stream} committed is unknown: its connection dropped (${cause instanceof Error ? cause.message : String(cause)}) and PostgreSQL did not answer within ${Math.round(waitedMs / 1000)} s`, { cause });
    this.name = 'CommitOutcomeUnknownError';
  }
}

/**
 * Whether a statement's error leaves its outcome unknown: the connection
 * failed (no answer from PostgreSQL), or PostgreSQL ended the session
 * (class 08, connection exception; 57P01-57P03, shut down or not yet up:
 * a backend waiting for its synchronous standby is ended that way after
 * its local commit) or answered from a standby (25006, read only: the
 * primary moved). Any other answer of PostgreSQL is the statement's own
 * failure: nothing was committed.
 */
export function outcomeUnknown(err: unknown): boolean {
  if (!(err instanceof pg.DatabaseError)) return true;
  const code = err.code ?? '';
  return code.startsWith('08') || ['57P01', '57P02', '57P03', '25006'].includes(code);
}

/** One snapshot as stored. */
export interface StoredSnapshot { seq: number; quads: number; data: Buffer; sha256: Buffer }

const SCHEMA = `
CREATE TABLE IF NOT EXISTS wsm_journal (
  stream text NOT NULL,
  seq bigint NOT NULL,
  record bytea NOT NULL,
  PRIMARY KEY (stream, seq)
);
CREATE TABLE IF NOT EXISTS wsm_snapshots (
  stream text NOT NULL,
  seq bigint NOT NULL,
  quads bigint NOT NULL,
  sha256 bytea NOT NULL,
  data bytea NOT NULL,
  PRIMARY KEY (stream, seq)
);
CREATE TABLE IF NOT EXISTS wsm_archives (
  sha256 text PRIMARY KEY,
  bytes bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS wsm_shared (
  name text PRIMARY KEY,
  value text NOT NULL
);`;

/** Any constant: instances creating the schema at the same moment take turns. */
const SCHEMA_LOCK = 0x77736d01;

/** Whether an error is PostgreSQL's answer to a statement (as opposed to a connection that failed). */
export function isServerError(err: unknown): boolean {
  return err instanceof pg.DatabaseError;
}

/** The record of `seq` checked against its checksum and its row's seq. */
export function decodeRecord(stream: string, seq: number, bytes: Buffer): JournalRecord {
  const scan = scanJournal(bytes);
  const record = scan.records[0];
  if (scan.problem || scan.records.length !== 1 || scan.validBytes !== bytes.length) {
    throw new LogCorruptError(`record ${seq} of stream ${stream} in PostgreSQL is refused: ${scan.problem ?? 'it does not hold exactly one record'}`);
  }
  if (record!.seq !== seq) throw new LogCorruptError(`record ${seq} of stream ${stream} in PostgreSQL names seq ${record!.seq}: refused`);
  return record!;
}

/** The hosted registry's archives, kept where every instance reads them. */
export class PgArchives implements ArchiveFiles {
  constructor(private readonly pool: pg.Pool) {}

  async put(sha: string, bytes: Buffer): Promise<void> {
    await this.pool.query('INSERT INTO wsm_archives (sha256, bytes) VALUES ($1, $2) ON CONFLICT DO NOTHING', [sha, bytes]);
  }

  async get(sha: string): Promise<Buffer | undefined> {
    const { rows } = await this.pool.query<{ bytes: Buffer }>('SELECT bytes FROM wsm_archives WHERE sha256 = $1', [sha]);
    return rows[0]?.bytes;
  }
}

export interface PgLogOptions {
  /** How long an append whose connection dropped keeps trying to learn whether it committed. */
  outcomeWaitMs: number;
  /** Milliseconds between two tries. */
  retryMs: number;
}

export class PgLog {
  private readonly options: PgLogOptions;

  constructor(readonly pool: pg.Pool, options: Partial<PgLogOptions> = {}) {
    this.options = { outcomeWaitMs: 60_000, retryMs: 500, ...options };
  }

  /** Creates the tables when missing (several instances may start at once). */
  async ensureSchema(): Promise<void> {
    await this.inTransaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK]);
      await client.query(SCHEMA);
    });
  }

  /** Runs `fn` in one transaction on one pooled connection: committed when it resolves, rolled back when it throws. */
  private async inTransaction(fn: (client: pg.PoolClient) => Promise<void>): Promise<void> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      await fn(client);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  /** The seq of the stream's last record (0 when it has none): one lookup on the primary key. */
  async head(stream: string): Promise<number> {
    const { rows } = await this.pool.query<{ seq: string | null }>({ name: 'wsm-head', text: 'SELECT max(seq) AS seq FROM wsm_journal WHERE stream = $1', values: [stream] });
    return Number(rows[0]?.seq ?? 0);
  }

  /**
   * Appends record `seq` of the stream and notifies the other instances, in
   * one statement (one transaction): committed, exactly once, when it
   * resolves. `HeadMovedError` when another instance took that seq first.
   *
   * A connection that drops while the statement runs (its COMMIT among it:
   * a PostgreSQL that died or failed over) leaves the outcome unknown. Then
   * the row at (stream, seq) is read on a new connection, tried every
   * `retryMs` for `outcomeWaitMs`: the same record bytes (so the same
   * checksum) → it committed; no row → appended again (the primary key is
   * the head check again); another record → `HeadMovedError`, as when
   * another instance took the seq. Past the wait, `CommitOutcomeUnknownError`.
   */
  async append(stream: string, seq: number, record: Buffer): Promise<void> {
    let uncertainSince: number | undefined;
    for (;;) {
      let client: pg.PoolClient;
      try {
        client = await this.pool.connect();
      } catch (err) {
        // Nothing was sent on this connection: a first attempt did not happen, a retry goes on waiting.
        if (uncertainSince === undefined) throw err;
        await this.waitForOutcome(stream, seq, uncertainSince, err);
        continue;
      }
      let dropped: unknown;
      // A connection that ends under a statement also emits 'error': the statement's own rejection is what counts.
      const ignore = () => undefined;
      client.on('error', ignore);
      try {
        if (uncertainSince !== undefined) {
          const { rows } = await client.query<{ record: Buffer }>({ name: 'wsm-record-at', text: 'SELECT record FROM wsm_journal WHERE stream = $1 AND seq = $2', values: [stream, seq] });
          if (rows[0]) {
            if (rows[0].record.equals(record)) return;
            throw new HeadMovedError(stream, seq);
          }
        }
        await client.query({
          name: 'wsm-append',
          text: `WITH appended AS (INSERT INTO wsm_journal (stream, seq, record) VALUES ($1, $2, $3) RETURNING seq)
                 SELECT pg_notify('${CHANNEL}', $1 || ':' || seq) FROM appended`,
          values: [stream, seq, record],
        });
        return;
      } catch (err) {
        if (err instanceof HeadMovedError) throw err;
        // Taken after an unknown outcome: maybe by this very record (its first try committed late); the row tells.
        if ((err as { code?: string }).code === '23505' && uncertainSince === undefined) throw new HeadMovedError(stream, seq);
        if ((err as { code?: string }).code !== '23505') {
          if (!outcomeUnknown(err)) throw err;
          dropped = err;
          uncertainSince ??= Date.now();
        }
      } finally {
        client.off('error', ignore);
        // A connection that failed is closed, not pooled.
        client.release(dropped !== undefined);
      }
      if (dropped !== undefined) await this.waitForOutcome(stream, seq, uncertainSince!, dropped);
    }
  }

  /** Waits `retryMs` before the next look at an append's outcome; `CommitOutcomeUnknownError` once `outcomeWaitMs` passed. */
  private async waitForOutcome(stream: string, seq: number, since: number, cause: unknown): Promise<void> {
    if (Date.now() - since >= this.options.outcomeWaitMs) throw new CommitOutcomeUnknownError(stream, seq, this.options.outcomeWaitMs, cause);
    await new Promise((resolve) => setTimeout(resolve, this.options.retryMs));
  }

  /** The records after `afterSeq`, at most `limit`, in order, each checked (`decodeRecord`). */
  async recordsAfter(stream: string, afterSeq: number, limit: number): Promise<Array<JournalRecord & { bytes: number }>> {
    const { rows } = await this.pool.query<{ seq: string; record: Buffer }>({
      name: 'wsm-records-after',
      text: 'SELECT seq, record FROM wsm_journal WHERE stream = $1 AND seq > $2 ORDER BY seq LIMIT $3',
      values: [stream, afterSeq, limit],
    });
    let expected = afterSeq + 1;
    return rows.map((row) => {
      const seq = Number(row.seq);
      if (seq !== expected) throw new LogCorruptError(`stream ${stream} in PostgreSQL lacks record ${expected} (the next one is ${seq}): refusing an incomplete history`);
      expected++;
      return { ...decodeRecord(stream, seq, row.record), bytes: row.record.length };
    });
  }

  /** The seqs of the stream's snapshots, newest first. */
  async snapshotSeqs(stream: string): Promise<number[]> {
    const { rows } = await this.pool.query<{ seq: string }>('SELECT seq FROM wsm_snapshots WHERE stream = $1 ORDER BY seq DESC', [stream]);
    return rows.map((r) => Number(r.seq));
  }

  async snapshot(stream: string, seq: number): Promise<StoredSnapshot | undefined> {
    const { rows } = await this.pool.query<{ seq: string; quads: string; data: Buffer; sha256: Buffer }>(
      'SELECT seq, quads, data, sha256 FROM wsm_snapshots WHERE stream = $1 AND seq = $2', [stream, seq]);
    const row = rows[0];
    return row ? { seq: Number(row.seq), quads: Number(row.quads), data: row.data, sha256: row.sha256 } : undefined;
  }

  /**
   * Stores a snapshot (kept as it is when another instance stored that seq
   * first), then drops every snapshot but the two newest and the records
   * the older of those holds.
   */
  async putSnapshot(stream: string, seq: number, quads: number, data: Buffer): Promise<void> {
    const sha256 = createHash('sha256').update(data).digest();
    await this.inTransaction(async (client) => {
      await client.query('INSERT INTO wsm_snapshots (stream, seq, quads, sha256, data) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING', [stream, seq, quads, sha256, data]);
      const { rows } = await client.query<{ seq: string }>('SELECT seq FROM wsm_snapshots WHERE stream = $1 ORDER BY seq DESC LIMIT 2', [stream]);
      const older = rows.length === 2 ? Number(rows[1]!.seq) : undefined;
      if (older !== undefined) {
        await client.query('DELETE FROM wsm_snapshots WHERE stream = $1 AND seq < $2', [stream, older]);
        // The head's record stays whatever happens: it is where appends are checked.
        await client.query('DELETE FROM wsm_journal WHERE stream = $1 AND seq <= $2 AND seq < (SELECT max(seq) FROM wsm_journal WHERE stream = $1)', [stream, older]);
      }
    });
  }

  /** Bytes of the records after `afterSeq` (how much a new instance replays after the snapshot). */
  async bytesAfter(stream: string, afterSeq: number): Promise<number> {
    const { rows } = await this.pool.query<{ bytes: string | null }>('SELECT sum(octet_length(record)) AS bytes FROM wsm_journal WHERE stream = $1 AND seq > $2', [stream, afterSeq]);
    return Number(rows[0]?.bytes ?? 0);
  }

  /** The shared value of `name`: `proposed` when none was stored yet, else the one stored first (by any instance). */
  async shared(name: string, proposed: string): Promise<string> {
    await this.pool.query('INSERT INTO wsm_shared (name, value) VALUES ($1, $2) ON CONFLICT DO NOTHING', [name, proposed]);
    const { rows } = await this.pool.query<{ value: string }>('SELECT value FROM wsm_shared WHERE name = $1', [name]);
    return rows[0]!.value;
  }

  /** The shared value of `name`, if any. */
  async sharedValue(name: string): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ value: string }>('SELECT value FROM wsm_shared WHERE name = $1', [name]);
    return rows[0]?.value;
  }
}
