import { createHash } from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

/*
 * Reading a snapshot file (its format: `snapshot.ts`) in bounded memory:
 * whole, checking its header, end line and checksum on the way, or the
 * blocks of some graphs (`snapshotGraphBlocks`). The one reader of the
 * format outside `snapshot.ts`. Kept apart from the engine so that a worker
 * thread can check a file's checksum without loading the engine.
 */

const HEADER_V1 = /^# wsm-snapshot v1 seq=(\d+) sha256=([0-9a-f]{64})$/;
const HEADER_V2 = /^# wsm-snapshot v2 seq=(\d+)$/;
const TRAILER = /^# wsm-snapshot-end quads=(\d{16}) sha256=([0-9a-f]{64})\n$/;
const TRAILER_BYTES = '# wsm-snapshot-end quads=0000000000000000 sha256=\n'.length + 64;
/** Bytes read from a snapshot file per step of the streaming load. */
const READ_CHUNK_BYTES = 4 * 1024 * 1024;

/** The problem a snapshot whose bytes do not hash to its recorded checksum has. */
export const CHECKSUM_MISMATCH = 'checksum mismatch';

/** What reading a snapshot found: its seq, its quad count (v2), and the problem that makes it unsound. */
export interface SnapshotReadState { seq?: number; problem?: string; quads?: number }

/**
 * Streams over a snapshot file's bytes (bounded memory), hashing them.
 * Sets in `state` the header's seq, the quad count the file claims (v2
 * only) and the problem found, if any. With `hashHere` false the bytes are
 * not hashed (the checksum is checked elsewhere, `snapshotFileProblem` in a
 * worker thread), so a checksum mismatch is not found here.
 */
export function* snapshotChunks(file: string, state: SnapshotReadState, hashHere = true): Generator<Buffer> {
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    const first = Buffer.alloc(Math.min(size, 200));
    readSync(fd, first, 0, first.length, 0);
    const newline = first.indexOf(0x0a);
    const headerText = newline < 0 ? '' : first.subarray(0, newline).toString('utf8');
    const v1 = HEADER_V1.exec(headerText);
    const v2 = HEADER_V2.exec(headerText);
    let end = size;
    let start = 0;
    let expected: string;
    if (v1) {
      state.seq = Number(v1[1]);
      expected = v1[2]!;
      start = newline + 1; // v1 hashes the body only
    } else if (v2) {
      state.seq = Number(v2[1]);
      if (size < newline + 1 + TRAILER_BYTES) {
        state.problem = 'too short to hold its end line';
        return;
      }
      const trailer = Buffer.alloc(TRAILER_BYTES);
      readSync(fd, trailer, 0, TRAILER_BYTES, size - TRAILER_BYTES);
      const m = TRAILER.exec(trailer.toString('utf8'));
      if (!m) {
        state.problem = 'missing or damaged end line (the file is cut short or corrupt)';
        return;
      }
      state.quads = Number(m[1]);
      expected = m[2]!;
      end = size - TRAILER_BYTES;
    } else {
      state.problem = 'missing or wrong header';
      return;
    }
    const hash = hashHere ? createHash('sha256') : null;
    const buffer = Buffer.allocUnsafe(READ_CHUNK_BYTES);
    for (let position = start; position < end;) {
      const n = readSync(fd, buffer, 0, Math.min(READ_CHUNK_BYTES, end - position), position);
      if (n === 0) break;
      position += n;
      const chunk = buffer.subarray(0, n);
      hash?.update(chunk);
      // The consumer uses each chunk before asking for the next one.
      yield chunk;
    }
    if (hash && hash.digest('hex') !== expected) state.problem = CHECKSUM_MISMATCH;
  } finally {
    closeSync(fd);
  }
}

/** Reads a snapshot through and checks its checksum; returns the problem, or undefined when it is sound. */
export async function verifySnapshot(file: string): Promise<string | undefined> {
  const state: { problem?: string } = {};
  // Hashing only, an event-loop turn between chunks: a snapshot is checked while the service serves requests.
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  for (const _ of snapshotChunks(file, state)) await new Promise<void>((resolve) => setImmediate(resolve));
  return state.problem;
}

/** Reads a snapshot through and checks its header, end line and checksum, synchronously (in a worker thread); returns the problem, or undefined when it is sound. */
export function snapshotFileProblem(file: string): string | undefined {
  const state: SnapshotReadState = {};
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  for (const _ of snapshotChunks(file, state)) { /* hashing only */ }
  return state.problem;
}

/**
 * The blocks of `graphs` in a snapshot file (v2, TriG: `snapshot.ts` writes
 * each graph as a block of a `<name> {` line, N-Triples lines and a `}`
 * line), as TriG text in pieces of at most a few MiB, for an engine to
 * load in one parse: the file is read in bounded steps and every other
 * block skipped. The file was checked when it was written; its blocks hold
 * what Oxigraph dumped. A query worker loads a view's graphs so, without
 * the service's store (docs/slash-commands.md). Throws when the file
 * cannot be read or ends inside a block.
 */
export function* snapshotGraphBlocks(file: string, graphs: ReadonlySet<string>): Generator<string> {
  const fd = openSync(file, 'r');
  try {
    const buffer = Buffer.alloc(READ_CHUNK_BYTES);
    const decoder = new TextDecoder('utf-8');
    let text = '';
    /** Inside a block (and whether it is wanted), or between blocks. */
    let inside = false;
    let keep = false;
    for (let position = 0; ;) {
      const read = readSync(fd, buffer, 0, READ_CHUNK_BYTES, position);
      position += read;
      const end = read === 0;
      text += end ? decoder.decode() : decoder.decode(buffer.subarray(0, read), { stream: true });
      let at = 0;
      const out: string[] = [];
      for (;;) {
        if (inside) {
          // Up to the block's closing line, or up to the last whole line read.
          const close = text.startsWith('}\n', at) ? at - 1 : text.indexOf('\n}\n', at);
          if (close !== -1) {
            if (keep) out.push(text.slice(at, close + 3));
            inside = false;
            at = close + 3;
            continue;
          }
          const last = text.lastIndexOf('\n');
          if (last >= at) {
            if (keep) out.push(text.slice(at, last + 1));
            at = last + 1;
          }
          break;
        }
        // Between blocks: the header, the default graph's triples, a block's opening line, the end line.
        const newline = text.indexOf('\n', at);
        if (newline === -1) break;
        const line = text.slice(at, newline + 1);
        at = newline + 1;
        if (line.startsWith('<') && line.endsWith('> {\n')) {
          inside = true;
          keep = graphs.has(line.slice(1, -4));
          if (keep) out.push(line);
        }
      }
      text = text.slice(at);
      if (out.length > 0) yield out.join('');
      if (end) break;
    }
    if (inside) throw new Error(`snapshot ${file} ends inside a graph block`);
  } finally {
    closeSync(fd);
  }
}
