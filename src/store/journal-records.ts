import { createHash } from 'node:crypto';
import { closeSync, openSync, readdirSync, readSync } from 'node:fs';
import { join } from 'node:path';
import type { ConditionOp, RdfFormat, StoredOp, WriteOp } from './store.js';

/*
 * The journal's record layout (little endian), and a reader of a journal
 * directory's records that holds one record in memory at a time and reads
 * a load's text out of it piece by piece. Kept apart from `journal.ts` (the
 * writer) so a query worker can read records without loading the writer's
 * dependencies.
 *
 *   [0, 4)    u32  payload length in bytes
 *   [4, 12)   8 bytes checksum: first 8 bytes of sha256(length ‖ seq ‖ payload)
 *   [12, 20)  u64  sequence number (1, 2, 3, ... over the whole history)
 *   [20, ..)  payload: UTF-8 JSON of one write, in one of two forms told apart
 *             by its first byte:
 *               `{"at":<ms>,"ops":[...]}`  the write's ops and the time its record
 *                                          was committed (ms since 1970, UTC)
 *               `[...]`                    the ops alone (records written before
 *                                          records carried their time; still read)
 *             The ops are the WriteOp[] of the write; a conditional write's list
 *             starts with its ConditionOp (`{ kind: 'condition', ask, expect }`).
 *
 * The time sits inside the payload, so the checksum covers it and the header
 * (and every reader that walks records by their header) is unchanged.
 */
export const HEADER_BYTES = 20;

/** Journal files are named by the seq of their first record. */
export const JOURNAL_FILE = /^journal-(\d{16})\.log$/;

export function checksum(lengthAndSeq: Buffer, payload: Buffer): Buffer {
  return createHash('sha256').update(lengthAndSeq).update(payload).digest().subarray(0, 8);
}

export function lengthAndSeqBytes(length: number, seq: number): Buffer {
  const b = Buffer.alloc(12);
  b.writeUInt32LE(length, 0);
  b.writeBigUInt64LE(BigInt(seq), 4);
  return b;
}

export function isWriteOp(value: unknown): value is WriteOp {
  if (typeof value !== 'object' || value === null) return false;
  const op = value as Record<string, unknown>;
  if (op.kind === 'update') return typeof op.sparql === 'string';
  if (op.kind === 'load') return typeof op.graph === 'string' && typeof op.format === 'string' && typeof op.data === 'string';
  return false;
}

function isConditionOp(value: unknown): value is ConditionOp {
  if (typeof value !== 'object' || value === null) return false;
  const op = value as Record<string, unknown>;
  return op.kind === 'condition' && typeof op.ask === 'string' && typeof op.expect === 'boolean';
}

/** A record's payload: write ops, the first of which may be the write's condition. */
export function isRecordPayload(value: unknown): value is Array<StoredOp | ConditionOp> {
  return Array.isArray(value) && value.every((op, i) => isWriteOp(op) || (i === 0 && isConditionOp(op)));
}

/** A decoded payload: its ops, and its commit time when the record has one. */
export interface RecordContents {
  ops: Array<StoredOp | ConditionOp>;
  /** When the record was committed (ms since 1970); absent in records from before records carried it. */
  at?: number;
}

/** A parsed payload (either form, see the layout above), or undefined when it is neither. */
export function recordContents(value: unknown): RecordContents | undefined {
  if (isRecordPayload(value)) return { ops: value };
  if (typeof value !== 'object' || value === null) return undefined;
  const { at, ops } = value as Record<string, unknown>;
  if (!Number.isSafeInteger(at) || !isRecordPayload(ops)) return undefined;
  return { ops, at: at as number };
}

const TIMED_PREFIX = Buffer.from('{"at":');

/**
 * The commit time of a record from the first bytes of its payload, without
 * parsing the rest (a record can hold tens of megabytes); undefined for a
 * record without one (the older form).
 */
export function recordTime(payload: Buffer): number | undefined {
  if (!payload.subarray(0, TIMED_PREFIX.length).equals(TIMED_PREFIX)) return undefined;
  let end = TIMED_PREFIX.length;
  while (end < payload.length && end < TIMED_PREFIX.length + 20 && payload[end]! >= 0x30 && payload[end]! <= 0x39) end++;
  if (end === TIMED_PREFIX.length || payload[end] !== 0x2c) return undefined;
  const at = Number(payload.toString('latin1', TIMED_PREFIX.length, end));
  return Number.isSafeInteger(at) ? at : undefined;
}

/** A record's condition (its first op, when it has one) and its write ops. */
export function splitRecord(ops: ReadonlyArray<StoredOp | ConditionOp>): { condition: ConditionOp | null; ops: StoredOp[] } {
  const first = ops[0];
  if (first && first.kind === 'condition') return { condition: first, ops: ops.slice(1) as StoredOp[] };
  return { condition: null, ops: ops as StoredOp[] };
}

/** The records of a journal directory from `afterSeq + 1` to `throughSeq` could not all be read. */
export class JournalGapError extends Error {}

/**
 * The payloads of the records with seq in `(afterSeq, throughSeq]` of the
 * journal files in `dir`, in order, each checked against its checksum and
 * read one at a time (synchronously: meant for a worker thread; `payloadOps`
 * reads their ops). Throws `JournalGapError` when one of them is missing or
 * does not read back whole (a file removed meanwhile, say): the caller then
 * gets the data elsewhere. Records past `throughSeq` (being written now) are
 * never read.
 */
export function* journalPayloads(dir: string, afterSeq: number, throughSeq: number): Generator<{ seq: number; payload: Buffer; file: string }> {
  if (throughSeq <= afterSeq) return;
  const files = readdirSync(dir)
    .map((name) => ({ name, m: JOURNAL_FILE.exec(name) }))
    .filter((f): f is { name: string; m: RegExpExecArray } => f.m !== null)
    .map((f) => ({ firstSeq: Number(f.m[1]), file: join(dir, f.name) }))
    .sort((a, b) => a.firstSeq - b.firstSeq);
  let next = afterSeq + 1;
  for (const [i, { file }] of files.entries()) {
    const following = files[i + 1];
    // Wholly before the records wanted.
    if (following && following.firstSeq <= next) continue;
    let fd: number;
    try {
      fd = openSync(file, 'r');
    } catch (err) {
      throw new JournalGapError(`journal ${file} cannot be read: ${(err as Error).message}`);
    }
    try {
      const header = Buffer.alloc(HEADER_BYTES);
      for (let position = 0; next <= throughSeq;) {
        if (readSync(fd, header, 0, HEADER_BYTES, position) < HEADER_BYTES) break;
        const length = header.readUInt32LE(0);
        const seq = Number(header.readBigUInt64LE(12));
        position += HEADER_BYTES;
        if (seq < next) {
          position += length;
          continue;
        }
        if (seq !== next) throw new JournalGapError(`journal ${file}: record ${seq} where ${next} was expected`);
        const payload = Buffer.allocUnsafe(length);
        if (readSync(fd, payload, 0, length, position) < length) break;
        position += length;
        if (!checksum(lengthAndSeqBytes(length, seq), payload).equals(header.subarray(4, 12))) {
          throw new JournalGapError(`journal ${file}: record ${seq} fails its checksum`);
        }
        yield { seq, payload, file };
        next++;
      }
    } finally {
      closeSync(fd);
    }
    if (next > throughSeq) return;
  }
  throw new JournalGapError(`journal records ${next} to ${throughSeq} were not found in ${dir}`);
}

/**
 * One write op of a record payload, read without parsing the payload as a
 * whole: a load's text stays in the payload's bytes (`data`: where its JSON
 * string's contents lie) until `loadText` reads it piece by piece. A reader
 * that only needs the updates, or loads a large text into an engine, so
 * never holds a record's text as one string (an install's record holds
 * tens of megabytes).
 */
export type PayloadOp =
  | { kind: 'update'; sparql: string; graphs?: readonly string[] }
  | { kind: 'load'; graph: string; format: RdfFormat; data: { start: number; end: number } }
  | ConditionOp;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** The index of the quote that closes the JSON string opened at `open`. */
function stringEnd(payload: Buffer, open: number): number {
  for (let from = open + 1; ;) {
    const quote = payload.indexOf(QUOTE, from);
    if (quote === -1) throw new SyntaxError('unterminated string');
    let backslashes = 0;
    while (payload[quote - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote;
    from = quote + 1;
  }
}

/** The index just past the JSON value (array, object, string or literal) that starts at `at`. */
function valueEnd(payload: Buffer, at: number): number {
  const first = payload[at];
  if (first === QUOTE) return stringEnd(payload, at) + 1;
  if (first !== 0x5b && first !== 0x7b) {
    let end = at;
    while (end < payload.length && !',}] \t\r\n'.includes(String.fromCharCode(payload[end]!))) end++;
    return end;
  }
  let depth = 0;
  for (let i = at; i < payload.length; i++) {
    const c = payload[i];
    if (c === QUOTE) i = stringEnd(payload, i);
    else if (c === 0x5b || c === 0x7b) depth++;
    else if (c === 0x5d || c === 0x7d) {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  throw new SyntaxError('unterminated value');
}

/** The write ops of a record's payload (see `PayloadOp`); `JournalGapError` when it holds none. */
export function payloadOps(payload: Buffer, file: string, seq: number): PayloadOp[] {
  const refuse = (why: string) => new JournalGapError(`journal ${file}: record ${seq} holds no write ops (${why})`);
  const json = (start: number, end: number): unknown => JSON.parse(payload.toString('utf8', start, end));
  let at = 0;
  const skipSpace = () => {
    while (at < payload.length && ' \t\r\n'.includes(String.fromCharCode(payload[at]!))) at++;
  };
  const expect = (char: string) => {
    skipSpace();
    if (payload[at] !== char.charCodeAt(0)) throw refuse(`expected ${char} at byte ${at}`);
    at++;
  };
  /**
   * The object that starts at `at`, read up to its closing brace: for each
   * field, `value(key)` is called with `at` on the field's value and reads
   * past it.
   */
  const readObject = (value: (key: string) => void): void => {
    expect('{');
    skipSpace();
    if (payload[at] === 0x7d) {
      at++;
      return;
    }
    for (;;) {
      skipSpace();
      const keyEnd = valueEnd(payload, at);
      const key = String(json(at, keyEnd));
      at = keyEnd;
      expect(':');
      skipSpace();
      value(key);
      skipSpace();
      if (payload[at] === 0x2c) { at++; continue; }
      break;
    }
    expect('}');
  };
  /** The ops array that starts at `at`, read up to its closing bracket. */
  const readOps = (): PayloadOp[] => {
    const ops: PayloadOp[] = [];
    expect('[');
    skipSpace();
    if (payload[at] === 0x5d) {
      at++;
      return ops;
    }
    for (;;) {
      const fields: Record<string, unknown> = {};
      let data: { start: number; end: number } | undefined;
      readObject((key) => {
        const end = valueEnd(payload, at);
        if (key === 'data' && payload[at] === QUOTE) data = { start: at + 1, end: end - 1 };
        else fields[key] = json(at, end);
        at = end;
      });
      const op = data ? { ...fields, data: '' } : fields;
      // A conditional write's record starts with its condition.
      if (ops.length === 0 && isConditionOp(op)) {
        ops.push(op);
      } else {
        if (!isWriteOp(op)) throw refuse('not a write op');
        ops.push(op.kind === 'load' ? { kind: 'load', graph: op.graph, format: op.format, data: data! } : op);
      }
      skipSpace();
      if (payload[at] === 0x2c) { at++; continue; }
      expect(']');
      return ops;
    }
  };
  try {
    skipSpace();
    // The older form: the ops array alone.
    if (payload[at] !== 0x7b) return readOps();
    // `{"at": <ms>, "ops": [...]}`: fields other than the ops are skipped.
    let ops: PayloadOp[] | undefined;
    readObject((key) => {
      if (key === 'ops') ops = readOps();
      else at = valueEnd(payload, at);
    });
    if (!ops) throw refuse('no "ops"');
    return ops;
  } catch (err) {
    if (err instanceof JournalGapError) throw err;
    throw refuse((err as Error).message);
  }
}

/** Characters of a load's text decoded per piece by `loadText`. */
const TEXT_PIECE_BYTES = 1 << 20;

/**
 * A load's text (`PayloadOp` `data` of `payload`), unescaped in pieces of
 * about a megabyte, each ending after a whole escaped line break (`\n`), so
 * an engine can parse the text as it comes without it ever being one string.
 */
export function* loadText(payload: Buffer, data: { start: number; end: number }): Generator<string> {
  const decoder = new TextDecoder('utf-8');
  let carry = '';
  for (let at = data.start; at < data.end;) {
    const to = Math.min(data.end, at + TEXT_PIECE_BYTES);
    const text = carry + decoder.decode(payload.subarray(at, to), { stream: to < data.end });
    at = to;
    if (at >= data.end) {
      carry = text;
      break;
    }
    // The last escaped line break (a backslash that starts an escape, then `n`): no escape is cut there.
    let cut = -1;
    for (let i = text.lastIndexOf('\\n'); i !== -1; i = i > 0 ? text.lastIndexOf('\\n', i - 1) : -1) {
      let backslashes = 0;
      while (text[i - backslashes] === '\\') backslashes++;
      if (backslashes % 2 === 1) {
        cut = i + 2;
        break;
      }
    }
    if (cut === -1) {
      carry = text;
      continue;
    }
    yield JSON.parse(`"${text.slice(0, cut)}"`) as string;
    carry = text.slice(cut);
  }
  if (carry.length > 0) yield JSON.parse(`"${carry}"`) as string;
}

/**
 * One op of a journal record as `readJournalRecords` gives it: a load's
 * text is read from the record's bytes in pieces when `text()` is called
 * (`loadText`), never held as one string.
 */
export type JournalReadOp =
  | { kind: 'update'; sparql: string; graphs?: readonly string[] }
  | { kind: 'load'; graph: string; format: RdfFormat; text(): Generator<string> }
  | ConditionOp;

/** One journal record: its seq, the file it is in (for messages), and its ops (a conditional write's condition first). */
export interface JournalReadRecord {
  seq: number;
  file: string;
  ops: JournalReadOp[];
}

/**
 * The one reader of journal files for readers outside the store's own
 * writer and replay (a query worker bringing its graphs up to date, the
 * snapshot worker rebuilding the store): the records of `dir` with seq in
 * `(afterSeq, throughSeq]`, in order, one in memory at a time, each checked
 * against its checksum (`journalPayloads`). Records in `skip` are passed
 * over unread (a conditional write whose condition did not hold); with
 * `holdingUpdates`, so is every record without an update op (a cheap look
 * at its bytes; its ops are not parsed). Throws `JournalGapError` when a
 * record is missing, damaged or holds no write ops.
 */
export function* readJournalRecords(
  dir: string,
  afterSeq: number,
  throughSeq: number,
  options: { skip?: Iterable<number>; holdingUpdates?: boolean } = {},
): Generator<JournalReadRecord> {
  const skip = new Set(options.skip ?? []);
  for (const { seq, payload, file } of journalPayloads(dir, afterSeq, throughSeq)) {
    if (skip.has(seq)) continue;
    // The JSON of an update op holds this text; a load's data holds it only escaped (a false hit is only parsed).
    if (options.holdingUpdates && !payload.includes('"kind":"update"')) continue;
    const ops = payloadOps(payload, file, seq).map((op): JournalReadOp => {
      if (op.kind !== 'load') return op;
      const { data } = op;
      return { kind: 'load', graph: op.graph, format: op.format, text: () => loadText(payload, data) };
    });
    yield { seq, file, ops };
  }
}
