import { createHash } from 'node:crypto';
import pg from 'pg';
import { scanJournal, type JournalRecord } from '../journal.js';
import type { ArchiveFiles } from '../../registry/archives.js';

/*
 * The cluster's system of record in PostgreSQL (docs/cluster.md, "Tables"):
 *
 *   wsm_journal    (stream, seq) -> record, gseq: the file journal's record
 *                  bytes (length, checksum, seq, payload), one row per write
 *                  and stream it changes; the rows of one write share its
 *                  gseq (taken from the sequence wsm_order once the write
 *                  holds its heads), the order replicas apply writes in
 *   wsm_heads      stream -> seq of its last record: what an append checks
 *                  and moves, in one transaction, for every stream the write
 *                  changes or reads
 *   wsm_snapshots  ('replica', n) -> the whole replica as N-Quads, with its
 *                  quad count, sha256 and the seq of each stream it holds
 *                  (`heads`); n is the sum of those seqs. (<stream>, n):
 *                  the same snapshot's graphs of one stream (residency)
 *   wsm_archives   sha256 -> bytes: the hosted registry's archives
 *   wsm_shared     name -> value: what every instance must agree on (the
 *                  token issuer's key, the journal's layout)
 *   wsm_owners     stream -> the instance holding its lease (placement,
 *                  WSM_CLUSTER_PLACEMENT=lease): its id, the lease's epoch
 *                  (one more at each change of holder), the URL it takes
 *                  forwarded requests at, and when the lease ends by
 *                  PostgreSQL's clock
 *
 * An append notifies channel `wsm_journal` with `<stream>:<seq>` for each
 * stream it changes, when it commits.
 */

export const CHANNEL = 'wsm_journal';

/** A head the write was checked against moved (another instance appended there): catch up and try again. */
export class HeadMovedError extends Error {
  constructor(readonly stream: string) {
    super(`stream ${stream} was appended to by another instance`);
    this.name = 'HeadMovedError';
  }
}

/**
 * Placement: an append to a workspace's stream carried a lease (instance,
 * epoch) that no longer holds: another instance took the stream over, or
 * the lease ended. Nothing was appended.
 */
export class LeaseLostError extends Error {
  constructor(readonly stream: string) {
    super(`this instance's lease on stream ${stream} was taken over or ended: the append was refused`);
    this.name = 'LeaseLostError';
  }
}

/** An append refused by the log itself (a head moved, a lease lost): nothing was appended, the connection is sound. */
function refused(err: unknown): boolean {
  return err instanceof HeadMovedError || err instanceof LeaseLostError;
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

/** No connection could be had for a statement: nothing was sent. */
class NotSentError extends Error {
  constructor(override readonly cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.name = 'NotSentError';
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

/** The tables were written by a layout this version does not know. */
export class LogLayoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LogLayoutError';
  }
}

/** Seq of each stream: heads in PostgreSQL, what a replica or a snapshot holds. */
export type Heads = Map<string, number>;

/** One snapshot as listed: its number (the sum of its heads) and the seq of each stream it holds. */
export interface SnapshotEntry { seq: number; heads: Heads }

/** The graphs of one stream in a snapshot, as N-Quads. */
export interface SnapshotPart { quads: number; data: Buffer }

/** One snapshot as stored. */
export interface StoredSnapshot extends SnapshotEntry { quads: number; data: Buffer; sha256: Buffer }

/** One row of the journal as read back, checked. */
/** A record as read from the log; `raw`, its bytes, where read by `recordsBetween`. */
export type StoredRecord = JournalRecord & { stream: string; gseq: number; bytes: number; raw?: Buffer };

/** One row an append writes. */
export interface Append { stream: string; seq: number; record: Buffer }

/**
 * The leases an append is made under (placement): the instance and, for
 * each workspace stream the write changes, the epoch of its lease there.
 * The append is refused (`LeaseLostError`) unless, in its transaction,
 * each of those leases still names this instance at that epoch and has
 * not ended.
 */
export interface Fence { instance: string; epochs: ReadonlyMap<string, number> }

/** The holder of a stream's lease, as `wsm_owners` says now. */
export interface Owner { instance: string; epoch: number; url: string | null; live: boolean }

/** The key of the snapshots of the whole replica in `wsm_snapshots.stream`. */
export const REPLICA_SNAPSHOT = 'replica';

/**
 * The journal's layout: 1 was one stream (`service`) whose head was its
 * last row; 2 keeps a stream per workspace, the heads in `wsm_heads`, the
 * order of writes across streams in `gseq`. Kept in `wsm_shared` as
 * `journal-layout`.
 */
export const LAYOUT = 2;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS wsm_journal (
  stream text NOT NULL,
  seq bigint NOT NULL,
  record bytea NOT NULL,
  PRIMARY KEY (stream, seq)
);
ALTER TABLE wsm_journal ADD COLUMN IF NOT EXISTS gseq bigint;
CREATE INDEX IF NOT EXISTS wsm_journal_gseq ON wsm_journal (gseq);
CREATE SEQUENCE IF NOT EXISTS wsm_order;
CREATE TABLE IF NOT EXISTS wsm_heads (
  stream text PRIMARY KEY,
  seq bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS wsm_snapshots (
  stream text NOT NULL,
  seq bigint NOT NULL,
  quads bigint NOT NULL,
  sha256 bytea NOT NULL,
  data bytea NOT NULL,
  PRIMARY KEY (stream, seq)
);
ALTER TABLE wsm_snapshots ADD COLUMN IF NOT EXISTS heads jsonb;
CREATE TABLE IF NOT EXISTS wsm_archives (
  sha256 text PRIMARY KEY,
  bytes bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS wsm_shared (
  name text PRIMARY KEY,
  value text NOT NULL
);
CREATE TABLE IF NOT EXISTS wsm_owners (
  stream text PRIMARY KEY,
  instance text NOT NULL,
  epoch bigint NOT NULL,
  url text,
  expires_at timestamptz NOT NULL
);`;

/**
 * From layout 1 (one stream, no gseq, no heads table): the records keep
 * their stream and seq and take their seq as gseq (one stream: its order
 * is the order), each stream's head is its last row, a snapshot holds its
 * stream up to its seq. Then gseq and heads may not be left out, so an
 * instance of the older version still running cannot append or store a
 * snapshot (its writes fail, 503) rather than write rows no replica orders.
 */
const UPGRADE_FROM_1 = `
UPDATE wsm_journal SET gseq = seq WHERE gseq IS NULL;
SELECT setval('wsm_order', greatest((SELECT max(gseq) FROM wsm_journal), 1));
INSERT INTO wsm_heads (stream, seq) SELECT stream, max(seq) FROM wsm_journal GROUP BY stream ON CONFLICT DO NOTHING;
UPDATE wsm_snapshots SET heads = jsonb_build_object(stream, seq), stream = '${REPLICA_SNAPSHOT}' WHERE heads IS NULL;`;

/**
 * Records and snapshots compressed with lz4 rather than PostgreSQL's default
 * pglz, where the server has it (PostgreSQL 14 on, built with lz4, as
 * Debian's is): a 10 MB install record was inserted in 212-369 ms against
 * 313-593 ms, and read back faster, for a sixth more bytes stored. Values
 * stored before keep their compression. Elsewhere nothing changes.
 */
const COMPRESSION = `
DO $$
BEGIN
  IF (SELECT attcompression FROM pg_attribute WHERE attrelid = 'wsm_journal'::regclass AND attname = 'record') <> 'l' THEN
    ALTER TABLE wsm_journal ALTER COLUMN record SET COMPRESSION lz4;
    ALTER TABLE wsm_snapshots ALTER COLUMN data SET COMPRESSION lz4;
  END IF;
EXCEPTION WHEN OTHERS THEN NULL;
END $$;`;

/** Rows every append and snapshot of this layout fills. */
const REQUIRED = `
ALTER TABLE wsm_journal ALTER COLUMN gseq SET NOT NULL;
ALTER TABLE wsm_snapshots ALTER COLUMN heads SET NOT NULL;`;

/** Any constant: instances creating the schema at the same moment take turns. */
const SCHEMA_LOCK = 0x77736d01;

/** PostgreSQL's codes for a transaction that lost a race: unique key taken, deadlock, serialization failure. */
const RACE_CODES = new Set(['23505', '40P01', '40001']);

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

const headsOf = (json: Record<string, string | number>): Heads => new Map(Object.entries(json).map(([k, v]) => [k, Number(v)]));
const jsonOf = (heads: Heads): string => JSON.stringify(Object.fromEntries(heads));

export class PgLog {
  private readonly options: PgLogOptions;

  constructor(readonly pool: pg.Pool, options: Partial<PgLogOptions> = {}) {
    this.options = { outcomeWaitMs: 60_000, retryMs: 500, ...options };
  }

  /**
   * Creates the tables when missing (several instances may start at once)
   * and brings a database of the one-stream layout to this one; refuses
   * one written by a later layout.
   */
  async ensureSchema(): Promise<void> {
    await this.inTransaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [SCHEMA_LOCK]);
      // Tables without a layout were written by the one-stream version; no tables: a new database.
      const { rows: known } = await client.query<{ journal: boolean; shared: boolean }>("SELECT to_regclass('wsm_journal') IS NOT NULL AS journal, to_regclass('wsm_shared') IS NOT NULL AS shared");
      const fresh = !known[0]!.journal;
      const stored = known[0]!.shared ? (await client.query<{ value: string }>("SELECT value FROM wsm_shared WHERE name = 'journal-layout'")).rows[0]?.value : undefined;
      const layout = stored !== undefined ? Number(stored) : fresh ? LAYOUT : 1;
      if (layout > LAYOUT) {
        throw new LogLayoutError(`the journal in PostgreSQL has layout ${layout}, written by a later version of the service; this one knows layout ${LAYOUT}: run the later version`);
      }
      await client.query(SCHEMA);
      await client.query(COMPRESSION);
      if (layout < LAYOUT) await client.query(UPGRADE_FROM_1);
      if (layout < LAYOUT || fresh) await client.query(REQUIRED);
      await client.query("INSERT INTO wsm_shared (name, value) VALUES ('journal-layout', $1) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value", [String(LAYOUT)]);
    });
  }

  /** Runs `fn` in one transaction on one pooled connection: committed when it resolves, rolled back when it throws. */
  private async inTransaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return this.withClient(async (client) => {
      try {
        await client.query('BEGIN');
        const result = await fn(client);
        await client.query('COMMIT');
        return result;
      } catch (err) {
        if (!outcomeUnknown(err) || refused(err)) await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      }
    });
  }

  /**
   * Runs `fn` on one pooled connection. A connection that could not be
   * had fails with `NotSentError` (nothing was sent); one that failed under
   * `fn` is closed, not pooled again.
   */
  private async withClient<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw new NotSentError(err);
    }
    // A connection that ends under a statement also emits 'error': the statement's own rejection is what counts.
    const ignore = () => undefined;
    client.on('error', ignore);
    let failed = false;
    try {
      return await fn(client);
    } catch (err) {
      failed = !refused(err) && outcomeUnknown(err);
      throw err;
    } finally {
      client.off('error', ignore);
      client.release(failed);
    }
  }

  /** The sum of every stream's head: it grows whenever any stream does (heads only grow), so one number says whether a replica is behind. */
  async headsTotal(): Promise<number> {
    const { rows } = await this.pool.query<{ total: string }>({ name: 'wsm-heads-total', text: 'SELECT coalesce(sum(seq), 0) AS total FROM wsm_heads' });
    return Number(rows[0]!.total);
  }

  /** Every stream's head, as one statement sees them (one snapshot of the database). */
  async heads(): Promise<Heads> {
    const { rows } = await this.pool.query<{ stream: string; seq: string }>({ name: 'wsm-heads', text: 'SELECT stream, seq FROM wsm_heads' });
    return new Map(rows.map((r) => [r.stream, Number(r.seq)]));
  }

  /**
   * Appends one write: a row per stream it changes (`rows`, each at its
   * stream's head + 1), in one transaction that first holds the head of
   * every stream the write changes or read (`expected`, in the order of
   * their names, so two appends never wait on each other in a cycle) and
   * fails with `HeadMovedError` when any of them is not the seq expected.
   * With `all`, every stream's head is held and checked (a write whose
   * reads could not be resolved to graphs). Notifies the other instances.
   * Committed when it resolves; answers the write's gseq.
   *
   * A connection that drops while the append runs (its COMMIT among it: a
   * PostgreSQL that died or failed over) leaves the outcome unknown. The
   * rows of one write commit together, so its first row tells: the row at
   * that (stream, seq) is read on a new connection, tried every `retryMs`
   * for `outcomeWaitMs`. The same record bytes (so the same checksum): it
   * committed. No row: appended again (the heads are checked again).
   * Another record: `HeadMovedError`, as when another instance took the
   * seq. Past the wait, `CommitOutcomeUnknownError`.
   */
  async append(rows: readonly Append[], expected: Heads, all: boolean, fence?: Fence): Promise<number> {
    const first = rows[0];
    if (!first) return this.appendOnce(rows, expected, all, fence);
    return this.retryingOutcome(first, () => this.appendOnce(rows, expected, all, fence));
  }

  /**
   * Runs `once` (an append whose first row is `first`) and, when its
   * connection dropped while it ran, settles its outcome by that row: the
   * same bytes there, committed; no row, tried again; another record, a
   * head conflict; no answer within `outcomeWaitMs`,
   * `CommitOutcomeUnknownError`.
   */
  private async retryingOutcome(first: Append, once: () => Promise<number>): Promise<number> {
    let uncertainSince: number | undefined;
    for (;;) {
      if (uncertainSince !== undefined) {
        let found: { record: Buffer; gseq: number } | undefined;
        try {
          found = await this.recordAt(first.stream, first.seq);
        } catch (err) {
          if (!outcomeUnknown(err)) throw err;
          await this.waitForOutcome(first, uncertainSince, err);
          continue;
        }
        if (found) {
          if (found.record.equals(first.record)) return found.gseq;
          throw new HeadMovedError(first.stream);
        }
      }
      try {
        return await once();
      } catch (err) {
        if (err instanceof NotSentError) {
          // Nothing was sent: a first try did not happen; after an unknown outcome, the wait goes on.
          if (uncertainSince === undefined) throw err.cause;
          await this.waitForOutcome(first, uncertainSince, err.cause);
          continue;
        }
        if (refused(err) || err instanceof LogCorruptError || !outcomeUnknown(err)) throw err;
        uncertainSince ??= Date.now();
        await this.waitForOutcome(first, uncertainSince, err);
      }
    }
  }

  /**
   * Several writes to one stream, each a record of its own (its own gseq,
   * in order), appended in one statement at `at + 1`, `at + 2`, ... once
   * the head is `at`: one round trip and one commit for them all. The
   * outcome of a statement whose connection dropped is settled as
   * `append`'s, by the first row (the rows commit together).
   */
  async appendMany(stream: string, at: number, records: readonly Buffer[]): Promise<void> {
    if (records.length === 1) {
      await this.append([{ stream, seq: at + 1, record: records[0]! }], new Map([[stream, at]]), false);
      return;
    }
    await this.retryingOutcome({ stream, seq: at + 1, record: records[0]! }, async () => {
      const { rows } = await this.withClient((client) => client.query<{ seq: string }>({
        name: 'wsm-append-many',
        text: `WITH head AS (
                 INSERT INTO wsm_heads (stream, seq) VALUES ($1, $2::bigint + cardinality($3::bytea[])) ON CONFLICT (stream) DO UPDATE SET seq = EXCLUDED.seq WHERE wsm_heads.seq = $2
                 RETURNING stream
               ), appended AS (
                 INSERT INTO wsm_journal (stream, seq, gseq, record)
                 SELECT head.stream, $2::bigint + r.i, nextval('wsm_order'), r.record FROM head, unnest($3::bytea[]) WITH ORDINALITY AS r(record, i) ORDER BY r.i
                 RETURNING stream, seq
               )
               SELECT seq, pg_notify('${CHANNEL}', stream || ':' || seq) FROM appended`,
        values: [stream, at, records],
      })).catch((err: unknown) => {
        if (RACE_CODES.has((err as { code?: string }).code ?? '')) throw new HeadMovedError(stream);
        throw err;
      });
      if (rows.length !== records.length) throw new HeadMovedError(stream);
      return 0;
    });
  }

  /** The record at (stream, seq) and its write's gseq, if any. */
  private async recordAt(stream: string, seq: number): Promise<{ record: Buffer; gseq: number } | undefined> {
    const { rows } = await this.pool.query<{ record: Buffer; gseq: string }>({
      name: 'wsm-record-at', text: 'SELECT record, gseq FROM wsm_journal WHERE stream = $1 AND seq = $2', values: [stream, seq],
    });
    return rows[0] ? { record: rows[0].record, gseq: Number(rows[0].gseq) } : undefined;
  }

  /** Waits `retryMs` before the next look at an append's outcome; `CommitOutcomeUnknownError` once `outcomeWaitMs` passed. */
  private async waitForOutcome(row: Append, since: number, cause: unknown): Promise<void> {
    if (Date.now() - since >= this.options.outcomeWaitMs) throw new CommitOutcomeUnknownError(row.stream, row.seq, this.options.outcomeWaitMs, cause);
    await new Promise((resolve) => setTimeout(resolve, this.options.retryMs));
  }

  /** One try of `append`. */
  private async appendOnce(rows: readonly Append[], expected: Heads, all: boolean, fence?: Fence): Promise<number> {
    const writes = new Map(rows.map((r) => [r.stream, r]));
    const only = rows.length === 1 && !all && expected.size === 1 ? rows[0]! : undefined;
    const fenced = fence && fence.epochs.size > 0 ? fence : undefined;
    try {
      if (only && expected.has(only.stream) && (!fenced || (fenced.epochs.size === 1 && fenced.epochs.has(only.stream)))) {
        return await this.appendToOne(only, expected.get(only.stream)!, fenced);
      }
      return await this.inTransaction(async (client) => {
        // Each lease held (FOR SHARE: a takeover waits for this append to commit), in the order of the streams' ids.
        for (const [stream, epoch] of [...fenced?.epochs ?? []].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
          const { rows: held } = await client.query({
            name: 'wsm-hold-lease',
            text: 'SELECT 1 FROM wsm_owners WHERE stream = $1 AND instance = $2 AND epoch = $3 AND expires_at > now() FOR SHARE',
            values: [stream, fenced!.instance, epoch],
          });
          if (held.length === 0) throw new LeaseLostError(stream);
        }
        if (all) {
          const { rows: current } = await client.query<{ stream: string; seq: string }>('SELECT stream, seq FROM wsm_heads ORDER BY stream FOR SHARE');
          for (const row of current) if (Number(row.seq) !== (expected.get(row.stream) ?? 0)) throw new HeadMovedError(row.stream);
        }
        for (const stream of [...new Set([...expected.keys(), ...writes.keys()])].sort()) {
          const at = expected.get(stream) ?? 0;
          const write = writes.get(stream);
          if (write) {
            // A stream's first write creates its head; later ones move it only from the seq the write was checked at.
            const { rowCount } = await client.query({
              name: 'wsm-move-head',
              text: `INSERT INTO wsm_heads (stream, seq) VALUES ($1, $2) ON CONFLICT (stream) DO UPDATE SET seq = EXCLUDED.seq WHERE wsm_heads.seq = $3`,
              values: [stream, write.seq, at],
            });
            if (rowCount !== 1 || write.seq !== at + 1) throw new HeadMovedError(stream);
            continue;
          }
          let { rows: held } = await client.query<{ seq: string }>({ name: 'wsm-hold-head', text: 'SELECT seq FROM wsm_heads WHERE stream = $1 FOR SHARE', values: [stream] });
          if (held.length === 0) {
            // A stream with no record yet: its head row, created here, is what a first append to it waits on.
            await client.query('INSERT INTO wsm_heads (stream, seq) VALUES ($1, 0) ON CONFLICT DO NOTHING', [stream]);
            ({ rows: held } = await client.query<{ seq: string }>({ name: 'wsm-hold-head', text: 'SELECT seq FROM wsm_heads WHERE stream = $1 FOR SHARE', values: [stream] }));
          }
          if (Number(held[0]?.seq ?? 0) !== at) throw new HeadMovedError(stream);
        }
        // Taken once every head is held: a write that conflicts with this one takes its gseq after this one commits.
        const { rows: order } = await client.query<{ gseq: string }>({ name: 'wsm-order', text: "SELECT nextval('wsm_order') AS gseq" });
        const gseq = Number(order[0]!.gseq);
        for (const row of rows) {
          await client.query({
            name: 'wsm-append',
            text: `WITH appended AS (INSERT INTO wsm_journal (stream, seq, gseq, record) VALUES ($1, $2, $3, $4) RETURNING seq)
                   SELECT pg_notify('${CHANNEL}', $1 || ':' || seq) FROM appended`,
            values: [row.stream, row.seq, gseq, row.record],
          });
        }
        return gseq;
      });
    } catch (err) {
      if (RACE_CODES.has((err as { code?: string }).code ?? '')) throw new HeadMovedError(rows[0]?.stream ?? [...expected.keys()][0] ?? '');
      throw err;
    }
  }

  /**
   * The usual write (one stream changed, no other read) in one statement,
   * so one round trip: the head moved from `at`, the row appended with the
   * gseq taken once the head is held, the other instances notified.
   */
  private async appendToOne(row: Append, at: number, fence?: Fence): Promise<number> {
    if (row.seq !== at + 1) throw new HeadMovedError(row.stream);
    const epoch = fence?.epochs.get(row.stream);
    const { rows } = await this.withClient((client) => client.query<{ gseq: string }>(fence && epoch !== undefined ? {
      // The same, under the lease: the head moves only while the lease names this instance at its epoch and has not ended.
      name: 'wsm-append-one-fenced',
      text: `WITH lease AS (
               SELECT 1 FROM wsm_owners WHERE stream = $1 AND instance = $5 AND epoch = $6 AND expires_at > now() FOR SHARE
             ), head AS (
               INSERT INTO wsm_heads (stream, seq) SELECT $1::text, $2::bigint FROM lease
               ON CONFLICT (stream) DO UPDATE SET seq = EXCLUDED.seq WHERE wsm_heads.seq = $3
               RETURNING stream, seq
             ), appended AS (
               INSERT INTO wsm_journal (stream, seq, gseq, record) SELECT stream, seq, nextval('wsm_order'), $4 FROM head
               RETURNING stream, seq, gseq
             )
             SELECT gseq, pg_notify('${CHANNEL}', stream || ':' || seq) FROM appended`,
      values: [row.stream, row.seq, at, row.record, fence.instance, epoch],
    } : {
      name: 'wsm-append-one',
      text: `WITH head AS (
               INSERT INTO wsm_heads (stream, seq) VALUES ($1, $2) ON CONFLICT (stream) DO UPDATE SET seq = EXCLUDED.seq WHERE wsm_heads.seq = $3
               RETURNING stream, seq
             ), appended AS (
               INSERT INTO wsm_journal (stream, seq, gseq, record) SELECT stream, seq, nextval('wsm_order'), $4 FROM head
               RETURNING stream, seq, gseq
             )
             SELECT gseq, pg_notify('${CHANNEL}', stream || ':' || seq) FROM appended`,
      values: [row.stream, row.seq, at, row.record],
    }));
    if (rows.length !== 1) {
      // Nothing appended: the lease (when one was given), else the head.
      if (fence && epoch !== undefined && !await this.leaseHolds(row.stream, fence.instance, epoch)) throw new LeaseLostError(row.stream);
      throw new HeadMovedError(row.stream);
    }
    return Number(rows[0]!.gseq);
  }

  /** Whether the lease on `stream` names `instance` at `epoch` and has not ended. */
  private async leaseHolds(stream: string, instance: string, epoch: number): Promise<boolean> {
    const { rows } = await this.pool.query({
      name: 'wsm-lease-holds', text: 'SELECT 1 FROM wsm_owners WHERE stream = $1 AND instance = $2 AND epoch = $3 AND expires_at > now()', values: [stream, instance, epoch],
    });
    return rows.length > 0;
  }

  /**
   * Takes the lease on `stream` for `instance` for `ms` (by PostgreSQL's
   * clock), in one statement, when no instance holds it, its lease ended,
   * `instance` holds it already (then renewed, same epoch), or (a takeover
   * of an owner that cannot be reached) it is still at `takeOverEpoch`.
   * Every change of holder moves the epoch on, so two instances racing for
   * a free lease get one winner. Answers the epoch taken, or the holder
   * when it was not taken.
   */
  async acquireLease(stream: string, instance: string, url: string | null, ms: number, takeOverEpoch?: number): Promise<{ epoch: number } | { owner: Owner }> {
    const { rows } = await this.pool.query<{ epoch: string }>({
      name: 'wsm-acquire-lease',
      text: `INSERT INTO wsm_owners AS o (stream, instance, epoch, url, expires_at) VALUES ($1, $2, 1, $3, now() + $4 * interval '1 millisecond')
             ON CONFLICT (stream) DO UPDATE SET
               epoch = CASE WHEN o.instance = EXCLUDED.instance AND o.expires_at > now() THEN o.epoch ELSE o.epoch + 1 END,
               instance = EXCLUDED.instance, url = EXCLUDED.url, expires_at = EXCLUDED.expires_at
             WHERE o.expires_at <= now() OR o.instance = EXCLUDED.instance OR o.epoch = $5
             RETURNING epoch`,
      values: [stream, instance, url, ms, takeOverEpoch ?? -1],
    });
    if (rows[0]) return { epoch: Number(rows[0].epoch) };
    const owner = await this.owner(stream);
    // Released or ended between the two statements: free again, taken on the next try.
    return { owner: owner ?? { instance: '', epoch: 0, url: null, live: false } };
  }

  /** Who holds the lease on `stream` (`live`: it has not ended), if anyone ever did. */
  async owner(stream: string): Promise<Owner | undefined> {
    const { rows } = await this.pool.query<{ instance: string; epoch: string; url: string | null; live: boolean }>({
      name: 'wsm-owner', text: 'SELECT instance, epoch, url, expires_at > now() AS live FROM wsm_owners WHERE stream = $1', values: [stream],
    });
    const row = rows[0];
    return row ? { instance: row.instance, epoch: Number(row.epoch), url: row.url, live: row.live } : undefined;
  }

  /**
   * Moves on the end of the leases `instance` holds (`epochs`, by stream)
   * by `ms`, and sets the URL it takes forwarded requests at; a lease taken
   * over or ended meanwhile is not renewed. Answers the streams renewed.
   */
  async renewLeases(instance: string, epochs: ReadonlyMap<string, number>, url: string | null, ms: number): Promise<Set<string>> {
    if (epochs.size === 0) return new Set();
    const { rows } = await this.pool.query<{ stream: string }>({
      name: 'wsm-renew-leases',
      text: `UPDATE wsm_owners o SET expires_at = now() + $4 * interval '1 millisecond', url = $5
             FROM unnest($2::text[], $3::bigint[]) AS l(stream, epoch)
             WHERE o.stream = l.stream AND o.epoch = l.epoch AND o.instance = $1 AND o.expires_at > now()
             RETURNING o.stream`,
      values: [instance, [...epochs.keys()], [...epochs.values()], ms, url],
    });
    return new Set(rows.map((r) => r.stream));
  }

  /**
   * Takes the leases recorded with `url` under another instance id: a
   * previous process at this address (it stopped without releasing them:
   * killed), since no two live instances take requests at one address.
   * Answers the streams and their new epochs.
   */
  async adoptLeases(instance: string, url: string, ms: number): Promise<Map<string, number>> {
    const { rows } = await this.pool.query<{ stream: string; epoch: string }>({
      name: 'wsm-adopt-leases',
      text: `UPDATE wsm_owners SET instance = $1, epoch = epoch + 1, expires_at = now() + $3 * interval '1 millisecond'
             WHERE url = $2 AND instance <> $1 AND expires_at > now() RETURNING stream, epoch`,
      values: [instance, url, ms],
    });
    return new Map(rows.map((r) => [r.stream, Number(r.epoch)]));
  }

  /** Ends the leases `instance` holds at `epochs` now, so another instance takes the streams at once (their epochs stay, the next holder's is one more). */
  async releaseLeases(instance: string, epochs: ReadonlyMap<string, number>): Promise<void> {
    if (epochs.size === 0) return;
    await this.pool.query({
      name: 'wsm-release-leases',
      text: `UPDATE wsm_owners o SET expires_at = least(o.expires_at, now()) FROM unnest($2::text[], $3::bigint[]) AS l(stream, epoch)
             WHERE o.stream = l.stream AND o.epoch = l.epoch AND o.instance = $1`,
      values: [instance, [...epochs.keys()], [...epochs.values()]],
    });
  }

  /**
   * The rows after `after` up to `upto` (per stream; a stream not in
   * `after` from its first), at most `limit`, in the order of their
   * writes (gseq), each checked (`decodeRecord`).
   */
  async recordsBetween(after: Heads, upto: Heads, limit: number): Promise<StoredRecord[]> {
    const streams = [...upto.keys()].filter((s) => upto.get(s)! > (after.get(s) ?? 0));
    if (streams.length === 0) return [];
    const { rows } = await this.pool.query<{ stream: string; seq: string; gseq: string; record: Buffer }>({
      name: 'wsm-records-between',
      text: `SELECT j.stream, j.seq, j.gseq, j.record FROM wsm_journal j
             JOIN unnest($1::text[], $2::bigint[], $3::bigint[]) AS w(stream, after, upto) ON j.stream = w.stream AND j.seq > w.after AND j.seq <= w.upto
             ORDER BY j.gseq, j.stream LIMIT $4`,
      values: [streams, streams.map((s) => after.get(s) ?? 0), streams.map((s) => upto.get(s)!), limit],
    });
    return rows.map((row) => ({ ...decodeRecord(row.stream, Number(row.seq), row.record), stream: row.stream, gseq: Number(row.gseq), bytes: row.record.length, raw: row.record }));
  }

  /** The streams the write of `gseq` has a row in. */
  async streamsOfWrite(gseq: number): Promise<Set<string>> {
    const { rows } = await this.pool.query<{ stream: string }>('SELECT stream FROM wsm_journal WHERE gseq = $1', [gseq]);
    return new Set(rows.map((r) => r.stream));
  }

  /** The snapshots of the replica, newest first. */
  async snapshots(): Promise<SnapshotEntry[]> {
    const { rows } = await this.pool.query<{ seq: string; heads: Record<string, number> }>(
      'SELECT seq, heads FROM wsm_snapshots WHERE stream = $1 ORDER BY seq DESC', [REPLICA_SNAPSHOT]);
    return rows.map((r) => ({ seq: Number(r.seq), heads: headsOf(r.heads) }));
  }

  /** The part of snapshot `seq` that holds `stream`'s graphs, if that snapshot was stored with parts. */
  async snapshotPart(seq: number, stream: string): Promise<(SnapshotPart & { sha256: Buffer }) | undefined> {
    const { rows } = await this.pool.query<{ quads: string; data: Buffer; sha256: Buffer }>(
      'SELECT quads, data, sha256 FROM wsm_snapshots WHERE stream = $1 AND seq = $2', [stream, seq]);
    const row = rows[0];
    return row ? { quads: Number(row.quads), data: row.data, sha256: row.sha256 } : undefined;
  }

  /** Whether snapshot `seq` was stored with a part per stream. */
  async snapshotHasParts(seq: number): Promise<boolean> {
    const { rows } = await this.pool.query('SELECT 1 FROM wsm_snapshots WHERE stream <> $1 AND seq = $2 LIMIT 1', [REPLICA_SNAPSHOT, seq]);
    return rows.length > 0;
  }

  async snapshot(seq: number): Promise<StoredSnapshot | undefined> {
    const { rows } = await this.pool.query<{ seq: string; quads: string; data: Buffer; sha256: Buffer; heads: Record<string, number> }>(
      'SELECT seq, quads, data, sha256, heads FROM wsm_snapshots WHERE stream = $1 AND seq = $2', [REPLICA_SNAPSHOT, seq]);
    const row = rows[0];
    return row ? { seq: Number(row.seq), quads: Number(row.quads), data: row.data, sha256: row.sha256, heads: headsOf(row.heads) } : undefined;
  }

  /**
   * Stores a snapshot of the replica holding `heads` (kept as it is when
   * another instance stored one of that number first), then drops every
   * snapshot but the two newest and, per stream, the records both of those
   * hold.
   */
  async putSnapshot(heads: Heads, quads: number, data: Buffer, parts: ReadonlyMap<string, SnapshotPart> = new Map()): Promise<number> {
    const sha256 = createHash('sha256').update(data).digest();
    const seq = [...heads.values()].reduce((a, b) => a + b, 0);
    await this.inTransaction(async (client) => {
      const { rowCount } = await client.query('INSERT INTO wsm_snapshots (stream, seq, quads, sha256, data, heads) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING',
        [REPLICA_SNAPSHOT, seq, quads, sha256, data, jsonOf(heads)]);
      // The same snapshot split by stream (residency loads one stream from its part): with the snapshot, or not at all.
      if (rowCount === 1) {
        for (const [stream, part] of parts) {
          await client.query('INSERT INTO wsm_snapshots (stream, seq, quads, sha256, data, heads) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING',
            [stream, seq, part.quads, createHash('sha256').update(part.data).digest(), part.data, jsonOf(heads)]);
        }
      }
      const { rows } = await client.query<{ seq: string }>('SELECT seq FROM wsm_snapshots WHERE stream = $1 ORDER BY seq DESC LIMIT 2', [REPLICA_SNAPSHOT]);
      if (rows.length < 2) return;
      // Snapshots and their parts.
      await client.query('DELETE FROM wsm_snapshots WHERE seq < $1', [Number(rows[1]!.seq)]);
      // Per stream, behind what both kept snapshots hold (a stream one of them lacks keeps all its records).
      await client.query(`DELETE FROM wsm_journal j USING (
          SELECT h.key AS stream, min(h.value::bigint) AS seq FROM wsm_snapshots s, jsonb_each_text(s.heads) h
          WHERE s.stream = $1 GROUP BY h.key HAVING count(*) = (SELECT count(*) FROM wsm_snapshots WHERE stream = $1)
        ) kept WHERE j.stream = kept.stream AND j.seq <= kept.seq`, [REPLICA_SNAPSHOT]);
    });
    return seq;
  }

  /** Bytes of the records a replica holding `heads` lacks (how much a new instance replays after that snapshot). */
  async bytesAfter(heads: Heads): Promise<number> {
    const { rows } = await this.pool.query<{ bytes: string | null }>(
      `SELECT sum(octet_length(j.record)) AS bytes FROM wsm_journal j LEFT JOIN jsonb_each_text($1::jsonb) h ON h.key = j.stream
       WHERE j.seq > coalesce(h.value::bigint, 0)`, [jsonOf(heads)]);
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
