import { access, mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import oxigraph from 'oxigraph';
import { fsyncDir } from '../fsutil.js';
import { Journal, cutJournal, journalFileName, readJournalFile, type JournalFileOps, type JournalRecord, type JournalStats } from '../journal.js';
import { acquireLock, type DirLock } from './lock.js';
import { OxigraphStore, applyOp, coalesceUpdates, conditionHolds } from './oxigraph-store.js';
import { RecordReplayer } from './replay.js';
import { JOURNAL_FILE, splitRecord } from '../journal-records.js';
import { listSnapshots, loadLatestSnapshot, removeSnapshotsExcept, writeSnapshot, type WrittenSnapshot } from './snapshot.js';
import { snapshotInWorker } from './snapshot-in-worker.js';
import { opsWithTexts, type Binding, type QueryScope, type QuadStore, type StoreCapabilities, type StoreHealth, type WriteCondition, type WriteInput, type WriteOp } from '../store.js';
import type { Sparql } from '../../rdf/sparql.js';

export { journalFileName };
import { ChangedGraphs, graphsWrittenBy, type GraphSources, type SnapshotCoverage, type WrittenGraphs } from './snapshot-coverage.js';

/*
 * Data directory layout (docs/decisions.md, Durability):
 *   lock                          pid of the process using the directory
 *   store.json                    written when the store is created here; marks that history must exist
 *   snapshot-<seq>.trig           whole store up to journal record <seq>; the newest two sound ones are kept
 *   journal-<first seq>.log       records from <first seq> on; kept back to the older kept snapshot
 * At open: the newest sound snapshot (a corrupt one falls back to the one
 * before it), then the journal files that hold records after it, in order.
 * A torn tail (a record cut short, nothing valid after it) of the last file
 * is cut; any other damage (a whole record that fails its checksum, damage
 * followed by valid records) refuses to open, leaving the files as they
 * are, until `wsm journal accept-loss` cuts it deliberately.
 */

export interface DurableStoreOptions {
  /** Problems recovered from (cut journal tail, bad snapshot, failed auto snapshot). */
  onWarning?: (message: string) => void;
  /** Normal events worth a log line (replay summary, stale lock taken over). */
  onInfo?: (message: string) => void;
  /**
   * Snapshot automatically once the current journal file grows past an
   * eighth of the last snapshot's size (at least `snapshotMinBytes`), and at most this.
   * Default 64 MiB. Replaying a journal byte costs several times loading a
   * snapshot byte, so this keeps a restart between two snapshots within
   * about twice a restart right after one.
   */
  snapshotAfterBytes?: number;
  /**
   * The journal may always grow this far before an automatic snapshot (the
   * threshold's floor, for small stores). Default 16 MiB: each snapshot
   * loads and dumps the whole store, and a restart just before one replays
   * up to this much journal (`WSM_SNAPSHOT_JOURNAL_MB`).
   */
  snapshotMinBytes?: number;
  /**
   * Instead of refusing to open on damage that is not a torn tail, cut the
   * journal at the damage (the cut bytes kept beside it as
   * `<file>.dropped-at-<offset>`, later journal files renamed `<file>.dropped`)
   * and report what was dropped through `onWarning`. Used by
   * `wsm journal accept-loss` only.
   */
  acceptJournalLoss?: boolean;
  /** First wait before retrying a failed automatic snapshot (doubles per failure, at most 10 min). Default 1 s. */
  snapshotRetryMs?: number;
  /** A lock naming this process belongs to a store thread of its own that stopped: take it (`acquireLock`). */
  ownLockIsStale?: boolean;
  /**
   * A snapshot is written by a worker thread (`snapshot-in-worker.ts`),
   * which rebuilds the store from the previous snapshot and the journal, as
   * long as those two together hold at most this many bytes; a larger store
   * is dumped by the main thread, piece by piece, writes waiting for it. The
   * worker holds a second copy of the store while it runs (memory about
   * three times these bytes), so this bounds that memory. Default 256 MiB
   * (about 1.5 million quads of the service's shape); 0 never uses the worker.
   */
  snapshotInWorkerMaxBytes?: number;
  /**
   * A snapshot file of at least this many bytes has its checksum checked in
   * a worker thread while the main thread loads it (`loadLatestSnapshot`).
   * Default 32 MiB.
   */
  snapshotCheckAsideMinBytes?: number;
  /**
   * Replaces some of the journal's file operations (write, fdatasync,
   * truncate, open): tests make them fail as a full disk does (ENOSPC).
   */
  journalFileOps?: Partial<JournalFileOps>;
  /** First wait before an unwritable journal probes itself (doubles per failed probe). Default 1 s. */
  journalProbeMs?: number;
  /** Longest wait between two probes of an unwritable journal. Default 30 s. */
  journalProbeMaxMs?: number;
}

/** What opening the store found and did; for logs. */
export interface ReplayInfo {
  /** Seq of the snapshot loaded (0 when none). */
  snapshotSeq: number;
  /** Quads loaded from the snapshot. */
  snapshotQuads: number;
  /** Journal files read (files wholly covered by the snapshot are not read). */
  journalFiles: number;
  /** Journal records applied on top of the snapshot. */
  recordsReplayed: number;
  /** Records already in the snapshot, skipped. */
  recordsSkipped: number;
  /** Bytes of torn journal tail cut off. */
  cutBytes: number;
  /** Bytes dropped at damage by `acceptJournalLoss` (including later journal files). */
  droppedBytes: number;
  /** Seq of the last durable write; the next write gets this plus one. */
  lastSeq: number;
  /** Milliseconds spent loading the snapshot. */
  snapshotMillis: number;
  /** Milliseconds spent reading and replaying the journal. */
  replayMillis: number;
  millis: number;
}

/** Live counters; see `JournalStats`. */
export interface DurabilityStats extends JournalStats {
  /** Snapshots written by this store since it was opened. */
  snapshots: number;
  /** Of those, the ones a worker thread wrote (the others were dumped by the main thread). */
  snapshotsByWorker: number;
  /** Seq of the newest sound snapshot on disk (0 when none). */
  snapshotSeq: number;
  /** Journal bytes after which the next automatic snapshot is taken. */
  snapshotThresholdBytes: number;
  /** Automatic snapshots that failed since the last one that worked. */
  snapshotFailures: number;
  /** Message of the last failed snapshot, if the last attempt failed. */
  lastSnapshotError?: string;
}

/** The journal is damaged, not torn (a whole record is corrupt, or valid records follow): cutting it would lose acknowledged writes silently. */
export class JournalCorruptError extends Error {
  constructor(
    message: string,
    readonly file: string,
    readonly offset: number,
  ) {
    super(message);
    this.name = 'JournalCorruptError';
  }
}

/** The data directory once held a store but its journal and snapshots are gone. */
export class LostHistoryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LostHistoryError';
  }
}

/** Marker written when a store is created in a directory. */
export const STORE_MARKER = 'store.json';
/** The journal may always grow this far before an automatic snapshot, unless told otherwise (`snapshotMinBytes`). */
const MIN_SNAPSHOT_AFTER_BYTES = 16 * 1024 * 1024;
const MAX_SNAPSHOT_RETRY_MS = 10 * 60 * 1000;

/** The automatic snapshot threshold for a last snapshot of `snapshotBytes` (see `snapshotAfterBytes` and `snapshotMinBytes`). */
export function snapshotThresholdFor(snapshotBytes: number, maxBytes: number, minBytes = MIN_SNAPSHOT_AFTER_BYTES): number {
  return Math.min(maxBytes, Math.max(minBytes, Math.floor(snapshotBytes / 8)));
}

export async function listJournals(dir: string): Promise<{ firstSeq: number; file: string }[]> {
  const found: { firstSeq: number; file: string }[] = [];
  for (const name of await readdir(dir)) {
    const m = JOURNAL_FILE.exec(name);
    if (m) found.push({ firstSeq: Number(m[1]), file: join(dir, name) });
  }
  return found.sort((a, b) => a.firstSeq - b.firstSeq);
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(() => true, () => false);
}

async function writeMarker(dataDir: string): Promise<void> {
  const file = join(dataDir, STORE_MARKER);
  const temp = `${file}.tmp`;
  const handle = await open(temp, 'w');
  try {
    await handle.writeFile(`${JSON.stringify({ format: 1, created: new Date().toISOString() })}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, file);
  await fsyncDir(dataDir);
}

/**
 * The embedded store made durable by a journal, snapshots and a directory
 * lock. It holds the engine (`OxigraphStore`, the journal as its sink) and
 * hands it reads and writes; what it adds is the data directory's files:
 * writes wait while a snapshot dumps the engine (`appendBlocked`), which
 * graphs the newest snapshot still holds as they are (`SnapshotCoverage`),
 * automatic snapshots, and the lock.
 */
export class DurableStore implements QuadStore, SnapshotCoverage {
  readonly capabilities: StoreCapabilities = { otherInstancesWrite: false, durable: true, graphPatternNamesGraphs: true };
  /** The engine: answers reads, journals writes (its sink) and applies them. */
  private readonly engine: OxigraphStore;
  private closed = false;
  /** The newest snapshot file (TriG) and the graphs written since it was taken. */
  private coverage: { file: string; seq: number; changed: ChangedGraphs } | undefined;
  /** While a snapshot is written: the graphs written after its seq. */
  private nextCoverage: ChangedGraphs | undefined;
  /** Graphs of the writes begun and not yet settled (one may apply after a snapshot's seq is chosen). */
  private readonly inFlight = new Set<WrittenGraphs[]>();
  private snapshotChain: Promise<void> = Promise.resolve();
  private autoSnapshotRunning = false;
  private snapshotsWritten = 0;
  private snapshotsByWorker = 0;
  private snapshotFailures = 0;
  private lastSnapshotError: string | undefined;
  private nextAutoSnapshotAt = 0;
  /** Set while a snapshot dumps the store: writes wait for it, reads go on. */
  private writeGate: Promise<void> | null = null;

  /** Use `openDurableStore`. */
  constructor(
    raw: oxigraph.Store,
    private readonly journal: Journal,
    private readonly lock: DirLock,
    readonly dataDir: string,
    readonly replayInfo: ReplayInfo,
    private snapshotSeq: number,
    private snapshotBytes: number,
    private readonly options: StoreOptions,
    snapshot?: { file: string; seq: number; changed: ChangedGraphs },
    skipped: Iterable<number> = [],
  ) {
    this.engine = new OxigraphStore(raw, journal, {
      durability: { appendBlocked: () => this.writeGate, appliedSeq: replayInfo.lastSeq, skipped },
    });
    this.coverage = snapshot;
  }

  /** The engine's store (tests read it in a write's tick). */
  get raw(): oxigraph.Store {
    return this.engine.raw;
  }

  get version(): number {
    return this.engine.version;
  }

  select(query: Sparql, scope?: QueryScope): Promise<Binding[]> {
    return this.engine.select(query, scope);
  }

  selectIris(query: Sparql, variable: string, scope?: QueryScope): Promise<string[]> {
    return this.engine.selectIris(query, variable, scope);
  }

  ask(query: Sparql, scope?: QueryScope): Promise<boolean> {
    return this.engine.ask(query, scope);
  }

  construct(query: Sparql, scope?: QueryScope): Promise<string> {
    return this.engine.construct(query, scope);
  }

  queryRaw(query: Sparql, resultsFormat: string, scope?: QueryScope): Promise<string | boolean> {
    return this.engine.queryRaw(query, resultsFormat, scope);
  }

  dumpGraph(graph: string): Promise<string> {
    return this.engine.dumpGraph(graph);
  }

  graphNames(): Promise<string[]> {
    return this.engine.graphNames();
  }

  size(): Promise<number> {
    return this.engine.size();
  }

  isEmpty(): Promise<boolean> {
    return this.engine.isEmpty();
  }

  revision(graph: string): number {
    return this.engine.revision(graph);
  }

  syncRevisions(): Promise<void> {
    return this.engine.syncRevisions();
  }

  exclusive<T>(key: string, fn: () => Promise<T>): Promise<T> {
    return this.engine.exclusive(key, fn);
  }

  onWrite(listener: (graphs: ReadonlySet<string>) => void): () => void {
    return this.engine.onWrite(listener);
  }

  async write(ops: WriteInput[]): Promise<void> {
    await this.writeChecked(opsWithTexts(ops), null);
  }

  writeIf(condition: WriteCondition, ops: WriteInput[]): Promise<boolean> {
    return this.writeChecked(opsWithTexts(ops), condition);
  }

  update(sparql: Sparql, graphs: readonly string[]): Promise<void> {
    return this.write([{ kind: 'update', sparql, graphs }]);
  }

  private async writeChecked(ops: WriteOp[], condition: WriteCondition | null): Promise<boolean> {
    if (this.closed) throw new Error('store is closed');
    // A snapshot is reading the store piece by piece: changes wait until it has it all.
    while (this.writeGate) await this.writeGate;
    if (this.closed) throw new Error('store is closed');
    const written = ops.map(graphsWrittenBy);
    for (const graphs of written) {
      this.coverage?.changed.add(graphs);
      this.nextCoverage?.add(graphs);
    }
    this.inFlight.add(written);
    const durable = this.engine.writeOps(ops, condition); // checked and queued to the journal (a conditional write: once its condition is asked)
    this.maybeAutoSnapshot();
    try {
      return await durable;
    } finally {
      this.inFlight.delete(written);
    }
  }

  // Neither this nor `graphSources` waits for a snapshot under way: a worker
  // thread takes seconds to write one (it rebuilds the store first), and the
  // newest snapshot written plus the journal after it give the same content.
  async unchangedInSnapshot(graphs: string[]): Promise<{ file: string; graphs: string[] } | undefined> {
    const coverage = this.coverage;
    if (!coverage || this.closed) return undefined;
    return { file: coverage.file, graphs: graphs.filter((g) => !coverage.changed.has(g)) };
  }

  async graphSources(graphs: string[]): Promise<GraphSources | undefined> {
    if (this.closed) return undefined;
    // From here on synchronous: the file, its seq and the journal's end belong together.
    const coverage = this.coverage;
    const unchanged = coverage ? graphs.filter((g) => !coverage.changed.has(g)) : [];
    return {
      ...(coverage ? { snapshot: { file: coverage.file, graphs: unchanged } } : {}),
      journal: {
        dir: this.dataDir,
        afterSeq: coverage?.seq ?? 0,
        // Applied (or skipped), not merely durable: whether a conditional record applied is known from here on.
        throughSeq: this.engine.appliedSeq,
        graphs: graphs.filter((g) => !unchanged.includes(g)),
        skipped: this.engine.skippedBetween(coverage?.seq ?? 0, this.engine.appliedSeq),
      },
    };
  }

  /** Writable while the journal can be written (see `Journal`: what makes it writable again). */
  health(): StoreHealth {
    return this.journal.health();
  }

  /** Counters: fsyncs, appends, journal bytes, snapshots. */
  stats(): DurabilityStats {
    return {
      ...this.journal.stats(),
      snapshots: this.snapshotsWritten,
      snapshotsByWorker: this.snapshotsByWorker,
      snapshotSeq: this.snapshotSeq,
      snapshotFailures: this.snapshotFailures,
      snapshotThresholdBytes: this.snapshotThreshold(),
      ...(this.lastSnapshotError ? { lastSnapshotError: this.lastSnapshotError } : {}),
    };
  }

  /**
   * Compacts: writes a snapshot of everything written so far (streamed to
   * disk graph by graph, then read back to check it), rotates the journal,
   * then removes what the two newest snapshots no longer need. Writes made
   * while the store is being dumped wait for the dump (reads go on); they
   * go to the new journal file. Snapshots run one at a time; a call made
   * during one runs after it.
   */
  snapshot(): Promise<void> {
    if (this.closed) return Promise.reject(new Error('store is closed'));
    const run = this.snapshotChain.then(() => this.takeSnapshot());
    this.snapshotChain = run.catch(() => {});
    return run;
  }

  /**
   * A worker writes the snapshot when the files it rebuilds the store from
   * are small enough (`snapshotInWorkerMaxBytes`); when it cannot (a file
   * gone, a store that did not come out as the live one was, a crash), the
   * main thread takes one right away.
   */
  private async takeSnapshot(): Promise<void> {
    const max = this.options.snapshotInWorkerMaxBytes;
    // The snapshot to start from: the newest, when it is one the worker reads (TriG, not the first format).
    const from = this.snapshotSeq === 0 ? null : this.coverage?.seq === this.snapshotSeq ? { file: this.coverage.file, seq: this.snapshotSeq } : undefined;
    if (max > 0 && from !== undefined && this.snapshotBytes + this.journal.stats().currentFileBytes <= max) {
      try {
        await this.takeSnapshotWith({ from });
        return;
      } catch (err) {
        if (this.closed) throw err;
        this.options.onInfo(`snapshot in a worker thread failed (${(err as Error).message}); the main thread takes it`);
      }
    }
    await this.takeSnapshotWith('main thread');
  }

  private async takeSnapshotWith(how: 'main thread' | { from: { file: string; seq: number } | null }): Promise<void> {
    // The write gate first: writes from here on wait until the seq is
    // chosen (on the main thread, until the dump is done) and go to the new
    // journal file. Every write journaled before it is applied (or failed,
    // numbering going back) before the seq is read: the snapshot is exactly
    // the state at `seq`, and the journal switch is queued in the same tick
    // as that read.
    const changedAfter = new ChangedGraphs();
    let openGate!: () => void;
    this.writeGate = new Promise<void>((resolve) => {
      openGate = () => {
        if (this.writeGate) {
          this.writeGate = null;
          resolve();
        }
      };
    });
    let seq: number;
    try {
      await this.engine.appliedSoFar();
      await this.journal.idle();
      seq = this.journal.lastSeq;
      if (seq === this.snapshotSeq) return;
      // Graphs written after `seq`: those of writes still under way (every
      // journaled one is applied by now, so this only errs on the safe side),
      // then every later write's.
      for (const written of this.inFlight) for (const graphs of written) changedAfter.add(graphs);
      this.nextCoverage = changedAfter;
      const rotated = this.journal.rotate(join(this.dataDir, journalFileName(seq + 1)));
      rotated.catch(() => {}); // awaited below; avoid an unhandled rejection meanwhile
      let written: WrittenSnapshot;
      if (how === 'main thread') {
        written = await writeSnapshot(this.dataDir, seq, this.raw, openGate);
      } else {
        // The worker reads the files only: writes go on from here, into the new journal file.
        const expectedQuads = this.raw.size;
        openGate();
        await rotated;
        // Every record through `seq` is applied or skipped, and the skipped ones after the snapshot it starts from are all known here.
        const skipped = this.engine.skippedBetween(how.from?.seq ?? 0, seq);
        written = await snapshotInWorker({ dir: this.dataDir, from: how.from, seq, expectedQuads, skipped });
      }
      this.snapshotBytes = written.bytes;
      await rotated;
      this.coverage = { file: written.file, seq, changed: changedAfter };
      // Records the snapshot holds the outcome of are never replayed by a reader again.
      this.engine.forgetSkippedThrough(seq);
    } finally {
      openGate();
      this.nextCoverage = undefined;
    }
    const previous = this.snapshotSeq;
    this.snapshotSeq = seq;
    this.snapshotsWritten++;
    if (how !== 'main thread') this.snapshotsByWorker++;
    // In the same step as the count, so `stats()` never shows a snapshot written beside the failures before it.
    this.snapshotFailures = 0;
    this.lastSnapshotError = undefined;
    // Keep the previous snapshot and the journal after it: if the new one is
    // found corrupt at the next start, that is what recovery falls back to.
    await removeSnapshotsExcept(this.dataDir, previous > 0 ? [seq, previous] : [seq]);
    const journals = await listJournals(this.dataDir);
    for (const [i, { file }] of journals.entries()) {
      const next = journals[i + 1];
      if (next && next.firstSeq <= previous + 1) await rm(file, { force: true });
    }
    await fsyncDir(this.dataDir);
  }

  /** Journal bytes after which the next automatic snapshot is taken. */
  snapshotThreshold(): number {
    return snapshotThresholdFor(this.snapshotBytes, this.options.snapshotAfterBytes, this.options.snapshotMinBytes);
  }

  private maybeAutoSnapshot(): void {
    if (this.autoSnapshotRunning) return;
    if (this.journal.stats().currentFileBytes < this.snapshotThreshold()) return;
    if (Date.now() < this.nextAutoSnapshotAt) return;
    this.autoSnapshotRunning = true;
    this.snapshot()
      .catch((err: Error) => {
        this.snapshotFailures++;
        this.lastSnapshotError = err.message;
        const wait = Math.min(this.options.snapshotRetryMs * 2 ** (this.snapshotFailures - 1), MAX_SNAPSHOT_RETRY_MS);
        this.nextAutoSnapshotAt = Date.now() + wait;
        this.options.onWarning(`automatic snapshot failed (${this.snapshotFailures} in a row): ${err.message}; next attempt in ${Math.round(wait / 1000)} s at the earliest`);
      })
      .finally(() => {
        this.autoSnapshotRunning = false;
      });
  }

  /** Waits for a running snapshot, flushes and closes the journal, releases the lock. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      await this.snapshotChain;
      await this.engine.close();
    } finally {
      await this.lock.release();
    }
  }
}

/**
 * Applies one journal record; a conditional write's record only if its
 * condition holds here, where the live store asked it (every earlier record
 * applied). Answers false for a record whose condition did not hold.
 */
function replayRecord(raw: oxigraph.Store, record: JournalRecord, file: string, changed: ChangedGraphs): boolean {
  const { condition, ops } = splitRecord(record.ops);
  try {
    if (condition && !conditionHolds(raw, condition)) return false;
    changed.addOps(ops);
    for (const op of coalesceUpdates(ops)) applyOp(raw, op);
    return true;
  } catch (err) {
    throw new Error(`journal ${file}: record ${record.seq} does not replay: ${(err as Error).message}`, { cause: err });
  }
}

type StoreOptions = Required<Omit<DurableStoreOptions, 'acceptJournalLoss' | 'journalFileOps' | 'journalProbeMs' | 'journalProbeMaxMs' | 'snapshotCheckAsideMinBytes' | 'ownLockIsStale'>>;

/**
 * Opens the durable embedded store in `dataDir` (created if needed): takes
 * the directory lock, loads the newest sound snapshot (falling back to an
 * older one), replays the journal records after it (cutting off a torn
 * tail, reported through `onWarning`), and returns a store whose writes
 * resolve once fsynced.
 *
 * Throws, leaving the files as they are, if another process holds the
 * directory, if the journal is damaged other than by a torn last record
 * (`JournalCorruptError`), if the history is not whole (a journal record
 * missing between the snapshot and later records), or if the directory held
 * a store whose journal and snapshots are gone (`LostHistoryError`).
 */
export async function openDurableStore(dataDir: string, options: DurableStoreOptions = {}): Promise<DurableStore> {
  const opts: StoreOptions = {
    onWarning: options.onWarning ?? (() => {}),
    onInfo: options.onInfo ?? (() => {}),
    snapshotAfterBytes: options.snapshotAfterBytes ?? 64 * 1024 * 1024,
    snapshotMinBytes: options.snapshotMinBytes ?? MIN_SNAPSHOT_AFTER_BYTES,
    snapshotRetryMs: options.snapshotRetryMs ?? 1000,
    snapshotInWorkerMaxBytes: options.snapshotInWorkerMaxBytes ?? 256 * 1024 * 1024,
  };
  const started = performance.now();
  await mkdir(dataDir, { recursive: true });
  const lock = await acquireLock(dataDir, opts.onInfo, { ownLockIsStale: options.ownLockIsStale === true });
  try {
    const journals = await listJournals(dataDir);
    const snapshots = await listSnapshots(dataDir);
    const hadMarker = await exists(join(dataDir, STORE_MARKER));
    if (journals.length === 0 && snapshots.length === 0 && hadMarker) {
      throw new LostHistoryError(
        `Data directory ${dataDir} held a store (${STORE_MARKER} is there) but has no journal-*.log and no snapshot-*.trig: ` +
          'its history is lost. Refusing to start an empty service in its place (that would create a new demo workspace and administrator token). ' +
          'Restore the journal and snapshot files from a backup; or, to start fresh deliberately, point WSM_DATA_DIR at a new, empty directory ' +
          `(or move this one aside, or remove ${join(dataDir, STORE_MARKER)}).`,
      );
    }
    if (!hadMarker) await writeMarker(dataDir);
    // Leftovers of a snapshot interrupted by a crash.
    for (const name of await readdir(dataDir)) {
      if (/^snapshot-\d{16}\.(nq|trig)\.tmp$|^journal-\d{16}\.log\.new$/.test(name)) await rm(join(dataDir, name), { force: true });
    }

    const snapshot = await loadLatestSnapshot(dataDir, opts.onWarning, options.snapshotCheckAsideMinBytes !== undefined ? { checkAsideMinBytes: options.snapshotCheckAsideMinBytes } : {});
    const raw = snapshot?.raw ?? new oxigraph.Store();
    const snapshotSeq = snapshot?.seq ?? 0;
    const changedSinceSnapshot = new ChangedGraphs();
    /** Conditional records after the snapshot whose condition did not hold. */
    const skipped: number[] = [];
    const snapshotDone = performance.now();
    const info: ReplayInfo = {
      snapshotSeq,
      snapshotQuads: raw.size,
      journalFiles: 0,
      recordsReplayed: 0,
      recordsSkipped: 0,
      cutBytes: 0,
      droppedBytes: 0,
      lastSeq: snapshotSeq,
      snapshotMillis: Math.round(snapshotDone - started),
      replayMillis: 0,
      millis: 0,
    };

    // Records of updates only are joined into fewer engine calls; a record held is applied by the next flush.
    const replayer = new RecordReplayer<{ record: JournalRecord; file: string }>(raw, ({ record, file }) => {
      replayRecord(raw, record, file, changedSinceSnapshot);
    });
    let appendTo: string | undefined;
    for (const [i, { firstSeq, file }] of journals.entries()) {
      const later = journals.slice(i + 1);
      // Wholly covered by the snapshot (the next file starts at or before the record after it): not needed.
      if (later.length > 0 && later[0]!.firstSeq <= snapshotSeq + 1) continue;
      info.journalFiles++;
      const contents = await readJournalFile(file);
      const records = contents.records;
      let stop = false;
      if (contents.validBytes < contents.size) {
        const offset = contents.validBytes;
        const laterBytes = await Promise.all(later.map(async (l) => (await open(l.file, 'r').then(async (h) => {
          try { return (await h.stat()).size; } finally { await h.close(); }
        }))));
        const laterTotal = laterBytes.reduce((a, b) => a + b, 0);
        if (contents.short && !contents.after && laterTotal === 0) {
          // A torn tail: the last write was cut short by a crash, so it was never fsynced nor acknowledged.
          opts.onWarning(`journal ${file}: ${contents.problem}; cutting ${contents.size - offset} bytes after the last good record (seq ${records.at(-1)?.seq ?? 'none'})`);
          await cutJournal(file, offset);
          info.cutBytes += contents.size - offset;
        } else {
          const what = [
            contents.after ? `${contents.after.count} valid record(s) (seq ${contents.after.firstSeq}-${contents.after.lastSeq}, the first at byte ${contents.after.firstOffset}) follow it in this file` : '',
            laterTotal > 0 ? `${later.length} later journal file(s) (${laterTotal} bytes) follow it` : '',
            // Records are fsynced before they are acknowledged: one whose bytes are all there was written whole.
            contents.short ? '' : 'the record there is whole (every byte its header announces is present), so it was written and acknowledged, then changed',
          ].filter(Boolean).join(', and ');
          if (!options.acceptJournalLoss) {
            throw new JournalCorruptError(
              `journal ${file} is damaged at byte ${offset} (${contents.problem}) and ${what}: this is not a torn tail, ` +
                `so refusing to start and leaving the file as it is. Restore the data directory from a backup, or accept losing ` +
                `every write after byte ${offset} (last good record: seq ${records.at(-1)?.seq ?? 'none'}) with: npm run wsm -- journal accept-loss`,
              file,
              offset,
            );
          }
          const keptAs = `${file}.dropped-at-${offset}`;
          await cutJournal(file, offset, keptAs);
          let dropped = contents.size - offset;
          for (const l of later) await rename(l.file, `${l.file}.dropped`);
          dropped += laterTotal;
          await fsyncDir(dataDir);
          info.droppedBytes += dropped;
          opts.onWarning(
            `accepted loss: journal ${file} cut at byte ${offset} (${contents.problem}); dropped ${contents.size - offset} bytes` +
              (contents.after ? ` holding ${contents.after.count} valid record(s) (seq ${contents.after.firstSeq}-${contents.after.lastSeq})` : '') +
              `, kept in ${keptAs}` +
              (later.length ? `; later journal files renamed aside: ${later.map((l) => `${l.file}.dropped`).join(', ')} (${laterTotal} bytes)` : '') +
              `. The store now ends at record ${records.at(-1)?.seq ?? firstSeq - 1}.`,
          );
          stop = true;
        }
      }
      for (const record of records) {
        if (record.seq <= info.lastSeq) {
          info.recordsSkipped++;
          continue;
        }
        if (record.seq !== info.lastSeq + 1) {
          throw new Error(
            `journal ${file}: record ${record.seq} follows ${info.lastSeq}; records in between are missing` +
              (snapshots.length > 0 && snapshotSeq === 0 ? ' (no snapshot could be loaded, see the warnings above)' : '') +
              ', refusing to open an incomplete history',
          );
        }
        const { condition, ops } = splitRecord(record.ops);
        if (condition || !replayer.hold({ record, file }, ops)) {
          replayer.flush();
          if (!replayRecord(raw, record, file, changedSinceSnapshot)) skipped.push(record.seq);
        } else {
          changedSinceSnapshot.addOps(ops);
        }
        info.recordsReplayed++;
        info.lastSeq = record.seq;
      }
      // Keep appending to the last file if it ends exactly where history ends.
      const endSeq = contents.records.at(-1)?.seq ?? firstSeq - 1;
      appendTo = endSeq === info.lastSeq ? file : undefined;
      if (stop) break;
    }
    replayer.flush();
    const journal = await Journal.open(appendTo ?? join(dataDir, journalFileName(info.lastSeq + 1)), info.lastSeq, {
      onWarning: opts.onWarning,
      onInfo: opts.onInfo,
      ...(options.journalFileOps ? { fileOps: options.journalFileOps } : {}),
      ...(options.journalProbeMs !== undefined ? { probeMs: options.journalProbeMs } : {}),
      ...(options.journalProbeMaxMs !== undefined ? { probeMaxMs: options.journalProbeMaxMs } : {}),
    });
    const done = performance.now();
    info.replayMillis = Math.round(done - snapshotDone);
    info.millis = Math.round(done - started);
    opts.onInfo(
      `store opened: snapshot seq ${snapshotSeq} (${info.snapshotQuads} quads, ${info.snapshotMillis} ms), ${info.recordsReplayed} journal records replayed` +
        ` (${info.replayMillis} ms), ${info.recordsSkipped} skipped, ${info.cutBytes} bytes cut, last seq ${info.lastSeq}, ${info.millis} ms`,
    );
    const snapshotBytes = snapshot ? (await stat(snapshot.file)).size : 0;
    // A version 1 snapshot (N-Quads) is not offered to readers of graphs: they read the TriG blocks.
    const coverage = snapshot?.file.endsWith('.trig') ? { file: snapshot.file, seq: snapshot.seq, changed: changedSinceSnapshot } : undefined;
    return new DurableStore(raw, journal, lock, dataDir, info, snapshotSeq, snapshotBytes, opts, coverage, skipped);
  } catch (err) {
    await lock.release();
    throw err;
  }
}
