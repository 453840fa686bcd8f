import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import oxigraph from 'oxigraph';
import { fsyncDir } from './fsutil.js';
import { Journal, readJournalFile, type JournalStats } from './journal.js';
import { acquireLock, type DirLock } from './lock.js';
import { OxigraphStore, applyOp } from './oxigraph-store.js';
import { loadLatestSnapshot, removeOldSnapshots, writeSnapshot } from './snapshot.js';
import type { WriteOp } from './store.js';

/*
 * Data directory layout:
 *   lock                          pid of the process using the directory
 *   snapshot-<seq>.nq             whole store up to journal record <seq>
 *   journal-<first seq>.log       records from <first seq> on
 * At open: newest valid snapshot, then every journal file in order, records
 * after the snapshot's seq replayed. Snapshotting writes a new snapshot, and
 * in the same tick as the dump switches the journal to a new file, so writes
 * racing the snapshot land in the new file; older files go once the snapshot
 * is in place.
 */

export interface DurableStoreOptions {
  /** Problems recovered from (cut journal tail, bad snapshot, failed auto snapshot). */
  onWarning?: (message: string) => void;
  /** Normal events worth a log line (replay summary, stale lock taken over). */
  onInfo?: (message: string) => void;
  /** Snapshot automatically once the current journal file grows past this. Default 64 MiB. */
  snapshotAfterBytes?: number;
}

/** What opening the store found and did; for logs. */
export interface ReplayInfo {
  /** Seq of the snapshot loaded (0 when none). */
  snapshotSeq: number;
  /** Quads loaded from the snapshot. */
  snapshotQuads: number;
  journalFiles: number;
  /** Journal records applied on top of the snapshot. */
  recordsReplayed: number;
  /** Records already in the snapshot, skipped. */
  recordsSkipped: number;
  /** Bytes of torn or corrupt journal tail cut off. */
  cutBytes: number;
  /** Seq of the last durable write; the next write gets this plus one. */
  lastSeq: number;
  millis: number;
}

/** Live counters; see `JournalStats`. */
export interface DurabilityStats extends JournalStats {
  /** Snapshots written by this store since it was opened. */
  snapshots: number;
  /** Seq of the newest snapshot on disk (0 when none). */
  snapshotSeq: number;
}

const JOURNAL_NAME = /^journal-(\d{16})\.log$/;

function journalFileName(firstSeq: number): string {
  return `journal-${String(firstSeq).padStart(16, '0')}.log`;
}

async function listJournals(dir: string): Promise<{ firstSeq: number; file: string }[]> {
  const found: { firstSeq: number; file: string }[] = [];
  for (const name of await readdir(dir)) {
    const m = JOURNAL_NAME.exec(name);
    if (m) found.push({ firstSeq: Number(m[1]), file: join(dir, name) });
  }
  return found.sort((a, b) => a.firstSeq - b.firstSeq);
}

/** The embedded store made durable by a journal, snapshots and a directory lock. */
export class DurableStore extends OxigraphStore {
  private closed = false;
  private snapshotChain: Promise<void> = Promise.resolve();
  private autoSnapshotRunning = false;
  private snapshotsWritten = 0;

  /** Use `openDurableStore`. */
  constructor(
    raw: oxigraph.Store,
    private readonly journal: Journal,
    private readonly lock: DirLock,
    readonly dataDir: string,
    readonly replayInfo: ReplayInfo,
    private snapshotSeq: number,
    private readonly options: Required<DurableStoreOptions>,
  ) {
    super(raw, journal);
  }

  override async write(ops: WriteOp[]): Promise<void> {
    if (this.closed) throw new Error('store is closed');
    const durable = super.write(ops); // applied and journaled synchronously
    this.maybeAutoSnapshot();
    return durable;
  }

  /** Counters: fsyncs, appends, journal bytes, snapshots. */
  stats(): DurabilityStats {
    return { ...this.journal.stats(), snapshots: this.snapshotsWritten, snapshotSeq: this.snapshotSeq };
  }

  /**
   * Compacts: writes a snapshot of everything written so far, rotates the
   * journal, then removes the journal files and snapshots it supersedes.
   * Writes made while it runs are kept (they go to the new journal file).
   * Snapshots run one at a time; a call made during one runs after it.
   */
  snapshot(): Promise<void> {
    if (this.closed) return Promise.reject(new Error('store is closed'));
    const run = this.snapshotChain.then(() => this.takeSnapshot());
    this.snapshotChain = run.catch(() => {});
    return run;
  }

  private async takeSnapshot(): Promise<void> {
    // Same tick: the seq, the dump and the journal switch. Every write
    // before this point is in the dump, every write after it goes to the
    // new journal file.
    const seq = this.journal.lastSeq;
    if (seq === this.snapshotSeq) return;
    const nquads = this.raw.dump({ format: 'application/n-quads' });
    const rotated = this.journal.rotate(join(this.dataDir, journalFileName(seq + 1)));
    rotated.catch(() => {}); // awaited below; avoid an unhandled rejection meanwhile
    await writeSnapshot(this.dataDir, seq, nquads);
    await rotated;
    this.snapshotSeq = seq;
    this.snapshotsWritten++;
    for (const { firstSeq, file } of await listJournals(this.dataDir)) {
      if (firstSeq <= seq) await rm(file, { force: true });
    }
    await removeOldSnapshots(this.dataDir, seq);
    await fsyncDir(this.dataDir);
  }

  private maybeAutoSnapshot(): void {
    if (this.autoSnapshotRunning) return;
    if (this.journal.stats().currentFileBytes < this.options.snapshotAfterBytes) return;
    this.autoSnapshotRunning = true;
    this.snapshot()
      .catch((err: Error) => this.options.onWarning(`automatic snapshot failed: ${err.message}`))
      .finally(() => {
        this.autoSnapshotRunning = false;
      });
  }

  /** Waits for a running snapshot, flushes and closes the journal, releases the lock. Idempotent. */
  override async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      await this.snapshotChain;
      await super.close();
    } finally {
      await this.lock.release();
    }
  }
}

/**
 * Opens the durable embedded store in `dataDir` (created if needed): takes
 * the directory lock, loads the newest valid snapshot, replays the journal
 * records after it (cutting off a torn or corrupt tail, reported through
 * `onWarning`), and returns a store whose writes resolve once fsynced.
 *
 * Throws if another process holds the directory, or if the history is not
 * whole (a journal record missing between the snapshot and later records),
 * rather than start from a silently incomplete state.
 */
export async function openDurableStore(dataDir: string, options: DurableStoreOptions = {}): Promise<DurableStore> {
  const opts: Required<DurableStoreOptions> = {
    onWarning: options.onWarning ?? (() => {}),
    onInfo: options.onInfo ?? (() => {}),
    snapshotAfterBytes: options.snapshotAfterBytes ?? 64 * 1024 * 1024,
  };
  const started = performance.now();
  await mkdir(dataDir, { recursive: true });
  const lock = await acquireLock(dataDir, opts.onInfo);
  try {
    const raw = new oxigraph.Store();
    const snapshot = await loadLatestSnapshot(dataDir, raw, opts.onWarning);
    const snapshotSeq = snapshot?.seq ?? 0;
    const info: ReplayInfo = {
      snapshotSeq,
      snapshotQuads: raw.size,
      journalFiles: 0,
      recordsReplayed: 0,
      recordsSkipped: 0,
      cutBytes: 0,
      lastSeq: snapshotSeq,
      millis: 0,
    };

    const journals = await listJournals(dataDir);
    info.journalFiles = journals.length;
    let appendTo: string | undefined;
    for (const { firstSeq, file } of journals) {
      const { records, cutBytes } = await readJournalFile(file, opts.onWarning);
      info.cutBytes += cutBytes;
      for (const record of records) {
        if (record.seq <= info.lastSeq) {
          info.recordsSkipped++;
          continue;
        }
        if (record.seq !== info.lastSeq + 1) {
          throw new Error(
            `journal ${file}: record ${record.seq} follows ${info.lastSeq}; records in between are missing, refusing to open an incomplete history`,
          );
        }
        try {
          for (const op of record.ops) applyOp(raw, op);
        } catch (err) {
          throw new Error(`journal ${file}: record ${record.seq} does not replay: ${(err as Error).message}`, { cause: err });
        }
        info.recordsReplayed++;
        info.lastSeq = record.seq;
      }
      // Keep appending to the last file if it ends exactly where history ends.
      const endSeq = records.at(-1)?.seq ?? firstSeq - 1;
      appendTo = endSeq === info.lastSeq ? file : undefined;
    }
    const journal = await Journal.open(appendTo ?? join(dataDir, journalFileName(info.lastSeq + 1)), info.lastSeq);
    await removeOldSnapshots(dataDir, snapshotSeq);
    info.millis = Math.round(performance.now() - started);
    opts.onInfo(
      `store opened: snapshot seq ${snapshotSeq} (${info.snapshotQuads} quads), ${info.recordsReplayed} journal records replayed` +
        `, ${info.recordsSkipped} skipped, ${info.cutBytes} bytes cut, last seq ${info.lastSeq}, ${info.millis} ms`,
    );
    return new DurableStore(raw, journal, lock, dataDir, info, snapshotSeq, opts);
  } catch (err) {
    await lock.release();
    throw err;
  }
}
