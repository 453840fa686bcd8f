import { createHash } from 'node:crypto';
import oxigraph from 'oxigraph';
import { splitRecord } from '../journal-records.js';
import { applyOp, coalesceUpdates, conditionHolds } from '../embedded/oxigraph-store.js';
import { graphsChangedBy } from '../declared-graphs.js';
import { freeStore } from '../scratch.js';
import type { StoredOp, WriteOp } from '../store.js';
import { SERVICE_STREAM, type Graphs } from '../../rdf/graphs.js';
import { graphsReadByWrite } from './read-graphs.js';
import type { Heads, PgLog, SnapshotPart, StoredRecord } from './log.js';

/*
 * Residency (docs/cluster.md, "Residency"): with a budget, an instance
 * holds the `service` stream and the workspace streams in use, loads a
 * workspace's stream when a read or a write first touches one of its
 * graphs, and lets it go when idle or when over the budget.
 *
 * Loading stream S at a cut (the heads of one statement) builds S's graphs
 * in a scratch store from the newest snapshot at or behind the cut and the
 * records after it, and copies them into the replica. A record is applied
 * to the scratch store as it was checked when appended: on the graphs it
 * reads in the state they had then. So the scratch store holds, beside S,
 * every stream the records read (their closure), each from the same
 * snapshot with all its records up to the cut, in gseq order. Records are
 * applied without asking their conditions: a record is only appended when
 * its condition held at the heads of the streams it reads, and those heads
 * are checked in the transaction that appends it (docs/cluster.md,
 * "Writes"), so the condition holds wherever the record is applied in
 * gseq order; asking it on a scratch store that lacks a stream it reads
 * would answer wrongly.
 */

/** A stream's records after the snapshot are not all in PostgreSQL any more (newer snapshots pruned them meanwhile): load again. */
export class ResidencyRetry extends Error {}

/** The graphs an op of a stored record changes: its declaration, or (records from before declarations) what its text names; 'any' when it cannot be told. */
export function graphsChangedByRecord(ops: readonly StoredOp[]): Set<string> | 'any' {
  const out = new Set<string>();
  for (const op of ops) {
    if (op.kind === 'load') {
      out.add(op.graph);
      continue;
    }
    if (op.graphs) {
      for (const g of op.graphs) out.add(g);
      continue;
    }
    const found = graphsChangedBy(op.sparql);
    if ('unresolved' in found) return 'any';
    for (const g of found.graphs) out.add(g);
  }
  return out;
}

/**
 * The ops of a record that change a graph of a stream held (or whose
 * changes cannot be named). The others change only graphs the replica
 * does not hold, so what they read does not matter: catching up applies
 * neither them nor loads what they read (a later op reading what they
 * changed reads a stream not held, which loads it).
 */
export function opsForHeld(ops: readonly StoredOp[], graphs: Graphs, holds: (stream: string) => boolean): StoredOp[] {
  return ops.filter((op) => {
    const changed = graphsChangedByRecord([op]);
    return changed === 'any' || [...changed].some((g) => holds(graphs.streamOf(g)));
  });
}

/** The streams a record reads (its ops' WHERE, ADD/COPY/MOVE sources; not its condition: see above), or 'any'. */
export function streamsReadByRecord(graphs: Graphs, ops: readonly StoredOp[]): Set<string> | 'any' {
  const read = graphsReadByWrite(ops as WriteOp[], undefined);
  if (read === 'any') return 'any';
  return new Set([...read].map((g) => graphs.streamOf(g)));
}

/** Rows of one write (same gseq) as consecutive groups, in the order given. */
export function byWrite(rows: readonly StoredRecord[]): StoredRecord[][] {
  const out: StoredRecord[][] = [];
  for (const row of rows) {
    const last = out[out.length - 1];
    if (last && last[0]!.gseq === row.gseq) last.push(row);
    else out.push([row]);
  }
  return out;
}

/** A snapshot as listed, to build from. */
export interface SnapshotChoice { seq: number; heads: Heads }

/** The newest snapshot at or behind `upto` on every stream (a newer one may be stored after the cut was read), if any. */
export async function snapshotBehind(log: PgLog, upto: Heads): Promise<SnapshotChoice | undefined> {
  for (const entry of await log.snapshots()) {
    if ([...entry.heads].every(([stream, seq]) => seq <= (upto.get(stream) ?? 0))) return entry;
  }
  return undefined;
}

export interface Materialized {
  /** The streams' graphs at the cut (and those of the streams their records read). */
  store: oxigraph.Store;
  /** The streams whose graphs the store holds at the cut: the ones asked for and their closure. */
  streams: Set<string>;
  /** Records applied. */
  records: number;
}

/**
 * Builds `wanted`'s graphs at the cut `upto` in a new store (see above).
 * Throws `ResidencyRetry` when the snapshot or its records went meanwhile.
 */
export async function materialize(log: PgLog, graphs: Graphs, wanted: ReadonlySet<string>, upto: Heads): Promise<Materialized> {
  const snapshot = await snapshotBehind(log, upto);
  const base: Heads = snapshot?.heads ?? new Map<string, number>();
  const every = new Set([...upto.keys(), ...base.keys()]);
  const closure = new Set(wanted);
  let rows: StoredRecord[];
  for (;;) {
    const bound: Heads = new Map([...closure].map((s): [string, number] => [s, upto.get(s) ?? 0]));
    rows = await log.recordsBetween(base, bound, Number.MAX_SAFE_INTEGER);
    const first = new Map<string, number>();
    for (const row of rows) if (!first.has(row.stream)) first.set(row.stream, row.seq);
    for (const [stream, seq] of first) if (seq !== (base.get(stream) ?? 0) + 1) throw new ResidencyRetry(`records of ${stream} after the snapshot were pruned meanwhile`);
    for (const stream of closure) {
      if (!first.has(stream) && (upto.get(stream) ?? 0) > (base.get(stream) ?? 0)) throw new ResidencyRetry(`records of ${stream} after the snapshot were pruned meanwhile`);
    }
    const before = closure.size;
    for (const write of byWrite(rows)) {
      const read = streamsReadByRecord(graphs, splitRecord(write[0]!.ops).ops);
      for (const s of read === 'any' ? every : read) closure.add(s);
    }
    if (closure.size === before) break;
  }
  const store = new oxigraph.Store();
  try {
    const fromSnapshot = [...closure].filter((s) => (base.get(s) ?? 0) > 0);
    if (snapshot && fromSnapshot.length > 0 && await log.snapshotHasParts(snapshot.seq)) {
      // The parts of the streams wanted (a stream without a part had no quad then).
      for (const stream of fromSnapshot) {
        const part = await log.snapshotPart(snapshot.seq, stream);
        if (!part) continue;
        if (!createHash('sha256').update(part.data).digest().equals(part.sha256)) throw new Error(`the part of ${stream} of snapshot ${snapshot.seq} in PostgreSQL fails its checksum`);
        store.load(part.data.toString('utf8'), { format: 'application/n-quads', no_transaction: true });
      }
    } else if (snapshot && fromSnapshot.length > 0) {
      // A snapshot stored without parts: the whole of it, filtered.
      const stored = await log.snapshot(snapshot.seq);
      if (!stored) throw new ResidencyRetry(`snapshot ${snapshot.seq} was dropped meanwhile`);
      if (!createHash('sha256').update(stored.data).digest().equals(stored.sha256)) throw new Error(`snapshot ${snapshot.seq} in PostgreSQL fails its checksum`);
      for (const quad of oxigraph.parse(stored.data.toString('utf8'), { format: 'application/n-quads' })) {
        const g = quad.graph.termType === 'DefaultGraph' ? '' : quad.graph.value;
        if (closure.has(graphs.streamOf(g))) store.add(quad);
      }
    }
    const writes = byWrite(rows);
    for (const write of writes) {
      const { condition, ops } = splitRecord(write[0]!.ops);
      // A condition asked only where the record applies reads only the record's stream, built here up to it.
      if (condition?.late && !conditionHolds(store, condition)) continue;
      for (const op of coalesceUpdates(ops)) applyOp(store, op);
    }
    return { store, streams: closure, records: writes.length };
  } catch (err) {
    freeStore(store);
    throw err;
  }
}

/**
 * A store's quads split by stream, as N-Quads (each graph dumped as
 * N-Triples, one triple a line, its name put before each line's final
 * dot); the parts of a snapshot, whose concatenation is the whole.
 */
export function dumpByStream(store: oxigraph.Store, graphs: Graphs): Map<string, SnapshotPart> {
  const texts = new Map<string, string[]>();
  const counts = new Map<string, number>();
  const add = (stream: string, text: string, quads: number) => {
    if (!texts.has(stream)) texts.set(stream, []);
    texts.get(stream)!.push(text);
    counts.set(stream, (counts.get(stream) ?? 0) + quads);
  };
  const defaults = store.dump({ format: 'application/n-triples', from_graph_name: oxigraph.defaultGraph() });
  if (defaults.length > 0) add(SERVICE_STREAM, defaults, defaults.split('\n').length - 1);
  for (const g of namedGraphsOf(store)) {
    const lines = store.dump({ format: 'application/n-triples', from_graph_name: oxigraph.namedNode(g) }).split('\n');
    lines.pop();
    const suffix = `<${g}> .`;
    add(graphs.streamOf(g), `${lines.map((line) => line.slice(0, -1) + suffix).join('\n')}\n`, lines.length);
  }
  return new Map([...texts].map(([stream, parts]) => [stream, { quads: counts.get(stream)!, data: Buffer.from(parts.join(''), 'utf8') }]));
}

/** The named graphs a store holds. */
export function namedGraphsOf(store: oxigraph.Store): string[] {
  const rows = store.query('SELECT DISTINCT ?g WHERE { GRAPH ?g { } }') as Map<string, oxigraph.Term>[];
  return rows.flatMap((row) => {
    const g = row.get('g');
    return g?.termType === 'NamedNode' ? [g.value] : [];
  });
}

/**
 * Which workspace streams an instance holds, in the order they were last
 * used (oldest first), what is in use now (pinned), and the counts for
 * /metrics.
 */
export class Residency {
  /** Workspace stream -> when it was last used (ms); Map order: least recently used first. */
  private readonly held = new Map<string, number>();
  private readonly pins = new Map<string, number>();
  /** Reads over every stream under way: nothing is let go meanwhile. */
  private everything = 0;
  /** Quads each held stream had when loaded (the budget's estimate between exact counts). */
  readonly loadedQuads = new Map<string, number>();
  loads = 0;
  evictions = 0;

  constructor(readonly budgetQuads: number, readonly idleMs: number) {}

  holds(stream: string): boolean {
    return stream === SERVICE_STREAM || this.held.has(stream);
  }

  /** Workspace streams held, least recently used first. */
  streams(): string[] {
    return [...this.held.keys()];
  }

  add(stream: string, quads: number, now = Date.now()): void {
    if (stream === SERVICE_STREAM) return;
    this.held.delete(stream);
    this.held.set(stream, now);
    this.loadedQuads.set(stream, quads);
  }

  remove(stream: string): void {
    this.held.delete(stream);
    this.loadedQuads.delete(stream);
  }

  touch(streams: Iterable<string>, now = Date.now()): void {
    for (const s of streams) {
      if (!this.held.has(s)) continue;
      this.held.delete(s);
      this.held.set(s, now);
    }
  }

  /** Keeps `streams` (or every stream) from being let go until the answer is called. */
  pin(streams: ReadonlySet<string> | 'all'): () => void {
    if (streams === 'all') {
      this.everything++;
      return () => { this.everything--; };
    }
    for (const s of streams) this.pins.set(s, (this.pins.get(s) ?? 0) + 1);
    return () => {
      for (const s of streams) {
        const n = (this.pins.get(s) ?? 1) - 1;
        if (n > 0) this.pins.set(s, n);
        else this.pins.delete(s);
      }
    };
  }

  /** Whether a read under way uses the stream. */
  pinned(stream: string): boolean {
    return this.everything > 0 || this.pins.has(stream);
  }

  /** Held streams that may be let go now, least recently used first. */
  evictable(): Array<{ stream: string; usedAt: number }> {
    if (this.everything > 0) return [];
    return [...this.held].filter(([s]) => !this.pins.has(s)).map(([stream, usedAt]) => ({ stream, usedAt }));
  }
}
