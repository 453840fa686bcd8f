import { createHash } from 'node:crypto';
import { open, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import oxigraph from 'oxigraph';
import { fsyncDir } from '../fsutil.js';
import { freeStore } from '../scratch.js';
import { CHECKSUM_MISMATCH, snapshotChunks, verifySnapshot, type SnapshotReadState } from './snapshot-file.js';
import { spawnModuleWorker } from '../../workers/spawn.js';

export { verifySnapshot };

/*
 * A snapshot is one file `snapshot-<seq>.trig`: TriG of the whole store up
 * to journal record <seq>, between two comment lines:
 *
 *   # wsm-snapshot v2 seq=<seq>
 *   <graph> {
 *   <N-Triples lines of that graph, as Oxigraph dumps them>
 *   }
 *   ... one block per graph (a large graph: one block per predicate)
 *   # wsm-snapshot-end quads=<16 digits> sha256=<64 hex>
 *
 * The last line has a fixed length; its sha256 covers every byte before it,
 * and `quads` is the number of quads the body holds. It is written and read
 * in bounded memory: the store is dumped one graph (or predicate) at a
 * time, each piece written before the next is dumped, and read back through
 * one streaming parse (so blank nodes keep their identity across graphs),
 * so no single string ever holds the whole store. The file appears under
 * its name only by an atomic rename, after its bytes were fsynced.
 *
 * Version 1 (`snapshot-<seq>.nq`, still read): `# wsm-snapshot v1 seq=<seq>
 * sha256=<hex of the body>` then the body as N-Quads.
 */
const NAME = /^snapshot-(\d{16})\.(nq|trig)$/;
const TEMP_NAME = /^snapshot-\d{16}\.(nq|trig)\.tmp$/;

/**
 * A graph holding more quads than this is dumped one predicate at a time:
 * each dump is one synchronous engine call, and a snapshot runs beside the
 * service's requests (an install's graphs hold 100,000 triples and more).
 */
const GRAPH_CHUNK_QUADS = 20_000;

/** The file name of the snapshot that includes journal records up to `seq`. */
export function snapshotFileName(seq: number): string {
  return `snapshot-${String(seq).padStart(16, '0')}.trig`;
}

/** Snapshots in `dir`, newest (highest seq) first. */
export async function listSnapshots(dir: string): Promise<{ seq: number; file: string }[]> {
  const found: { seq: number; file: string }[] = [];
  for (const name of await readdir(dir)) {
    const m = NAME.exec(name);
    if (m) found.push({ seq: Number(m[1]), file: join(dir, name) });
  }
  return found.sort((a, b) => b.seq - a.seq);
}

function selectValues(raw: oxigraph.Store, query: string, variable: string): { type: string; value: string }[] {
  const text = raw.query(query, { results_format: 'application/sparql-results+json' }) as string;
  return (JSON.parse(text) as { results: { bindings: Record<string, { type: string; value: string }>[] } }).results.bindings.map((b) => b[variable]!);
}

function lineCount(text: string): number {
  let n = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) n++;
  return n;
}

/** One piece of the store as TriG: its bytes and how many quads they hold. */
interface Piece {
  bytes: Buffer[];
  quads: number;
}

function block(graph: string | null, ntriples: string): Piece {
  // N-Triples lines are valid inside a TriG graph block.
  const body = Buffer.from(ntriples, 'utf8');
  const quads = lineCount(ntriples);
  if (graph === null) return { bytes: [body], quads };
  return { bytes: [Buffer.from(`<${graph}> {\n`, 'utf8'), body, Buffer.from('}\n', 'utf8')], quads };
}

/**
 * The pieces that together are the whole store, made one at a time as they
 * are asked for: the default graph, then each named graph (a large one one
 * predicate at a time).
 */
function* pieces(raw: oxigraph.Store): Generator<Piece> {
  yield block(null, raw.dump({ format: 'application/n-triples', from_graph_name: oxigraph.defaultGraph() }));
  const mayBeLarge = raw.size > GRAPH_CHUNK_QUADS;
  const graphs = selectValues(raw, 'SELECT ?g WHERE { GRAPH ?g { } }', 'g').filter((g) => g.type === 'uri').map((g) => g.value);
  for (const graph of graphs) {
    const large = mayBeLarge
      && Number(selectValues(raw, `SELECT (COUNT(*) AS ?n) WHERE { GRAPH <${graph}> { ?s ?p ?o } }`, 'n')[0]!.value) > GRAPH_CHUNK_QUADS;
    if (!large) {
      yield block(graph, raw.dump({ format: 'application/n-triples', from_graph_name: oxigraph.namedNode(graph) }));
      continue;
    }
    for (const p of selectValues(raw, `SELECT DISTINCT ?p WHERE { GRAPH <${graph}> { ?s ?p ?o } }`, 'p')) {
      // Blank nodes keep their stored identifiers in a CONSTRUCT of stored terms.
      yield block(graph, raw.query(`CONSTRUCT { ?s <${p.value}> ?o } WHERE { GRAPH <${graph}> { ?s <${p.value}> ?o } }`, { results_format: 'application/n-triples' }) as string);
    }
  }
}

/** What writing a snapshot did. */
export interface WrittenSnapshot {
  file: string;
  quads: number;
  bytes: number;
}

/**
 * Writes a snapshot of `raw` (which must not change until `dumped` is
 * called) durably and in bounded memory: piece by piece to a temporary
 * file, each piece written before the next is dumped; then fsynced, renamed
 * into place, the directory fsynced, and the file read back to check its
 * checksum. `dumped` is called as soon as the store's content is no longer
 * needed (before the fsync). On any failure the temporary file is removed.
 */
export async function writeSnapshot(dir: string, seq: number, raw: oxigraph.Store, dumped: () => void = () => {}): Promise<WrittenSnapshot> {
  const file = join(dir, snapshotFileName(seq));
  const temp = `${file}.tmp`;
  let released = false;
  const release = () => {
    if (!released) {
      released = true;
      dumped();
    }
  };
  try {
    const expectedQuads = raw.size;
    const hash = createHash('sha256');
    let bytes = 0;
    let quads = 0;
    const handle = await open(temp, 'w');
    try {
      const write = async (buffer: Buffer) => {
        hash.update(buffer);
        bytes += buffer.length;
        let offset = 0;
        while (offset < buffer.length) offset += (await handle.write(buffer, offset, buffer.length - offset, null)).bytesWritten;
      };
      await write(Buffer.from(`# wsm-snapshot v2 seq=${seq}\n`, 'utf8'));
      for (const piece of pieces(raw)) {
        quads += piece.quads;
        for (const buffer of piece.bytes) await write(buffer);
      }
      release();
      if (quads !== expectedQuads) throw new Error(`snapshot dump holds ${quads} quads, the store ${expectedQuads}`);
      const trailer = Buffer.from(`# wsm-snapshot-end quads=${String(quads).padStart(16, '0')} sha256=${hash.digest('hex')}\n`, 'utf8');
      let offset = 0;
      while (offset < trailer.length) offset += (await handle.write(trailer, offset, trailer.length - offset, null)).bytesWritten;
      bytes += trailer.length;
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, file);
    await fsyncDir(dir);
    const problem = await verifySnapshot(file);
    if (problem) throw new Error(`snapshot ${file} does not read back: ${problem}`);
    return { file, quads, bytes };
  } catch (err) {
    release();
    await rm(temp, { force: true }).catch(() => {});
    throw err;
  }
}

/** The snapshot that was loaded. */
export interface LoadedSnapshot {
  seq: number;
  file: string;
  /** The store holding its content. */
  raw: oxigraph.Store;
}

/**
 * Loads one snapshot into a new store in one streaming pass (one parse, so
 * blank nodes keep their identity; bounded memory), checking its header,
 * quad count and (unless `hashHere` is false: the caller checks it
 * elsewhere) its checksum on the way. Throws an Error naming the problem.
 */
export function loadSnapshot(file: string, expectedSeq: number, hashHere = true): oxigraph.Store {
  const raw = new oxigraph.Store();
  const state: SnapshotReadState = {};
  try {
    raw.load(snapshotChunks(file, state, hashHere), { format: file.endsWith('.nq') ? 'application/n-quads' : 'application/trig', no_transaction: true });
  } catch (err) {
    freeStore(raw);
    throw new Error(state.problem ?? `does not load (${(err as Error).message})`);
  }
  let problem = state.problem;
  if (!problem && state.seq !== expectedSeq) problem = `header names seq ${state.seq}, the file name ${expectedSeq}`;
  if (!problem && state.quads !== undefined && raw.size !== state.quads) problem = `holds ${raw.size} quads, its end line says ${state.quads}`;
  if (problem) {
    freeStore(raw);
    throw new Error(problem);
  }
  return raw;
}

/**
 * A snapshot file's checksum checked in a worker thread
 * (`snapshot-check-worker.ts`): the problem found, or undefined when it is
 * sound. Should the worker fail, the file is checked here instead.
 */
function checkAside(file: string): Promise<string | undefined> {
  const inline = () => verifySnapshot(file);
  return new Promise<string | undefined>((resolve) => {
    let worker;
    try {
      worker = spawnModuleWorker(new URL('./snapshot-check-worker.ts', import.meta.url), undefined, { file });
    } catch {
      resolve(inline());
      return;
    }
    let answered = false;
    worker.once('message', (answer: string | null) => {
      answered = true;
      resolve(answer ?? undefined);
    });
    worker.once('error', () => { if (!answered) { answered = true; resolve(inline()); } });
    worker.once('exit', () => { if (!answered) { answered = true; resolve(inline()); } });
  });
}

/** Options of `loadLatestSnapshot`. */
export interface LoadSnapshotOptions {
  /**
   * A snapshot file of at least this many bytes has its checksum checked
   * in a worker thread while this thread loads it (about a quarter of a
   * second per 150 MB taken off the start); a smaller one is hashed as it
   * is loaded, where a thread would cost more than it saves.
   */
  checkAsideMinBytes?: number;
}

/**
 * Loads the newest sound snapshot of `dir` into a new store. A snapshot
 * whose header, checksum or content is wrong is reported through
 * `onWarning` (and left on disk) and the next older one is tried. Returns
 * null when there is no sound snapshot.
 */
export async function loadLatestSnapshot(dir: string, onWarning: (message: string) => void, options: LoadSnapshotOptions = {}): Promise<LoadedSnapshot | null> {
  const minAside = options.checkAsideMinBytes ?? 32 * 1024 * 1024;
  const all = await listSnapshots(dir);
  for (const [i, { seq, file }] of all.entries()) {
    try {
      const aside = (await stat(file)).size >= minAside ? checkAside(file) : null;
      let raw: oxigraph.Store;
      try {
        raw = loadSnapshot(file, seq, aside === null);
      } catch (err) {
        // Bytes that changed may also break the parse or the counts: the checksum says which it was.
        if ((await aside) === CHECKSUM_MISMATCH) throw new Error(CHECKSUM_MISMATCH);
        throw err;
      }
      const problem = await aside;
      if (problem) {
        freeStore(raw);
        throw new Error(problem);
      }
      return { seq, file, raw };
    } catch (err) {
      const next = all[i + 1];
      onWarning(`snapshot ${file}: ${(err as Error).message}; ${next ? `falling back to ${next.file} and the journal after it` : 'no older snapshot to fall back to'}`);
    }
  }
  return null;
}

/**
 * Removes every snapshot except those whose seq is in `keep`, and leftover
 * temporary files.
 */
export async function removeSnapshotsExcept(dir: string, keep: number[]): Promise<void> {
  for (const name of await readdir(dir)) {
    const m = NAME.exec(name);
    if ((m && !keep.includes(Number(m[1]))) || TEMP_NAME.test(name)) {
      await rm(join(dir, name), { force: true });
    }
  }
}
