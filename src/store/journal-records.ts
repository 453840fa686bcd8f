import { createHash } from 'node:crypto';
import { closeSync, openSync, readdirSync, readSync } from 'node:fs';
import { join } from 'node:path';
import type { StoredOp, WriteOp } from './store.js';

/*
 * The journal's record layout (little endian), and a reader of a journal
 * directory's records that holds one record in memory at a time. Kept apart
 * from `journal.ts` (the writer) so a query worker can read records without
 * loading the writer's dependencies.
 *
 *   [0, 4)    u32  payload length in bytes
 *   [4, 12)   8 bytes checksum: first 8 bytes of sha256(length ‖ seq ‖ payload)
 *   [12, 20)  u64  sequence number (1, 2, 3, ... over the whole history)
 *   [20, ..)  payload: UTF-8 JSON of the WriteOp[] of one write
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

/** The records of a journal directory from `afterSeq + 1` to `throughSeq` could not all be read. */
export class JournalGapError extends Error {}

/**
 * The records with seq in `(afterSeq, throughSeq]` of the journal files in
 * `dir`, in order, read one at a time (synchronously: meant for a worker
 * thread). Throws `JournalGapError` when one of them is missing or does not
 * read back whole (a file removed meanwhile, say): the caller then gets the
 * data elsewhere. Records past `throughSeq` (being written now) are never read.
 */
export function* journalRecords(dir: string, afterSeq: number, throughSeq: number): Generator<{ seq: number; ops: StoredOp[] }> {
  for (const { seq, payload, file } of journalPayloads(dir, afterSeq, throughSeq)) yield { seq, ops: parsePayload(payload, file, seq) };
}

/** A record's payload as its write ops; `JournalGapError` when it holds none. */
export function parsePayload(payload: Buffer, file: string, seq: number): StoredOp[] {
  const ops = JSON.parse(payload.toString('utf8')) as unknown;
  if (!Array.isArray(ops) || !ops.every(isWriteOp)) throw new JournalGapError(`journal ${file}: record ${seq} holds no write ops`);
  return ops as StoredOp[];
}

/**
 * `journalRecords` before their JSON is parsed: each record's payload
 * (checked against its checksum), so a reader can look at a record's bytes
 * before it decides to parse it.
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
