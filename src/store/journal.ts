import { createHash } from 'node:crypto';
import { open, readFile, rename, rm, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fsyncDir } from './fsutil.js';
import { observeFsync } from '../metrics.js';
import type { WriteSink } from './embedded/oxigraph-store.js';
import { StoreUnavailableError, type ConditionOp, type JournalOp, type StoredOp } from './store.js';
import { HEADER_BYTES, checksum, lengthAndSeqBytes, recordContents } from './journal-records.js';

// Record layout: see `journal-records.ts`.

/** The payload's JSON up to its ops array (which follows), and after it. */
const timedOpen = (at: number) => `{"at":${at},"ops":`;
const TIMED_CLOSE = '}';

/**
 * Encodes one journal record: the bytes appended to the file for one write,
 * committed at `at` (ms since 1970).
 */
export function encodeRecord(seq: number, ops: readonly JournalOp[], at: number = Date.now()): Buffer {
  const payload = Buffer.from(`${timedOpen(at)}${JSON.stringify(ops)}${TIMED_CLOSE}`, 'utf8');
  const record = Buffer.allocUnsafe(HEADER_BYTES + payload.length);
  record.writeUInt32LE(payload.length, 0);
  checksum(lengthAndSeqBytes(payload.length, seq), payload).copy(record, 4);
  record.writeBigUInt64LE(BigInt(seq), 12);
  payload.copy(record, HEADER_BYTES);
  return record;
}

/**
 * A record holding a load of more characters than this is encoded in slices
 * of this many characters (`encodeRecordInSlices`). Small enough that a
 * slice's JSON stays a young-generation string: V8 allocates strings of more
 * than about 128 KB one by one in its large-object space, which makes
 * encoding a large record markedly slower (docs/figures.md).
 */
export const ENCODE_SLICE_CHARS = 1 << 15;

/** Longest stretch of encoding or checksumming between two event-loop turns. */
const ENCODE_TURN_MS = 5;

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * `encodeRecord`, the same bytes, made in bounded steps with an event-loop
 * turn between them: the JSON of a large load's text piece by piece (JSON
 * escaping is per character, so the pieces' escapes join into the whole
 * string's; a piece never ends inside a surrogate pair), then the checksum
 * piece by piece. An install journals tens of megabytes in one record.
 * The record is returned as its pieces, in order (never copied into one
 * buffer): the journal writes them one after another.
 */
export async function encodeRecordInSlices(seq: number, ops: readonly JournalOp[], at: number = Date.now()): Promise<Buffer[]> {
  let turnAt = performance.now();
  const turnIfDue = async () => {
    if (performance.now() - turnAt < ENCODE_TURN_MS) return;
    await nextTurn();
    turnAt = performance.now();
  };
  const pieces: Buffer[] = [Buffer.from(`${timedOpen(at)}[`)];
  for (const [i, op] of ops.entries()) {
    if (i > 0) pieces.push(Buffer.from(','));
    if (op.kind !== 'load' || op.data.length <= ENCODE_SLICE_CHARS) {
      pieces.push(Buffer.from(JSON.stringify(op), 'utf8'));
      continue;
    }
    const head = JSON.stringify({ kind: op.kind, graph: op.graph, format: op.format, data: '' });
    pieces.push(Buffer.from(head.slice(0, -2), 'utf8')); // up to and with the opening quote of data
    for (let at = 0; at < op.data.length;) {
      await turnIfDue();
      let end = Math.min(op.data.length, at + ENCODE_SLICE_CHARS);
      const last = op.data.charCodeAt(end - 1);
      if (end < op.data.length && last >= 0xd800 && last <= 0xdbff) end--;
      pieces.push(Buffer.from(JSON.stringify(op.data.slice(at, end)).slice(1, -1), 'utf8'));
      at = end;
    }
    pieces.push(Buffer.from('"}'));
  }
  pieces.push(Buffer.from(`]${TIMED_CLOSE}`));
  const length = pieces.reduce((n, p) => n + p.length, 0);
  const hash = createHash('sha256').update(lengthAndSeqBytes(length, seq));
  for (const piece of pieces) {
    await turnIfDue();
    hash.update(piece);
  }
  const header = Buffer.allocUnsafe(HEADER_BYTES);
  header.writeUInt32LE(length, 0);
  hash.digest().subarray(0, 8).copy(header, 4);
  header.writeBigUInt64LE(BigInt(seq), 12);
  return [header, ...pieces];
}

/** One decoded journal record. */
export interface JournalRecord {
  seq: number;
  /**
   * As written: records from before writes declared their graphs have none
   * (replay needs none); a conditional write's record starts with its condition.
   */
  ops: Array<StoredOp | ConditionOp>;
  /** When the record was committed (ms since 1970); absent in records from before records carried their time. */
  at?: number;
}

/** What scanning a journal buffer found. */
export interface JournalScan {
  records: JournalRecord[];
  /** Bytes from the start that hold whole, valid records. */
  validBytes: number;
  /** Why scanning stopped before the end, if it did. */
  problem?: string;
  /**
   * Scanning stopped at a record cut short (its header, or fewer payload
   * bytes than its header announces): what a crash mid-write leaves. A
   * record that is all there but fails its checksum, its sequence or its
   * decoding is damage, never a torn write.
   */
  short?: boolean;
}

/**
 * Decodes records from the start of a journal's bytes and stops at the first
 * one that is short, fails its checksum, breaks the sequence (each record's
 * seq must be the previous one's plus one) or does not hold a WriteOp[].
 */
export function scanJournal(bytes: Buffer): JournalScan {
  const records: JournalRecord[] = [];
  let offset = 0;
  let previousSeq: number | undefined;
  while (offset < bytes.length) {
    const at = `record at byte ${offset}`;
    if (bytes.length - offset < HEADER_BYTES) {
      return { records, validBytes: offset, problem: `${at}: torn header (${bytes.length - offset} bytes)`, short: true };
    }
    const length = bytes.readUInt32LE(offset);
    const seqBig = bytes.readBigUInt64LE(offset + 12);
    if (bytes.length - offset - HEADER_BYTES < length) {
      return { records, validBytes: offset, problem: `${at}: torn payload (${length} bytes announced, ${bytes.length - offset - HEADER_BYTES} present)`, short: true };
    }
    const payload = bytes.subarray(offset + HEADER_BYTES, offset + HEADER_BYTES + length);
    const seq = Number(seqBig);
    const expected = checksum(lengthAndSeqBytes(length, seq), payload);
    if (seqBig > BigInt(Number.MAX_SAFE_INTEGER) || !expected.equals(bytes.subarray(offset + 4, offset + 12))) {
      return { records, validBytes: offset, problem: `${at}: bad checksum` };
    }
    if (previousSeq !== undefined && seq !== previousSeq + 1) {
      return { records, validBytes: offset, problem: `${at}: sequence ${seq} does not follow ${previousSeq}` };
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload.toString('utf8'));
    } catch {
      return { records, validBytes: offset, problem: `${at}: payload is not JSON` };
    }
    const contents = recordContents(parsed);
    if (!contents) {
      return { records, validBytes: offset, problem: `${at}: payload is not a list of write ops` };
    }
    records.push({ seq, ...contents });
    previousSeq = seq;
    offset += HEADER_BYTES + length;
  }
  return { records, validBytes: offset };
}

/** Valid records found after a bad spot (which tells mid-file corruption from a torn tail). */
export interface RecordsAfter {
  count: number;
  /** Byte offset of the first valid record after the bad spot. */
  firstOffset: number;
  firstSeq: number;
  lastSeq: number;
}

/**
 * Looks for whole records with a matching checksum and a sequence number
 * above `afterSeq` anywhere in `bytes` from `from` on (every byte offset is
 * tried; cheap checks on the sequence and length come before the checksum).
 */
export function findRecordsAfter(bytes: Buffer, from: number, afterSeq: number): RecordsAfter | undefined {
  let found: RecordsAfter | undefined;
  // No more records can follow than fit in the bytes left.
  const maxSeq = afterSeq + Math.ceil(bytes.length / HEADER_BYTES) + 1;
  let offset = from;
  while (offset + HEADER_BYTES <= bytes.length) {
    const seq = bytes.readUInt32LE(offset + 16) * 2 ** 32 + bytes.readUInt32LE(offset + 12);
    const length = bytes.readUInt32LE(offset);
    if (seq > afterSeq && seq <= maxSeq && length <= bytes.length - offset - HEADER_BYTES) {
      const payload = bytes.subarray(offset + HEADER_BYTES, offset + HEADER_BYTES + length);
      if (checksum(lengthAndSeqBytes(length, seq), payload).equals(bytes.subarray(offset + 4, offset + 12))) {
        if (found) {
          found.count++;
          found.lastSeq = seq;
        } else {
          found = { count: 1, firstOffset: offset, firstSeq: seq, lastSeq: seq };
        }
        offset += HEADER_BYTES + length;
        continue;
      }
    }
    offset++;
  }
  return found;
}

/** A journal file as read from disk (never changed by reading). */
export interface JournalFileContents {
  records: JournalRecord[];
  /** Size of the file in bytes. */
  size: number;
  /** Bytes from the start that hold whole, valid records. */
  validBytes: number;
  /** Why reading stopped before the end, if it did. */
  problem?: string;
  /** Reading stopped at a record cut short (see `JournalScan.short`). */
  short?: boolean;
  /** Valid records after the bad spot: present means the damage is not a torn tail. */
  after?: RecordsAfter;
}

/**
 * Reads every valid record of a journal file from its start up to the first
 * bad spot, and looks for valid records after that spot. The file is not
 * changed; see `cutJournal`.
 */
export async function readJournalFile(path: string): Promise<JournalFileContents> {
  const bytes = await readFile(path);
  const scan = scanJournal(bytes);
  const contents: JournalFileContents = { records: scan.records, size: bytes.length, validBytes: scan.validBytes, problem: scan.problem, short: scan.short === true };
  if (scan.validBytes < bytes.length) {
    contents.after = findRecordsAfter(bytes, scan.validBytes + 1, scan.records.at(-1)?.seq ?? 0);
  }
  return contents;
}

/**
 * Cuts a journal file at `offset` (truncate, fsync). With `keepCutBytesIn`,
 * the bytes cut off are first written (and fsynced) to that file, so that
 * nothing is destroyed without a copy.
 */
export async function cutJournal(path: string, offset: number, keepCutBytesIn?: string): Promise<void> {
  if (keepCutBytesIn) {
    const bytes = await readFile(path);
    const copy = await open(keepCutBytesIn, 'w');
    try {
      await copy.writeFile(bytes.subarray(offset));
      await copy.sync();
    } finally {
      await copy.close();
    }
  }
  const handle = await open(path, 'r+');
  try {
    await handle.truncate(offset);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await fsyncDir(dirname(path));
}


/** Name of the journal file whose first record has sequence number `firstSeq`. */
export function journalFileName(firstSeq: number): string {
  return `journal-${String(firstSeq).padStart(16, '0')}.log`;
}

/**
 * The file operations the journal performs on its files, in one place so
 * that tests can make them fail as a full or failing disk does (through
 * `DurableStoreOptions.journalFileOps`); the service uses `nodeJournalFileOps`.
 */
export interface JournalFileOps {
  /** Opens a file for appending (created if missing; every write goes to the end). */
  openForAppend(path: string): Promise<FileHandle>;
  /** Writes `length` bytes of `bytes` from `offset` at the end of the file; resolves with how many were written. */
  write(handle: FileHandle, bytes: Buffer, offset: number, length: number): Promise<number>;
  /** fdatasync. */
  datasync(handle: FileHandle): Promise<void>;
  /** Cuts the file to `length` bytes. */
  truncate(handle: FileHandle, length: number): Promise<void>;
}

export const nodeJournalFileOps: JournalFileOps = {
  openForAppend: (path) => open(path, 'a'),
  write: async (handle, bytes, offset, length) => (await handle.write(bytes, offset, length, null)).bytesWritten,
  datasync: (handle) => handle.datasync(),
  truncate: (handle, length) => handle.truncate(length),
};

export interface JournalOptions {
  /** Replaces some file operations (tests inject ENOSPC, EIO). */
  fileOps?: Partial<JournalFileOps>;
  /** A warning: the journal could not be written (once per outage), or a repair failed. */
  onWarning?: (message: string) => void;
  /** The journal can be written again. */
  onInfo?: (message: string) => void;
  /** First wait before the journal probes itself after a failure; doubles per failed probe. Default 1 s. */
  probeMs?: number;
  /** Longest wait between probes. Default 30 s. */
  probeMaxMs?: number;
}

type RecordEntry = { kind: 'record'; seq: number; bytes: Buffer | Promise<Buffer[]>; resolve: () => void; reject: (err: Error) => void };
type QueueEntry = RecordEntry | { kind: 'switch'; path: string; resolve: () => void; reject: (err: Error) => void };

/** Counters for logs and tests. */
export interface JournalStats {
  /** Records appended (each is one write). */
  appends: number;
  /** fsync calls made on journal files; with group commit far fewer than appends. */
  fsyncs: number;
  /** Sequence number of the last appended record. */
  lastSeq: number;
  /** Bytes appended to the current file (including bytes still queued). */
  currentFileBytes: number;
  /** The file new records go to (after queued rotations). */
  currentFile: string;
  /** Batches whose write or fsync failed since the journal was opened. */
  failures: number;
}

/** Whether the journal can take writes; see `Journal.health`. */
export interface JournalHealth {
  writable: boolean;
  /** Why not (the last failure), for logs and operators. */
  reason?: string;
  /** When the journal stopped being writable. */
  since?: Date;
  /** Seconds until the journal tries again by itself (at least 1). */
  retryAfterSeconds?: number;
}

const errnoCode = (err: unknown): string | undefined => {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
};

/**
 * The append-only journal: the durable side of the store (`WriteSink`).
 *
 * Group commit: `append` encodes the record and queues it synchronously, so
 * record order is call order. One drain loop at a time takes everything
 * queued, writes it with one write and one fdatasync, then resolves all of
 * those appends together; whatever arrives while that fsync is in flight
 * forms the next batch. Appends made in the same tick all share one fsync.
 *
 * Failure (a full disk, an I/O error): the store applies a write only after
 * its record is fsynced, so a failed batch rejects its appends with
 * `StoreUnavailableError` and nothing of them is visible. Every record
 * queued behind it fails too (its sequence number would not follow the last
 * record on disk) and numbering resumes after the last fsynced record.
 * Before anything more is written, the file is cut back to the end of the
 * last fsynced record (so no part of a failed record stays to be mistaken
 * for damage at the next start) and that cut is fsynced. After a failed
 * fsync the file is not written again: the kernel may have dropped the
 * pages it could not write, so what the file holds is no longer known;
 * once it is cut, records go on in a new file (`journal-<next seq>.log`).
 * The journal counts as unwritable (`health()`) from a failure until a
 * batch is written and fsynced again: every later write tries, and the
 * journal probes itself with an empty record (1 s, then doubling waits up
 * to 30 s), so it becomes writable again without a client's write once
 * the disk has room.
 */
export class Journal implements WriteSink {
  private readonly queue: QueueEntry[] = [];
  private draining: Promise<void> | null = null;
  private closed = false;
  private seq: number;
  /** Sequence number of the last fsynced record. */
  private durableSeq: number;
  /** Size of the current file up to the end of its last fsynced record. */
  private durableBytes: number;
  private appends = 0;
  private fsyncs = 0;
  private failures = 0;
  private fileBytes: number;
  private targetFile: string;
  private currentFile: string;
  private readonly ops: JournalFileOps;
  private readonly opts: Required<Omit<JournalOptions, 'fileOps'>>;
  /** Set from a failed batch until a batch is written and fsynced. */
  private failure: { error: StoreUnavailableError; since: Date } | null = null;
  /** The current file may hold part of a failed batch after `durableBytes`: cut it before writing. */
  private cutNeeded = false;
  /** Records must go on in a new file (after a failed fsync, or a rotation that failed). */
  private newFileNeeded = false;
  private probeTimer: NodeJS.Timeout | null = null;
  private probing = false;
  private probeWait: number;
  private nextProbeAt = 0;
  /** Commit time given to the last record: never goes back, so records' times follow their order. */
  private lastAt = 0;

  private constructor(
    private handle: FileHandle,
    path: string,
    size: number,
    lastSeq: number,
    ops: JournalFileOps,
    options: JournalOptions,
  ) {
    this.seq = lastSeq;
    this.durableSeq = lastSeq;
    this.durableBytes = size;
    this.fileBytes = size;
    this.targetFile = path;
    this.currentFile = path;
    this.ops = ops;
    this.opts = {
      onWarning: options.onWarning ?? (() => {}),
      onInfo: options.onInfo ?? (() => {}),
      probeMs: options.probeMs ?? 1000,
      probeMaxMs: options.probeMaxMs ?? 30_000,
    };
    this.probeWait = this.opts.probeMs;
  }

  /**
   * Opens (creating if needed) a journal file for appending. `lastSeq` is the
   * sequence number of the last record already durable (in this file, an
   * older one or a snapshot); the next append gets `lastSeq + 1`. The file
   * should already be clean (see `readJournalFile`).
   */
  static async open(path: string, lastSeq: number, options: JournalOptions = {}): Promise<Journal> {
    const ops = { ...nodeJournalFileOps, ...options.fileOps };
    const handle = await ops.openForAppend(path);
    try {
      await ops.datasync(handle);
      await fsyncDir(dirname(path));
      const { size } = await handle.stat();
      return new Journal(handle, path, size, lastSeq, ops, options);
    } catch (err) {
      await handle.close();
      throw err;
    }
  }

  /** Sequence number of the last appended record (assigned synchronously by `append`). */
  get lastSeq(): number {
    return this.seq;
  }

  /** Sequence number of the last record known to be on disk (fsynced): every applied write's record is at or before it. */
  get lastDurableSeq(): number {
    return this.durableSeq;
  }

  stats(): JournalStats {
    return {
      appends: this.appends,
      fsyncs: this.fsyncs,
      lastSeq: this.seq,
      currentFileBytes: this.fileBytes,
      currentFile: this.targetFile,
      failures: this.failures,
    };
  }

  /** Whether the journal can take writes: false from a failed batch until one is written and fsynced again. */
  health(): JournalHealth {
    if (!this.failure) return { writable: true };
    return {
      writable: false,
      reason: this.failure.error.message,
      since: this.failure.since,
      retryAfterSeconds: Math.max(1, Math.ceil((this.nextProbeAt - Date.now()) / 1000)),
    };
  }

  /**
   * Appends one record holding `ops`; resolves once it is fsynced, rejects
   * with `StoreUnavailableError` if it could not be. The sequence number is
   * taken synchronously, so record order is call order.
   */
  append(ops: readonly JournalOp[]): Promise<void> {
    if (this.closed) return Promise.reject(new Error('journal is closed'));
    // A large record (an install) is encoded in slices; its place in the queue is taken now.
    const large = ops.some((op) => op.kind === 'load' && op.data.length > ENCODE_SLICE_CHARS);
    const seq = ++this.seq;
    const at = this.lastAt = Math.max(Date.now(), this.lastAt);
    const bytes = large ? encodeRecordInSlices(seq, ops, at) : encodeRecord(seq, ops, at);
    this.appends++;
    this.fileBytes += Buffer.isBuffer(bytes) ? bytes.length : ops.reduce((n, op) => n + (op.kind === 'load' ? op.data.length : op.kind === 'update' ? op.sparql.length : op.ask.length), 0);
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ kind: 'record', seq, bytes, resolve, reject });
      this.schedule();
    });
  }

  /**
   * Rotates: records appended before this call go to the current file,
   * records appended after it go to `path` (created empty). Resolves once the
   * earlier records are fsynced and the new file is created and its
   * directory fsynced. `path` must be `journalFileName(lastSeq + 1)` beside
   * the current file. If it fails, the next write tries to create it again
   * (records never go on in the old file past a requested rotation).
   */
  rotate(path: string): Promise<void> {
    if (this.closed) return Promise.reject(new Error('journal is closed'));
    this.fileBytes = 0;
    this.targetFile = path;
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ kind: 'switch', path, resolve, reject });
      this.schedule();
    });
  }

  /** Resolves once nothing is queued or being written. */
  async idle(): Promise<void> {
    while (this.draining) await this.draining;
  }

  /** Waits for every queued record to be fsynced (or to fail), then closes the file. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.probeTimer) clearTimeout(this.probeTimer);
    this.probeTimer = null;
    await this.idle();
    await this.handle.close();
  }

  private schedule(): void {
    if (this.draining) return;
    // Start on a microtask so that appends made in the same tick join the first batch.
    this.draining = Promise.resolve().then(() => this.drain());
  }

  private async drain(): Promise<void> {
    for (;;) {
      if (this.queue.length === 0) {
        // Cleared in the same tick as the emptiness check: no append can slip between.
        this.draining = null;
        return;
      }
      const head = this.queue[0]!;
      if (head.kind === 'switch') {
        this.queue.shift();
        const expected = join(dirname(this.currentFile), journalFileName(this.durableSeq + 1));
        if (head.path !== expected) {
          head.reject(new Error(`journal: rotation to ${head.path} asked after record ${this.durableSeq}; the next file must be ${expected}`));
          continue;
        }
        this.newFileNeeded = true;
        try {
          await this.repair();
          head.resolve();
        } catch (err) {
          // `newFileNeeded` stays: the next batch tries again to create the file, and fails if it cannot.
          this.targetFile = this.currentFile;
          const error = this.unavailable(err, 'creating the next journal file');
          this.noteFailure(error);
          head.reject(error);
        }
        continue;
      }
      let n = 0;
      while (n < this.queue.length && this.queue[n]!.kind === 'record') n++;
      const batch = this.queue.splice(0, n) as RecordEntry[];
      let stage = 'encode';
      try {
        const chunks = (await Promise.all(batch.map((e) => e.bytes))).flat();
        const length = chunks.reduce((n, c) => n + c.length, 0);
        stage = 'repair';
        await this.repair();
        stage = 'write';
        await this.writeAll(chunks);
        stage = 'fsync';
        const started = process.hrtime.bigint();
        await this.ops.datasync(this.handle);
        observeFsync(Number(process.hrtime.bigint() - started) / 1e9);
        this.fsyncs++;
        this.durableBytes += length;
        this.durableSeq = batch.at(-1)!.seq;
        if (this.failure) {
          this.opts.onInfo(`journal ${this.currentFile}: writable again after ${Math.round((Date.now() - this.failure.since.getTime()) / 1000)} s; writes are accepted`);
          this.failure = null;
          this.probeWait = this.opts.probeMs;
        }
        for (const entry of batch) entry.resolve();
      } catch (err) {
        if (stage === 'write') this.cutNeeded = true;
        if (stage === 'fsync') {
          // The kernel may have dropped the pages it could not write: this file is cut and not written again.
          this.cutNeeded = true;
          this.newFileNeeded = true;
        }
        await this.failBatch(batch, this.unavailable(err, stage === 'repair' ? 'repairing the journal after an earlier failure' : `journal ${stage}`));
      }
    }
  }

  /** Rejects a failed batch and everything queued behind it, and numbers on from the last fsynced record. */
  private async failBatch(batch: RecordEntry[], error: StoreUnavailableError): Promise<void> {
    this.failures++;
    const behind = this.queue.splice(0);
    this.seq = this.durableSeq;
    this.fileBytes = this.durableBytes;
    this.targetFile = this.currentFile;
    this.noteFailure(error);
    for (const entry of [...batch, ...behind]) entry.reject(error);
    // Right away rather than before the next write: no part of a failed record stays in the file.
    try {
      await this.repair();
    } catch (err) {
      this.opts.onWarning(`journal ${this.currentFile}: could not yet cut the failed records off (${errnoCode(err) ?? (err as Error).message}); tried again before the next write`);
    }
  }

  private noteFailure(error: StoreUnavailableError): void {
    if (!this.failure) {
      this.failure = { error, since: new Date() };
      this.opts.onWarning(`${error.message}; writes answer 503 and change nothing until a journal write succeeds again (every write tries, and the journal probes itself)`);
    } else {
      this.failure.error = error;
    }
    this.scheduleProbe();
    error.retryAfterSeconds = this.health().retryAfterSeconds ?? 1;
  }

  /** An empty record written after a wait, to find out whether the journal can be written again without waiting for a client's write. */
  private scheduleProbe(): void {
    if (this.closed || this.probeTimer || this.probing || !this.failure) return;
    const wait = this.probeWait;
    this.nextProbeAt = Date.now() + wait;
    this.probeTimer = setTimeout(() => {
      this.probeTimer = null;
      if (this.closed || !this.failure) return;
      this.probing = true;
      this.append([]).then(
        () => { this.probing = false; },
        () => {
          this.probing = false;
          this.probeWait = Math.min(this.probeWait * 2, this.opts.probeMaxMs);
          this.scheduleProbe();
        },
      );
    }, wait);
    this.probeTimer.unref();
  }

  /**
   * Makes the current file fit for appending after a failure: cuts it back
   * to its last fsynced record and fsyncs that; then, if needed, goes on in
   * a new file. The new file is only started once the cut is durable:
   * otherwise the old file could still hold, at the next start, records
   * numbered like the new file's.
   */
  private async repair(): Promise<void> {
    if (this.cutNeeded) {
      await this.ops.truncate(this.handle, this.durableBytes);
      await this.ops.datasync(this.handle);
      this.cutNeeded = false;
    }
    if (this.newFileNeeded) {
      const path = join(dirname(this.currentFile), journalFileName(this.durableSeq + 1));
      // Created under a temporary name and renamed: the name appears only for a file that is ready,
      // and replaces a file of that name that holds nothing durable (a failed first batch).
      const temp = `${path}.new`;
      const next = await this.ops.openForAppend(temp);
      try {
        await this.ops.truncate(next, 0);
        await this.ops.datasync(next);
        await rename(temp, path);
        await fsyncDir(dirname(path));
      } catch (err) {
        await next.close().catch(() => {});
        await rm(temp, { force: true }).catch(() => {});
        throw err;
      }
      const previous = this.handle;
      this.handle = next;
      this.currentFile = path;
      this.targetFile = path;
      this.durableBytes = 0;
      this.newFileNeeded = false;
      await previous.close().catch(() => {});
    }
  }

  /**
   * Writes the chunks in order: runs of small ones joined into one write,
   * a large one (a piece of an install's record) written as it is, so no
   * step copies a whole large record.
   */
  private async writeAll(chunks: Buffer[]): Promise<void> {
    const JOIN_BELOW = 1 << 20;
    for (let i = 0; i < chunks.length;) {
      let j = i + 1;
      let size = chunks[i]!.length;
      while (j < chunks.length && size + chunks[j]!.length <= JOIN_BELOW) size += chunks[j++]!.length;
      const bytes = j - i === 1 ? chunks[i]! : Buffer.concat(chunks.slice(i, j), size);
      let offset = 0;
      while (offset < bytes.length) offset += await this.ops.write(this.handle, bytes, offset, bytes.length - offset);
      i = j;
    }
  }

  private unavailable(err: unknown, what: string): StoreUnavailableError {
    const code = errnoCode(err);
    const message = `journal ${this.currentFile}: ${what} failed (${code ?? (err instanceof Error ? err.message : String(err))})`;
    return new StoreUnavailableError(message, code, { cause: err });
  }
}
