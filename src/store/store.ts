import { iri, sparql, type Sparql } from '../rdf/sparql.js';
/**
 * The store contract. Every piece of state of the service is RDF in named
 * graphs behind this small interface: query, update, load a graph, dump a
 * graph. The embedded implementation is Oxigraph made durable by a journal;
 * a remote SPARQL 1.1 engine (Protocol + Graph Store Protocol) could serve
 * the same interface, so callers use standard SPARQL only.
 *
 * Contract:
 * - Reads return promises and see at least every write whose promise
 *   resolved before the read was made. Nothing may rely on a read and a
 *   later write happening in the same tick: a read's answer may be stale by
 *   the time it arrives (see the test read-delay mode in
 *   docs/store.md).
 * - `write(ops)` applies all ops as one atomic, durable change: the returned
 *   promise resolves once the change is on disk (journal fsynced), and a
 *   crash before that loses the whole change, never part of it. The
 *   embedded store journals first and applies after the fsync (a large
 *   write's new graphs may be loaded before, while no read can see the
 *   store, and are dropped if the write is not made durable): a write
 *   whose journal write or fsync fails rejects with `StoreUnavailableError`
 *   and was never visible to any read.
 * - Updates must be deterministic (no NOW(), RAND(), UUID(), STRUUID(),
 *   BNODE()): journal records replay to the same state.
 * - A write is all or nothing: everything it will send is checked before
 *   any of it is applied. An op the engine refuses (a malformed update, an
 *   IRI it does not accept in a load) rejects the write with
 *   `WriteRefusedError` and leaves the store, the journal and every cache
 *   as they were. Callers check user input first (`rdf/turtle.ts` checks
 *   every IRI the way the engine does), so a refusal here is a programming
 *   error, never a user error. Graph management must use the SILENT forms
 *   (`DROP SILENT GRAPH`): the check runs on an empty scratch store.
 */

import type { InstanceLease } from './instance-lease.js';
import type { EngineRequest } from './remote/engine-request.js';
import type { ArchiveFiles } from '../registry/archives.js';

/** The engine refused an op of a write; nothing of the write was applied. */
export class WriteRefusedError extends Error {
  constructor(readonly opIndex: number, readonly engineMessage: string) {
    super(`the store refused part ${opIndex + 1} of a write, nothing of it was applied: ${engineMessage}`);
    this.name = 'WriteRefusedError';
  }
}

/**
 * The store could not make a write durable (its journal cannot be written:
 * a full disk, an I/O error). Nothing of the write was applied; reads go on.
 * The service answers 503 `STORE_UNAVAILABLE` (src/http/errors.ts).
 */
export class StoreUnavailableError extends Error {
  /** Seconds after which trying again makes sense (the journal's next probe). */
  retryAfterSeconds = 1;
  constructor(message: string, readonly errno: string | undefined, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}

/**
 * The store's engine cannot be reached (the remote store: refused or
 * dropped connections, no answer in time). Reads fail too. Whether a write
 * sent when the connection dropped was applied is not known; the service
 * answers 503 `STORE_UNAVAILABLE` and says only that the storage cannot be
 * reached.
 */
export class StoreUnreachableError extends StoreUnavailableError {
  constructor(message: string) {
    super(message, undefined);
    this.name = 'StoreUnreachableError';
    this.retryAfterSeconds = 5;
  }
}

/** Whether the store can take writes now (`QuadStore.health`). */
export interface StoreHealth {
  writable: boolean;
  /** False when reads fail too (the engine cannot be reached). */
  readable?: boolean;
  /** Why not: for logs and operators, not for anonymous clients. */
  reason?: string;
  /** Since when. */
  since?: Date;
  /** Seconds after which trying again makes sense. */
  retryAfterSeconds?: number;
}

/** One SPARQL JSON results binding value. */
export interface BindingValue {
  type: 'uri' | 'literal' | 'bnode' | 'triple';
  value: string;
  datatype?: string;
  'xml:lang'?: string;
}
export type Binding = Record<string, BindingValue | undefined>;

/** Restricts a query to some graphs: overrides FROM / FROM NAMED / GRAPH. */
export interface QueryScope {
  /** Graphs whose union is the default graph. */
  defaultGraphs?: string[];
  /** Graphs visible to GRAPH ?g. */
  namedGraphs?: string[];
}

export type RdfFormat = 'text/turtle' | 'application/n-triples' | 'application/n-quads';

/**
 * The graph that holds triples written outside any `GRAPH` (the default
 * graph), as a name in `graphs` declarations. The service writes only named
 * graphs; tests may use it.
 */
export const DEFAULT_GRAPH = '';

/**
 * One op of a write. Every op declares the graphs it may change: an
 * update's `graphs` lists every graph its templates or graph management
 * name (or may bind, for a graph variable); a load changes its `graph`.
 * The declaration is the truth callers promise: per-graph revisions and
 * every read cache rely on it (a graph an update only reads is not
 * declared). In the test suite the embedded store checks each declaration
 * (`src/store/declared-graphs.ts`).
 */
export type WriteOp =
  | { kind: 'update'; sparql: Sparql; graphs: readonly string[] }
  /**
   * Loads data into one graph, adding to what it holds; with `replace`, the
   * graph holds exactly this data afterwards (as a `DROP SILENT GRAPH` of
   * it just before the load: `expandReplaces`). A large write that begins
   * with replacing loads of graphs no other op names lets the embedded
   * store load them while it checks them (`OxigraphStore`).
   */
  | { kind: 'load'; graph: string; format: RdfFormat; data: string; replace?: boolean };

/**
 * A load's data as a caller may give it: the text, or its UTF-8 bytes. Bytes
 * cross to the store's thread as bytes, and a string is made of them there,
 * so a large text made in a worker thread (an install's graphs:
 * `pipeline-worker.ts`) never becomes a string on the event loop, where
 * making a large string holds it (docs/figures.md). `ThreadedStore` lends bytes that
 * fill a buffer of their own: moved to its thread for the write and moved
 * back into the op's `data` when the write settles (a failed command writes
 * its report op again); during the write the caller's array is empty.
 */
export type LoadData = string | Uint8Array;

/** A write's op as callers give it: a load's data may be bytes (`LoadData`). */
export type WriteInput =
  | Exclude<WriteOp, { kind: 'load' }>
  | (Omit<Extract<WriteOp, { kind: 'load' }>, 'data'> & { data: LoadData });

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The ops with every load's data as text (what the stores journal and send to their engine). */
export function opsWithTexts(ops: readonly WriteInput[]): WriteOp[] {
  return ops.map((op) => (op.kind === 'load' && typeof op.data !== 'string' ? { ...op, data: utf8.decode(op.data) } : op as WriteOp));
}

/** The graphs a write declares it may change. */
export function declaredGraphs(ops: readonly WriteInput[]): Set<string> {
  const out = new Set<string>();
  for (const op of ops) {
    if (op.kind === 'load') out.add(op.graph);
    else for (const g of op.graphs) out.add(g);
  }
  return out;
}

/**
 * A write's op as read back from the journal: records written before writes
 * declared their graphs have none. Replay only applies ops, so it never
 * needs them.
 */
export type StoredOp =
  | { kind: 'update'; sparql: string; graphs?: readonly string[] }
  | { kind: 'load'; graph: string; format: RdfFormat; data: string };

/**
 * The first op of a conditional write's journal record: its ops apply only
 * if the ASK answers `expect` on the store as every earlier record left it
 * (which is where the live store asked it too, so replay gives the same
 * outcome). Records without one apply unconditionally.
 */
export interface ConditionOp {
  kind: 'condition';
  ask: string;
  expect: boolean;
  /**
   * Asked only where the record applies, never before it was appended (the
   * cluster store's writes sharing one commit, docs/cluster.md "Writes"):
   * the record is of one stream and the condition reads only that stream's
   * graphs, so every replica asks it on the same state. Absent: the
   * condition held when the record was appended.
   */
  late?: true;
}

/** What one journal record holds: optionally a condition, then the write's ops. */
export type JournalOp = WriteOp | ConditionOp;

/**
 * The condition of a conditional write: an ASK query (unscoped, standard
 * SPARQL) and the answer it must give for the write to apply. Its groups
 * must not be FILTERs alone: Virtuoso ignores the FILTERs of a group with
 * no pattern (`ASK { FILTER NOT EXISTS { ... } }` answers true); anchor
 * such a group with `VALUES ?condition { true }`.
 */
export interface WriteCondition {
  ask: Sparql;
  expect: boolean;
}

/**
 * What kind of store a caller has, for the few callers whose work depends
 * on it (docs/store.md, "Capabilities"). Callers ask these, never whether
 * an optional method is there.
 */
export interface StoreCapabilities {
  /**
   * Other service instances write the same data (the remote store's engine,
   * the cluster store's log). Their writes reach no `onWrite` of this
   * process, and `revision()` moves for them only once `syncRevisions` has
   * seen them: whatever keeps an answer across requests (a read cache, a
   * query worker's view) calls `syncRevisions` for the graphs it depends
   * on before it trusts what it kept. False: this process alone writes
   * (the embedded store: one process per data directory), and
   * `onWrite` hears every write.
   */
  readonly otherInstancesWrite: boolean;
  /**
   * What an acknowledged write changed is there, whole, after the store is
   * opened again on the same place (a restart). False: the plain in-memory
   * store (tests, the cluster store's replica on its own).
   */
  readonly durable: boolean;
  /**
   * A query's `GRAPH ?g { }` binds `?g` to every named graph of the store
   * without visiting their quads, and the same graphs wherever it is asked:
   * Oxigraph holding the data in one process (graphs emptied by a delete
   * are named too). False: list graphs with `graphNames`. Virtuoso binds
   * nothing there, and the cluster store's replicas would disagree (one
   * made from a snapshot holds no emptied graph, one that applied the
   * delete still names it).
   */
  readonly graphPatternNamesGraphs: boolean;
}

export interface QuadStore {
  /** What kind of store this is (`StoreCapabilities`). */
  readonly capabilities: StoreCapabilities;
  /** SELECT: the bindings, in the query's order. */
  select(query: Sparql, scope?: QueryScope): Promise<Binding[]>;
  /**
   * SELECT, for many rows of IRIs: the IRIs `variable` binds, in the
   * query's order (rows where it is unbound or not an IRI give none). The
   * embedded store reads them from the engine's tab-separated answer,
   * about half the event loop's time of its JSON answer (docs/figures.md).
   */
  selectIris(query: Sparql, variable: string, scope?: QueryScope): Promise<string[]>;
  /** ASK. */
  ask(query: Sparql, scope?: QueryScope): Promise<boolean>;
  /** CONSTRUCT / DESCRIBE: the result as N-Triples text. */
  construct(query: Sparql, scope?: QueryScope): Promise<string>;
  /** Any query, answered in a serialization format (SPARQL results or RDF media type). */
  queryRaw(query: Sparql, resultsFormat: string, scope?: QueryScope): Promise<string | boolean>;
  /** Atomic, durable write of several ops. */
  write(ops: WriteInput[]): Promise<void>;
  /**
   * Conditional write: applies `ops` as `write` does only if `condition.ask`
   * answers `condition.expect` on the very state the ops apply to; no other
   * write (of this process or, on a remote engine, of any instance) comes
   * between the check and the apply. Resolves true when applied, false when
   * the condition did not hold (nothing applied, nothing journaled, no
   * listener told). The invariants of docs/store.md ("Invariant
   * sites") are kept this way.
   */
  writeIf(condition: WriteCondition, ops: WriteInput[]): Promise<boolean>;
  /** One SPARQL update that may change `graphs` (see `WriteOp`), durably. */
  update(sparql: Sparql, graphs: readonly string[]): Promise<void>;
  /** Dumps one named graph as N-Triples. */
  dumpGraph(graph: string): Promise<string>;
  /**
   * The request that answers `dumpGraph(graph)`, for a query worker to send
   * itself, so the graph's text goes from the engine into the worker's copy
   * without passing through the main thread. Only a store whose data lives
   * in an engine reached over HTTP (the remote store) has it.
   */
  graphDumpRequest?(graph: string): Promise<EngineRequest>;
  /**
   * Names of all named graphs holding at least one quad. `prefix`: the
   * caller keeps only the names under it (a store may then list only
   * those: the cluster store with residency loads only that workspace).
   */
  graphNames(prefix?: string): Promise<string[]>;
  /** Number of quads in the store (may visit every quad: not for a hot path). */
  size(): Promise<number>;
  /** Whether the store holds no quad of the service (stops at the first one found). */
  isEmpty(): Promise<boolean>;
  /**
   * Runs `fn` while no other `exclusive` call with the same key runs (calls
   * queue in order). For invariants spanning reads and a write in the
   * embedded store: every code path that writes what the invariant covers
   * takes the same key. It holds within one process only, so an invariant
   * that must hold across service instances uses `writeIf` instead; the
   * sites are listed in docs/store.md.
   */
  exclusive<T>(key: string, fn: () => Promise<T>): Promise<T>;
  /** Flushes and releases resources (journal handle, lock). */
  close(): Promise<void>;
  /**
   * Monotonic counter bumped on every write (metrics, ETags); caches use
   * `revision`, which moves only for the graphs a write declared.
   */
  readonly version: number;
  /**
   * The revision of one graph: moves (upwards) by the time a write that
   * declared the graph resolves, after it was applied (the embedded store
   * on the event loop's thread moves it when the write starts too), never
   * otherwise (except all at once, when the store forgets old revisions: see
   * `GraphRevisions`). An answer read while a graph's revision did not move
   * is one state of that graph, and if that state is older than a write, the
   * write's move comes after the read began: a cache that keeps an answer
   * under the revisions it read before asking finds it stale. Per process:
   * where `capabilities.otherInstancesWrite`, writes made by other
   * instances move it once `syncRevisions` has seen them.
   */
  revision(graph: string): number;
  /**
   * Brings `revision()` of these graphs up to date with writes made by
   * other service instances (the remote store: one query for the engine's
   * generation of each graph; the cluster store: its replica caught up to
   * the log's head). Called by the read cache before it answers from a
   * kept value, when `capabilities.otherInstancesWrite`; where no other
   * instance writes (the embedded store) it has nothing to do and resolves
   * at once.
   */
  syncRevisions(graphs: readonly string[]): Promise<void>;
  /**
   * This service instance's lease, when several instances may share the
   * store (the remote store): lifecycle commands are claimed under it
   * (docs/store.md, "Command leases"). Absent on the embedded store,
   * which one process holds alone.
   */
  readonly instance?: InstanceLease | undefined;
  /**
   * Where the hosted registry keeps archive bytes when every instance must
   * read them (the cluster store: in PostgreSQL). Absent: in the data
   * directory (`archives/`).
   */
  readonly archives?: ArchiveFiles;
  /** Subscribes to writes; the listener gets the graphs the write declared, once it is applied. */
  onWrite(listener: (graphs: ReadonlySet<string>) => void): () => void;
  /**
   * Whether writes can be made durable now (the embedded store: whether its
   * journal can be written). Absent: always assumed writable.
   */
  health?(): StoreHealth;
}

/** An update op that may change `graphs` (and no other graph). */
export function updateOp(sparql: Sparql, graphs: readonly string[]): WriteOp {
  return { kind: 'update', sparql, graphs };
}

/**
 * A write's ops with each replacing load written out as what it means: a
 * `DROP SILENT GRAPH` of its graph, then the load (how it is journaled and
 * sent to an engine). `owners[i]` is the index in `ops` of the op that
 * expanded op `i` came from (for `WriteRefusedError.opIndex`).
 */
export function expandReplaces(ops: readonly WriteOp[]): { ops: WriteOp[]; owners: number[] } {
  if (!ops.some((op) => op.kind === 'load' && op.replace)) return { ops: [...ops], owners: ops.map((_, i) => i) };
  const out: WriteOp[] = [];
  const owners: number[] = [];
  ops.forEach((op, i) => {
    if (op.kind === 'load' && op.replace) {
      out.push(updateOp(sparql`DROP SILENT GRAPH ${iri(op.graph)}`, [op.graph]), { kind: 'load', graph: op.graph, format: op.format, data: op.data });
      owners.push(i, i);
    } else {
      out.push(op);
      owners.push(i);
    }
  });
  return { ops: out, owners };
}

/** `err` with its op index mapped back through `owners` (see `expandReplaces`); other errors as they are. */
function refusalOfGiven(err: unknown, owners: readonly number[]): unknown {
  if (!(err instanceof WriteRefusedError)) return err;
  const given = owners[err.opIndex] ?? err.opIndex;
  return given === err.opIndex ? err : new WriteRefusedError(given, err.engineMessage);
}

/**
 * Runs `write` on the given ops with their replacing loads expanded
 * (`expandReplaces`), as each store journals and applies them; a refusal's
 * op index names the op the caller gave.
 */
export async function writeWithReplacesExpanded<T>(given: readonly WriteOp[], write: (ops: WriteOp[]) => Promise<T>): Promise<T> {
  const { ops, owners } = expandReplaces(given);
  try {
    return await write(ops);
  } catch (err) {
    throw refusalOfGiven(err, owners);
  }
}
