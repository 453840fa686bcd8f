import { createHash } from 'node:crypto';
import { open, readFile, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { fsyncDir } from './fsutil.js';
import { observeFsync } from '../metrics.js';
import type { WriteSink } from './oxigraph-store.js';
import type { StoredOp, WriteOp } from './store.js';

/*
 * Record layout (little endian):
 *   [0, 4)    u32  payload length in bytes
 *   [4, 12)   8 bytes checksum: first 8 bytes of sha256(length ‖ seq ‖ payload)
 *   [12, 20)  u64  sequence number (1, 2, 3, ... over the whole history)
 *   [20, ..)  payload: UTF-8 JSON of the WriteOp[] of one write
 */
const HEADER_BYTES = 20;

function checksum(lengthAndSeq: Buffer, payload: Buffer): Buffer {
  return createHash('sha256').update(lengthAndSeq).update(payload).digest().subarray(0, 8);
}

function lengthAndSeqBytes(length: number, seq: number): Buffer {
  const b = Buffer.alloc(12);
  b.writeUInt32LE(length, 0);
  b.writeBigUInt64LE(BigInt(seq), 4);
  return b;
}

/** Encodes one journal record: the bytes appended to the file for one write. */
export function encodeRecord(seq: number, ops: WriteOp[]): Buffer {
  const payload = Buffer.from(JSON.stringify(ops), 'utf8');
  const record = Buffer.allocUnsafe(HEADER_BYTES + payload.length);
  record.writeUInt32LE(payload.length, 0);
  checksum(lengthAndSeqBytes(payload.length, seq), payload).copy(record, 4);
  record.writeBigUInt64LE(BigInt(seq), 12);
  payload.copy(record, HEADER_BYTES);
  return record;
}

/** A record holding a load of more characters than this is encoded in slices (`encodeRecordInSlices`). */
export const ENCODE_SLICE_CHARS = 1 << 20;

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * `encodeRecord`, the same bytes, made in bounded steps with an event-loop
 * turn between them: the JSON of a large load's text piece by piece (JSON
 * escaping is per character, so the pieces' escapes join into the whole
 * string's; a piece never ends inside a surrogate pair), then the checksum
 * piece by piece. An install journals tens of megabytes in one record.
 */
export async function encodeRecordInSlices(seq: number, ops: WriteOp[]): Promise<Buffer> {
  const pieces: Buffer[] = [Buffer.from('[')];
  for (const [i, op] of ops.entries()) {
    if (i > 0) pieces.push(Buffer.from(','));
    if (op.kind !== 'load' || op.data.length <= ENCODE_SLICE_CHARS) {
      pieces.push(Buffer.from(JSON.stringify(op), 'utf8'));
      continue;
    }
    const head = JSON.stringify({ kind: op.kind, graph: op.graph, format: op.format, data: '' });
    pieces.push(Buffer.from(head.slice(0, -2), 'utf8')); // up to and with the opening quote of data
    for (let at = 0; at < op.data.length;) {
      await nextTurn();
      let end = Math.min(op.data.length, at + ENCODE_SLICE_CHARS);
      const last = op.data.charCodeAt(end - 1);
      if (end < op.data.length && last >= 0xd800 && last <= 0xdbff) end--;
      pieces.push(Buffer.from(JSON.stringify(op.data.slice(at, end)).slice(1, -1), 'utf8'));
      at = end;
    }
    pieces.push(Buffer.from('"}'));
  }
  pieces.push(Buffer.from(']'));
  const length = pieces.reduce((n, p) => n + p.length, 0);
  const hash = createHash('sha256').update(lengthAndSeqBytes(length, seq));
  for (const [i, piece] of pieces.entries()) {
    if (piece.length > 64 * 1024 && i > 0) await nextTurn();
    hash.update(piece);
  }
  const header = Buffer.allocUnsafe(HEADER_BYTES);
  header.writeUInt32LE(length, 0);
  hash.digest().subarray(0, 8).copy(header, 4);
  header.writeBigUInt64LE(BigInt(seq), 12);
  return Buffer.concat([header, ...pieces], HEADER_BYTES + length);
}

/** One decoded journal record. */
export interface JournalRecord {
  seq: number;
  /** As written: records from before writes declared their graphs have none (replay needs none). */
  ops: StoredOp[];
}

/** What scanning a journal buffer found. */
export interface JournalScan {
  records: JournalRecord[];
  /** Bytes from the start that hold whole, valid records. */
  validBytes: number;
  /** Why scanning stopped before the end, if it did. */
  problem?: string;
}

function isWriteOp(value: unknown): value is WriteOp {
  if (typeof value !== 'object' || value === null) return false;
  const op = value as Record<string, unknown>;
  if (op.kind === 'update') return typeof op.sparql === 'string';
  if (op.kind === 'load') return typeof op.graph === 'string' && typeof op.format === 'string' && typeof op.data === 'string';
  return false;
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
      return { records, validBytes: offset, problem: `${at}: torn header (${bytes.length - offset} bytes)` };
    }
    const length = bytes.readUInt32LE(offset);
    const seqBig = bytes.readBigUInt64LE(offset + 12);
    if (bytes.length - offset - HEADER_BYTES < length) {
      return { records, validBytes: offset, problem: `${at}: torn payload (${length} bytes announced, ${bytes.length - offset - HEADER_BYTES} present)` };
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
    let ops: unknown;
    try {
      ops = JSON.parse(payload.toString('utf8'));
    } catch {
      return { records, validBytes: offset, problem: `${at}: payload is not JSON` };
    }
    if (!Array.isArray(ops) || !ops.every(isWriteOp)) {
      return { records, validBytes: offset, problem: `${at}: payload is not a list of write ops` };
    }
    records.push({ seq, ops });
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
  const contents: JournalFileContents = { records: scan.records, size: bytes.length, validBytes: scan.validBytes, problem: scan.problem };
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

type QueueEntry =
  | { kind: 'record'; bytes: Buffer | Promise<Buffer>; resolve: () => void; reject: (err: Error) => void }
  | { kind: 'switch'; path: string; resolve: () => void; reject: (err: Error) => void };

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
}

/**
 * The append-only journal: the durable side of the store (`WriteSink`).
 *
 * Group commit: `append` encodes the record and queues it synchronously, so
 * record order is call order. One drain loop at a time takes everything
 * queued, writes it with one write and one fdatasync, then resolves all of
 * those appends together; whatever arrives while that fsync is in flight
 * forms the next batch. Appends made in the same tick all share one fsync.
 *
 * After an I/O error the journal fails for good: that append and every later
 * one reject, because memory already holds changes that are not on disk.
 */
export class Journal implements WriteSink {
  private readonly queue: QueueEntry[] = [];
  private draining: Promise<void> | null = null;
  private failure: Error | null = null;
  private closed = false;
  private seq: number;
  private appends = 0;
  private fsyncs = 0;
  private fileBytes: number;
  private targetFile: string;

  private constructor(
    private handle: FileHandle,
    path: string,
    size: number,
    lastSeq: number,
  ) {
    this.seq = lastSeq;
    this.fileBytes = size;
    this.targetFile = path;
  }

  /**
   * Opens (creating if needed) a journal file for appending. `lastSeq` is the
   * sequence number of the last record already durable (in this file, an
   * older one or a snapshot); the next append gets `lastSeq + 1`. The file
   * should already be clean (see `readJournalFile`).
   */
  static async open(path: string, lastSeq: number): Promise<Journal> {
    const handle = await open(path, 'a');
    try {
      await handle.sync();
      await fsyncDir(dirname(path));
      const { size } = await handle.stat();
      return new Journal(handle, path, size, lastSeq);
    } catch (err) {
      await handle.close();
      throw err;
    }
  }

  /** Sequence number of the last appended record (assigned synchronously by `append`). */
  get lastSeq(): number {
    return this.seq;
  }

  stats(): JournalStats {
    return {
      appends: this.appends,
      fsyncs: this.fsyncs,
      lastSeq: this.seq,
      currentFileBytes: this.fileBytes,
      currentFile: this.targetFile,
    };
  }

  /**
   * Appends one record holding `ops`; resolves once it is fsynced. The
   * sequence number is taken synchronously, so record order is call order.
   */
  append(ops: WriteOp[]): Promise<void> {
    if (this.closed) return Promise.reject(new Error('journal is closed'));
    if (this.failure) return Promise.reject(this.failure);
    // A large record (an install) is encoded in slices; its place in the queue is taken now.
    const large = ops.some((op) => op.kind === 'load' && op.data.length > ENCODE_SLICE_CHARS);
    const bytes = large ? encodeRecordInSlices(++this.seq, ops) : encodeRecord(++this.seq, ops);
    this.appends++;
    this.fileBytes += Buffer.isBuffer(bytes) ? bytes.length : ops.reduce((n, op) => n + (op.kind === 'load' ? op.data.length : op.sparql.length), 0);
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ kind: 'record', bytes, resolve, reject });
      this.schedule();
    });
  }

  /**
   * Rotates: records appended before this call go to the current file,
   * records appended after it go to `path` (created empty). Resolves once the
   * earlier records are fsynced, the old file is closed and the new one is
   * created and its directory fsynced.
   */
  rotate(path: string): Promise<void> {
    if (this.closed) return Promise.reject(new Error('journal is closed'));
    if (this.failure) return Promise.reject(this.failure);
    this.fileBytes = 0;
    this.targetFile = path;
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ kind: 'switch', path, resolve, reject });
      this.schedule();
    });
  }

  /** Waits for every queued record to be fsynced, then closes the file. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    while (this.draining) await this.draining;
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
      if (this.failure) {
        this.queue.shift();
        head.reject(this.failure);
        continue;
      }
      if (head.kind === 'switch') {
        this.queue.shift();
        try {
          const next = await open(head.path, 'a');
          await next.sync();
          await fsyncDir(dirname(head.path));
          const previous = this.handle;
          this.handle = next;
          await previous.close();
          head.resolve();
        } catch (err) {
          this.failure = asError(err, 'journal rotation failed');
          head.reject(this.failure);
        }
        continue;
      }
      let n = 0;
      while (n < this.queue.length && this.queue[n]!.kind === 'record') n++;
      const batch = this.queue.splice(0, n) as Extract<QueueEntry, { kind: 'record' }>[];
      try {
        const records = await Promise.all(batch.map((e) => e.bytes));
        await writeAll(this.handle, records.length === 1 ? records[0]! : Buffer.concat(records));
        const started = process.hrtime.bigint();
        await this.handle.datasync();
        observeFsync(Number(process.hrtime.bigint() - started) / 1e9);
        this.fsyncs++;
        for (const entry of batch) entry.resolve();
      } catch (err) {
        this.failure = asError(err, 'journal write failed');
        for (const entry of batch) entry.reject(this.failure);
      }
    }
  }
}

async function writeAll(handle: FileHandle, bytes: Buffer): Promise<void> {
  let offset = 0;
  while (offset < bytes.length) {
    const { bytesWritten } = await handle.write(bytes, offset, bytes.length - offset, null);
    offset += bytesWritten;
  }
}

function asError(err: unknown, context: string): Error {
  return new Error(`${context}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}
