import oxigraph from 'oxigraph';
import type pg from 'pg';
import { encodeRecord, type JournalRecord } from '../journal.js';
import { splitRecord } from '../journal-records.js';
import { OxigraphStore, LARGE_WRITE_CHARS, applyOp, checkOnScratch, coalesceUpdates, conditionHolds, loadBytes } from '../embedded/oxigraph-store.js';
import { assertDeclared, checkGraphsFromEnv } from '../declared-graphs.js';
import { ExclusiveSections } from '../sections.js';
import { InstanceLease } from '../instance-lease.js';
import {
  DEFAULT_GRAPH, StoreUnavailableError, WriteRefusedError, declaredGraphs, opsWithTexts, updateOp, writeWithReplacesExpanded,
  type Binding, type JournalOp, type QuadStore, type StoredOp, type QueryScope, type StoreCapabilities, type StoreHealth, type WriteCondition, type WriteInput, type WriteOp,
} from '../store.js';
import { iri, literal, raw, sparql, sparqlFragment, type Sparql, type SparqlFragment } from '../../rdf/sparql.js';
import { Graphs, SERVICE_STREAM } from '../../rdf/graphs.js';
import { CHANNEL, HeadMovedError, LeaseLostError, LogCorruptError, PgArchives, PgLog, type Append, type Fence, type Heads, type StoredRecord } from './log.js';
import { NotOwnerError, Placement } from './placement.js';
import { graphsReadBy, graphsReadByWrite } from './read-graphs.js';
import { Residency, ResidencyRetry, byWrite, graphsChangedByRecord, materialize, namedGraphsOf, opsForHeld, streamsReadByRecord } from './residency.js';
import { freeStore } from '../scratch.js';
import { sessionCheck } from '../read-session.js';
import { snapshotInWorker } from './snapshot-in-worker.js';
/** A write waiting to be appended with others to its stream (`ClusterStore.committedTogether`). */
interface Together {
  given: WriteOp[];
  expanded: WriteOp[];
  condition: WriteCondition | null;
  settle(outcome: boolean | Error): void;
}

/** A write of this instance appended together, not yet applied: its record, and whether its append was answered. */
interface PendingOwn { write: Together; record: Buffer; committed: boolean }

/** The key of a record in `pendingOwn`. */
const ownKey = (stream: string, seq: number): string => `${seq} ${stream}`;

/** An error of a write after it committed (a listener's): passed to the caller as it is, never taken for an append that failed. */
class CommittedError extends Error {
  constructor(override readonly cause: unknown) {
    super('committed');
  }
}

/** Records read from PostgreSQL per query while catching up. */
const CATCH_UP_BATCH = 256;

export interface ClusterStoreOptions {
  /** Record bytes after the newest snapshot past which the instance that appends takes a new one. */
  snapshotAfterBytes: number;
  /** The service's base IRI (WSM_BASE_IRI): which graphs are a workspace's, so which stream a write goes to (`Graphs.streamOf`). */
  baseIri?: string;
  /** Milliseconds between two attempts to reach PostgreSQL again while it cannot be reached. */
  probeMs?: number;
  onWarning?: (message: string) => void;
  onInfo?: (message: string) => void;
  /**
   * Residency (WSM_CLUSTER_RESIDENT_QUADS, docs/cluster.md "Residency"):
   * quads past which the least recently used workspaces are let go, and
   * milliseconds after which an unused workspace is let go. Absent: the
   * instance holds every stream.
   */
  residency?: { quads: number; idleMs: number };
  /**
   * Placement (WSM_CLUSTER_PLACEMENT=lease, docs/cluster.md "Placement"):
   * a workspace's stream is written only under this instance's lease on it
   * (milliseconds a lease lasts unless renewed; milliseconds after which an
   * unused one is released). Absent: every instance writes every stream.
   */
  placement?: { leaseMs: number; idleMs: number };
}

/** The options with their defaults filled in. */
export type ClusterStoreSettings = Required<Omit<ClusterStoreOptions, 'baseIri' | 'residency' | 'placement'>> & Pick<ClusterStoreOptions, 'baseIri' | 'residency' | 'placement'>;

/** What /metrics shows of residency. */
export interface ResidencyStats { residentWorkspaces: number; loads: number; evictions: number }

/** What opening the store found; for logs and tests. */
export interface ClusterOpenInfo { snapshotSeq: number; snapshotQuads: number; recordsReplayed: number; streams: number; millis: number }

/** The base IRI when none is given (WSM_BASE_IRI's default). */
const DEFAULT_BASE = 'https://workspaces.local/';

/**
 * The cluster store (docs/cluster.md): the data in an embedded Oxigraph
 * (`OxigraphStore`, in memory, a replica), the journal and the snapshots in
 * PostgreSQL (`PgLog`), shared by every instance.
 *
 * - The journal has a stream per workspace (`ws:<id>`) and one for the
 *   service's own graphs (`service`): `Graphs.streamOf`.
 * - A write, under this instance's apply lock: its ops checked, its
 *   condition asked on the replica, its record appended to each stream it
 *   changes at the replica's seq of that stream + 1, in one transaction
 *   that fails when the head of any stream it changes or reads moved (then:
 *   catch up, ask again, append again), so a record is only ever appended
 *   at the heads it was checked against. A condition that fails is asked
 *   again after catching up (the replica may be behind). Once committed
 *   the replica applies it. Acknowledged means committed in PostgreSQL.
 * - A read first checks the heads (one sum over `wsm_heads`, shared by
 *   every read that starts while none is under way) and catches up when
 *   they moved, so it sees every write answered before it started, on any
 *   instance. NOTIFY brings the replica up to date between reads.
 * - Catching up applies the records the replica lacks in the order their
 *   writes took (gseq), once per write however many streams it changed.
 * - PostgreSQL out of reach: reads answer from the replica as it is, writes
 *   fail with `StoreUnavailableError`, `health` says so, and the store
 *   probes until it answers again.
 */
export class ClusterStore implements QuadStore {
  /** Every instance appends to the log; replicas made from a snapshot name no emptied graph (`StoreCapabilities`). */
  readonly capabilities: StoreCapabilities = { otherInstancesWrite: true, durable: true, graphPatternNamesGraphs: false };
  /** The replica: every write of every instance, applied in the log's order. */
  readonly replica: OxigraphStore;
  /** Seq of each stream the replica holds (absent: none of its records). */
  private readonly applied: Heads;
  /** The sum of `applied`: compared with the sum of the heads in PostgreSQL. */
  private appliedTotal: number;
  readonly graphs: Graphs;
  /** Catch-up and writes, one at a time. */
  private readonly applyLock = new ExclusiveSections();
  private readonly sections = new ExclusiveSections();
  private readonly checkGraphs = checkGraphsFromEnv();
  private checkRunning: Promise<void> | null = null;
  private checkQueued: Promise<void> | null = null;
  private unavailable: { since: Date; reason: string } | undefined;
  private probeTimer: NodeJS.Timeout | undefined;
  private listener: pg.Client | undefined;
  private listenTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** The number (sum of heads) of the newest snapshot known. */
  private snapshotSeq: number;
  private bytesSinceSnapshot: number;
  private snapshotting = false;
  /** Appends that found a head they checked moved by another instance (each then caught up and tried again). */
  headConflicts = 0;
  /** Head lookups made by `fresh()` (reads' checks), for /metrics. */
  headLookups = 0;
  /** Appends committed by this instance, and the writes (records) they held: writes sharing a commit make fewer appends. */
  appends = { commits: 0, writes: 0 };
  instance: InstanceLease | undefined;
  /** The hosted registry's archives, in PostgreSQL: every instance serves every published version. */
  readonly archives: PgArchives;
  /** Which workspace streams the replica holds (docs/cluster.md, "Residency"); absent: every stream. */
  private residency: Residency | undefined;
  /** Quads of what is held besides the workspaces loaded (the service's graphs), as last counted. */
  private serviceQuads = 0;
  private residencyTimer: NodeJS.Timeout | undefined;
  private enforcing: Promise<void> | null = null;
  /** Records replayed at open that change graphs of a stream they are not in (written by the one-stream layout): loading a stream cannot find them. */
  private foreignRecords = false;
  /** The replay at open runs on the service's part of the snapshot alone (`holdServiceOnly`). */
  private serviceOnlyReplay = false;
  /** This instance's leases on workspace streams (placement); absent: it writes any stream. */
  readonly placement: Placement | undefined;

  constructor(
    raw: oxigraph.Store,
    readonly log: PgLog,
    /** WSM_POSTGRES_URL: the snapshot worker connects on its own. */
    private readonly url: string,
    private readonly listen: () => Promise<pg.Client>,
    readonly info: ClusterOpenInfo,
    snapshotHeads: Heads,
    snapshotBytesAfter: number,
    private readonly options: ClusterStoreSettings,
  ) {
    this.replica = new OxigraphStore(raw);
    this.archives = new PgArchives(log.pool);
    this.graphs = new Graphs(options.baseIri ?? DEFAULT_BASE);
    this.applied = new Map(snapshotHeads);
    this.appliedTotal = [...snapshotHeads.values()].reduce((a, b) => a + b, 0);
    this.snapshotSeq = info.snapshotSeq;
    this.bytesSinceSnapshot = snapshotBytesAfter;
    this.placement = options.placement ? new Placement(log, { ...options.placement, onWarning: options.onWarning }) : undefined;
  }

  /** Seq of the last record of `stream` the replica holds (0: none). */
  appliedSeq(stream: string): number {
    return this.applied.get(stream) ?? 0;
  }

  /** Seq of every stream the replica holds. */
  appliedHeads(): Heads {
    return new Map(this.applied);
  }

  private setApplied(stream: string, seq: number): void {
    this.appliedTotal += seq - (this.applied.get(stream) ?? 0);
    this.applied.set(stream, seq);
  }

  /** Whether the replica holds `stream` (without residency: every stream). */
  holds(stream: string): boolean {
    return !this.residency || this.residency.holds(stream);
  }

  /** The workspace streams held, least recently used first (residency only; else empty). */
  residentStreams(): string[] {
    return this.residency?.streams() ?? [];
  }

  /** Residency's counts for /metrics; undefined without residency. */
  residencyStats(): ResidencyStats | undefined {
    const r = this.residency;
    return r ? { residentWorkspaces: r.streams().length, loads: r.loads, evictions: r.evictions } : undefined;
  }

  /** Records committed in PostgreSQL that the replica has neither applied nor passed over (one head lookup). */
  async lagRecords(): Promise<number> {
    return Math.max(0, await this.log.headsTotal() - this.appliedTotal);
  }

  /**
   * Starts residency once the store is open (`openClusterStore`): the
   * replica lets go of every workspace (a snapshot is stored first when
   * records replayed at open change graphs outside their streams, so that
   * loading a stream never needs them) and holds the service's graphs.
   */
  async startResidency(): Promise<void> {
    const settings = this.options.residency;
    if (!settings || this.residencyTimer) return;
    if (!this.residency) {
      if (this.foreignRecords) await this.snapshot(true);
      await this.applyLock.run('apply', async () => {
        const drop = namedGraphsOf(this.replica.raw).filter((g) => this.graphs.streamOf(g) !== SERVICE_STREAM);
        if (drop.length > 0) await this.replica.write(drop.map(dropGraph));
        this.residency = new Residency(settings.quads, settings.idleMs);
        this.serviceQuads = this.replica.raw.size;
      });
    }
    const every = Math.max(1000, Math.min(60_000, Math.floor(settings.idleMs / 2)));
    this.residencyTimer = setInterval(() => { this.enforceResidency({ count: true }).catch(this.warnResidency); }, every);
    this.residencyTimer.unref();
  }

  /**
   * At open, before the replay, on a replica made of the service's part of
   * the snapshot alone (`openClusterStore`): residency from the first, so
   * the replay passes over the records of workspace streams. A replayed
   * record that changes graphs of a stream it is not in (the one-stream
   * layout) stops the replay with `ServiceOnlyRefused`: the store is then
   * opened whole.
   */
  holdServiceOnly(): void {
    const settings = this.options.residency;
    if (!settings) return;
    this.residency = new Residency(settings.quads, settings.idleMs);
    this.serviceQuads = this.replica.raw.size;
    this.serviceOnlyReplay = true;
  }

  /** After a replay of the service's records only: the bytes of every stream's records since the snapshot (when to take the next one). */
  setBytesSinceSnapshot(bytes: number): void {
    this.bytesSinceSnapshot = bytes;
  }

  private readonly warnResidency = (err: unknown): void => {
    if (!this.closed) this.options.onWarning(`letting go of workspaces failed: ${err instanceof Error ? err.message : String(err)}`);
  };

  /** The streams a read touches: its scope's, else those of the graphs its text reads (parsed once per text); 'all' when it cannot name them. */
  private streamsOfRead(query: string, scope?: QueryScope): Set<string> | 'all' {
    const graphs = new Set<string>([...(scope?.defaultGraphs ?? []), ...(scope?.namedGraphs ?? [])]);
    if (!(scope?.defaultGraphs && scope.namedGraphs)) {
      // Kept by graphsReadBy (by text, literals left out); past its length limit, every graph.
      const read = graphsReadBy(query);
      if (read === 'any') return 'all';
      for (const g of read) graphs.add(g);
    }
    return new Set([...graphs].map((g) => this.graphs.streamOf(g)));
  }

  /** Streams among `streams` (or among every stream with records) that the replica does not hold. */
  private missing(streams: ReadonlySet<string> | 'all'): Set<string> {
    const all = streams === 'all' ? [...this.applied].filter(([, seq]) => seq > 0).map(([s]) => s) : streams;
    return new Set([...all].filter((s) => !this.holds(s)));
  }

  /** Runs `read` once the replica holds every stream it touches (loading those it lacks); none of them is let go while it runs. */
  private async reading<T>(streams: Set<string> | 'all', read: () => Promise<T>): Promise<T> {
    await this.fresh();
    const residency = this.residency;
    if (!residency) return read();
    const unpin = residency.pin(streams);
    try {
      if (this.missing(streams).size > 0) {
        if (this.unavailable) throw this.unavailableError('a workspace this instance does not hold cannot be loaded');
        try {
          await this.applyLock.run('apply', () => this.ensureLocked(streams));
        } catch (err) {
          this.markUnavailable(err);
          throw this.unavailableError('a workspace this instance does not hold cannot be loaded');
        }
        this.scheduleResidency();
      }
      residency.touch(streams === 'all' ? residency.streams() : streams);
      return await read();
    } finally {
      unpin();
    }
  }

  /** Under the apply lock: caught up, then the streams the replica lacks loaded at the heads it caught up to. */
  private async ensureLocked(streams: ReadonlySet<string> | 'all'): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const { upto } = await this.catchUpLocked();
      const missing = this.missing(streams);
      if (missing.size === 0) return;
      try {
        await this.loadLocked(missing, upto, false);
        return;
      } catch (err) {
        if (!(err instanceof ResidencyRetry) || attempt >= 3) throw err;
      }
    }
  }

  /**
   * Under the apply lock: `streams` built at the cut `upto` (`materialize`)
   * and put in the replica in place of what it held of them (through the
   * store, so revisions move and read caches let go). Streams not held
   * become held. With `all`, every stream is at `upto` afterwards (the
   * others passed over).
   */
  private async loadLocked(streams: ReadonlySet<string>, upto: Heads, all: boolean): Promise<void> {
    const residency = this.residency!;
    const built = await materialize(this.log, this.graphs, streams, upto);
    const quads = new Map<string, number>();
    try {
      const have = namedGraphsOf(this.replica.raw).filter((g) => streams.has(this.graphs.streamOf(g)));
      const ops: WriteOp[] = [];
      const made = new Set<string>();
      for (const g of namedGraphsOf(built.store)) {
        const stream = this.graphs.streamOf(g);
        if (!streams.has(stream)) continue;
        const data = built.store.dump({ format: 'application/n-triples', from_graph_name: oxigraph.namedNode(g) });
        quads.set(stream, (quads.get(stream) ?? 0) + countLines(data));
        ops.push({ kind: 'load', graph: g, format: 'application/n-triples', data, replace: true });
        made.add(g);
      }
      for (const g of have) if (!made.has(g)) ops.push(dropGraph(g));
      if (streams.has(SERVICE_STREAM)) {
        const data = built.store.dump({ format: 'application/n-triples', from_graph_name: oxigraph.defaultGraph() });
        ops.push(updateOp(sparql`DROP SILENT DEFAULT`, [DEFAULT_GRAPH]));
        if (data.length > 0) ops.push(updateOp(sparql`INSERT DATA { ${raw(data)} }`, [DEFAULT_GRAPH]));
      }
      if (ops.length > 0) await this.replica.write(ops);
    } finally {
      freeStore(built.store);
    }
    for (const [stream, seq] of all ? upto : [...streams].map((s) => [s, upto.get(s) ?? 0] as const)) this.setApplied(stream, seq);
    for (const stream of streams) {
      if (stream === SERVICE_STREAM || residency.holds(stream)) continue;
      residency.add(stream, quads.get(stream) ?? 0);
      residency.loads++;
    }
  }

  /**
   * A record being caught up reads (or may change) a stream the replica
   * lacks: every stream held and those are built again at the heads now
   * (`loadLocked`), since the record must be applied on the state of what
   * it reads as of when it was appended.
   */
  private async resyncLocked(lacking: ReadonlySet<string>): Promise<Heads> {
    for (let attempt = 1; ; attempt++) {
      const upto = await this.log.heads();
      try {
        await this.loadLocked(new Set([SERVICE_STREAM, ...this.residentStreams(), ...lacking]), upto, true);
        return upto;
      } catch (err) {
        if (!(err instanceof ResidencyRetry) || attempt >= 3) throw err;
      }
    }
  }

  /** The streams a record to catch up reads or changes that the replica does not hold (residency), beside the ones it is in. */
  private lackedBy(rows: readonly StoredRecord[]): Set<string> {
    const ops = opsForHeld(splitRecord(rows[0]!.ops).ops, this.graphs, (s) => this.holds(s));
    const lacking = new Set<string>();
    const read = streamsReadByRecord(this.graphs, ops);
    const changed = graphsChangedByRecord(ops);
    const everyStream = [...this.applied.keys()];
    for (const s of read === 'any' ? everyStream : read) if (!this.holds(s)) lacking.add(s);
    if (changed === 'any') for (const s of everyStream) if (!this.holds(s)) lacking.add(s);
    return lacking;
  }

  private scheduleResidency(): void {
    if (!this.residency || this.enforcing || this.closed) return;
    this.enforcing = this.enforceResidency().then(() => undefined, this.warnResidency).finally(() => { this.enforcing = null; });
  }

  /**
   * Lets go of the workspaces unused for the idle time, then of the least
   * recently used while the replica holds more quads than the budget (not
   * those a read under way uses). The quads held are counted (`count`: the
   * idle timer) or estimated: the service's as last counted plus each
   * workspace's as loaded. Answers the streams let go.
   */
  async enforceResidency(options: { count?: boolean; now?: number } = {}): Promise<string[]> {
    const residency = this.residency;
    if (!residency || this.closed) return [];
    const now = options.now ?? Date.now();
    return this.applyLock.run('apply', async () => {
      const evicted: string[] = [];
      for (const { stream, usedAt } of residency.evictable()) {
        if (now - usedAt < residency.idleMs) break;
        if (await this.evictLocked(stream)) evicted.push(stream);
      }
      const loaded = () => [...residency.loadedQuads.values()].reduce((a, b) => a + b, 0);
      if (options.count) this.serviceQuads = Math.max(0, this.replica.raw.size - loaded());
      for (const { stream } of residency.evictable()) {
        if (this.serviceQuads + loaded() <= residency.budgetQuads) break;
        if (await this.evictLocked(stream)) evicted.push(stream);
      }
      return evicted;
    });
  }

  /**
   * Under the apply lock: the stream's graphs dropped from the replica
   * (through the store: revisions move); its records are passed over from
   * now on. Not while a read that began uses it (false then). It stops
   * being held before its graphs go, so a read that begins meanwhile loads
   * it again (after this, under the apply lock) rather than read it going.
   */
  private async evictLocked(stream: string): Promise<boolean> {
    const residency = this.residency!;
    if (residency.pinned(stream) || !residency.holds(stream)) return false;
    residency.remove(stream);
    residency.evictions++;
    // Placement: the workspace goes with its lease, so an instance that holds it takes it at once.
    this.placement?.release([stream]).catch(this.warnResidency);
    const drop = namedGraphsOf(this.replica.raw).filter((g) => this.graphs.streamOf(g) === stream);
    if (drop.length > 0) await this.replica.write(drop.map(dropGraph));
    return true;
  }

  get version(): number {
    return this.replica.version;
  }

  select(query: Sparql, scope?: QueryScope): Promise<Binding[]> {
    if (!this.residency) return this.fresh().then(() => this.replica.select(query, scope));
    return this.reading(this.streamsOfRead(query, scope), () => this.replica.select(query, scope));
  }

  selectIris(query: Sparql, variable: string, scope?: QueryScope): Promise<string[]> {
    if (!this.residency) return this.fresh().then(() => this.replica.selectIris(query, variable, scope));
    return this.reading(this.streamsOfRead(query, scope), () => this.replica.selectIris(query, variable, scope));
  }

  ask(query: Sparql, scope?: QueryScope): Promise<boolean> {
    if (!this.residency) return this.fresh().then(() => this.replica.ask(query, scope));
    return this.reading(this.streamsOfRead(query, scope), () => this.replica.ask(query, scope));
  }

  construct(query: Sparql, scope?: QueryScope): Promise<string> {
    if (!this.residency) return this.fresh().then(() => this.replica.construct(query, scope));
    return this.reading(this.streamsOfRead(query, scope), () => this.replica.construct(query, scope));
  }

  queryRaw(query: Sparql, resultsFormat: string, scope?: QueryScope): Promise<string | boolean> {
    if (!this.residency) return this.fresh().then(() => this.replica.queryRaw(query, resultsFormat, scope));
    return this.reading(this.streamsOfRead(query, scope), () => this.replica.queryRaw(query, resultsFormat, scope));
  }

  dumpGraph(graph: string): Promise<string> {
    if (!this.residency) return this.fresh().then(() => this.replica.dumpGraph(graph));
    return this.reading(new Set([this.graphs.streamOf(graph)]), () => this.replica.dumpGraph(graph));
  }

  /** The store's own graphs (`<base>store/...`: instance leases), known once the lease started; left out of the service's graphs. */
  private ownPrefix: string | undefined;

  private serviceGraphFilter(): SparqlFragment {
    return this.ownPrefix ? sparqlFragment`FILTER(!STRSTARTS(STR(?g), ${literal(this.ownPrefix)}))` : sparqlFragment``;
  }

  /**
   * With residency, `prefix` (a workspace's graphs' prefix) loads only that
   * workspace; without one every stream is loaded.
   */
  async graphNames(prefix?: string): Promise<string[]> {
    const query = sparql`SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } ${this.serviceGraphFilter()} }`;
    const names = (rows: Binding[]) => rows.map((b) => b.g!.value).filter((g) => prefix === undefined || g.startsWith(prefix));
    if (!this.residency) return names(await this.select(query));
    const stream = prefix === undefined ? SERVICE_STREAM : this.graphs.streamOf(`${prefix}x`);
    const streams = stream === SERVICE_STREAM ? 'all' as const : new Set([stream]);
    return this.reading(streams, async () => names(await this.replica.select(query)));
  }

  /** Quads of the service's graphs (the store's own records left out, as `graphNames` does); with residency, of the graphs this instance holds. */
  async size(): Promise<number> {
    if (this.residency) {
      await this.fresh();
      return this.ownPrefix ? this.countOn(this.replica) : this.replica.size();
    }
    if (!this.ownPrefix) return this.fresh().then(() => this.replica.size());
    return this.countOn(this);
  }

  private async countOn(store: Pick<QuadStore, 'select'>): Promise<number> {
    const rows = await store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } ${this.serviceGraphFilter()} } }`);
    return Number(rows[0]?.n?.value ?? 0);
  }

  /** Whether the store holds no quad of the service: an instance's lease record does not count (the first start's check). */
  async isEmpty(): Promise<boolean> {
    const query = sparql`ASK { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } ${this.serviceGraphFilter()} } }`;
    if (!this.residency) return !await this.ask(query);
    await this.fresh();
    // A workspace with records is data, held or not.
    return this.missing('all').size === 0 && !await this.replica.ask(query);
  }

  revision(graph: string): number {
    return this.replica.revision(graph);
  }

  /** The read caches' hook: the replica caught up to the head, so revisions moved by other instances' writes have moved here (with residency: the graphs' workspaces loaded, so their revisions move). */
  syncRevisions(graphs?: readonly string[]): Promise<void> {
    if (!this.residency || !graphs) return this.fresh();
    return this.reading(new Set(graphs.map((g) => this.graphs.streamOf(g))), () => Promise.resolve());
  }

  onWrite(listener: (graphs: ReadonlySet<string>) => void): () => void {
    return this.replica.onWrite(listener);
  }

  /** Within this instance only: invariants across instances are kept by `writeIf` (docs/architecture.md). */
  exclusive<T>(key: string, fn: () => Promise<T>): Promise<T> {
    return this.sections.run(key, fn);
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

  health(): StoreHealth {
    if (!this.unavailable) return { writable: true, readable: true };
    return { writable: false, readable: true, reason: this.unavailable.reason, since: this.unavailable.since, retryAfterSeconds: this.retryAfterSeconds() };
  }

  /**
   * Resolves once the replica holds every record committed before the call
   * (one head lookup; every call made while a lookup is under way shares
   * the next one). While PostgreSQL cannot be reached, at once: reads
   * answer from the replica as it is. Within a read session (an HTTP
   * request, src/store/read-session.ts) the session's first lookup serves
   * its later reads.
   */
  fresh(): Promise<void> {
    return sessionCheck(this, this.lookup);
  }

  private readonly lookup = (): Promise<void> => {
    if (this.unavailable || this.closed) return Promise.resolve();
    if (!this.checkRunning) return this.startCheck();
    this.checkQueued ??= this.checkRunning.then(() => {
      this.checkQueued = null;
      return this.startCheck();
    });
    return this.checkQueued;
  };

  private startCheck(): Promise<void> {
    const run: Promise<void> = this.checkHead().finally(() => {
      if (this.checkRunning === run) this.checkRunning = null;
    });
    this.checkRunning = run;
    return run;
  }

  private async checkHead(): Promise<void> {
    this.headLookups++;
    try {
      // Heads only grow, and the replica and this instance's writes appended together, committed and not yet
      // applied (`pendingOwn`, answered once applied, so never seen by a client) are committed records: equal sums mean
      // nothing else was committed before the heads were read.
      const known = this.appliedTotal + this.pendingCommitted;
      if (await this.log.headsTotal() > known) await this.catchUp();
    } catch (err) {
      this.markUnavailable(err);
    }
  }

  /**
   * The highest seq of each stream this instance has sent an append for:
   * a notice of it is this instance's own (or, when that append lost a
   * race, the winner's, which the loser catches up to itself). Notices
   * only hasten catch-up; reads check the heads whatever they say.
   */
  private readonly ownAppends = new Map<string, number>();
  /** A catch-up asked for by notices and not yet begun: notices arriving meanwhile share it. */
  private noticed: Promise<void> | null = null;

  private catchUpSoon(): void {
    if (this.noticed) return;
    this.noticed = this.applyLock.run('apply', async () => {
      // Begun: a notice from now on may be of a record committed after the heads this one reads.
      this.noticed = null;
      await this.catchUpLocked();
    }).catch((err: unknown) => this.markUnavailable(err));
  }

  private noteAppending(rows: readonly Append[]): void {
    for (const row of rows) if (row.seq > (this.ownAppends.get(row.stream) ?? 0)) this.ownAppends.set(row.stream, row.seq);
  }

  /** Applies every record committed after the replica's last one. */
  catchUp(): Promise<void> {
    return this.applyLock.run('apply', async () => { await this.catchUpLocked(); });
  }

  /**
   * Applies the records committed up to the heads as one statement sees
   * them, in the order of their writes (gseq): a write that read or changed
   * a stream is applied after every earlier write to it, as it was checked.
   * The rows of one write (one per stream it changed) are applied once.
   * `replay` applies to the bare replica (at open); otherwise through the
   * store, so revisions and listeners see it.
   */
  private async catchUpLocked(replay = false): Promise<{ applied: number; upto: Heads }> {
    const upto = await this.log.heads();
    let applied = 0;
    // Residency: the records of streams not held are passed over (their seq remembered as applied).
    if (this.residency) for (const [stream, seq] of upto) if (!this.holds(stream) && seq > this.appliedSeq(stream)) this.setApplied(stream, seq);
    for (;;) {
      let rows = await this.log.recordsBetween(this.applied, upto, CATCH_UP_BATCH);
      const full = rows.length === CATCH_UP_BATCH;
      // A full batch may end inside a write's rows: the rest of that write comes with the next batch.
      if (full) {
        const last = rows[rows.length - 1]!.gseq;
        const whole = rows.filter((r) => r.gseq !== last);
        if (whole.length > 0) rows = whole;
      }
      for (const write of byWrite(rows)) {
        if (this.residency) {
          const lacking = this.lackedBy(write);
          if (lacking.size > 0) return { applied, upto: await this.resyncLocked(lacking) };
        }
        await this.applyWrite(write, replay);
        applied++;
      }
      if (!full) return { applied, upto };
    }
  }

  /** Applies another instance's write (its rows, one per stream) to the replica, as replay does: its condition asked here, where it was asked when it was appended. */
  private async applyWrite(rows: StoredRecord[], replay: boolean): Promise<void> {
    for (const row of rows) {
      const expected = this.appliedSeq(row.stream) + 1;
      if (row.seq !== expected) throw new LogCorruptError(`stream ${row.stream} in PostgreSQL lacks record ${expected} (the next one is ${row.seq}): refusing an incomplete history`);
    }
    // This instance's own, appended together and not yet applied: applied through its write, which is settled
    // (the same bytes: while an append that lost the race is under way, its seq is another's record).
    const own = rows.length === 1 ? this.pendingOwn.get(ownKey(rows[0]!.stream, rows[0]!.seq)) : undefined;
    if (own && rows[0]!.raw?.equals(own.record)) return this.applyOwn(rows[0]!.stream, rows[0]!.seq, own);
    const { condition, ops } = splitRecord(rows[0]!.ops);
    const given = ops as WriteOp[];
    if (this.options.residency && !this.residency && !this.foreignRecords) {
      const changed = graphsChangedByRecord(ops);
      const streams = new Set(rows.map((r) => r.stream));
      this.foreignRecords = changed === 'any' || [...changed].some((g) => !streams.has(this.graphs.streamOf(g)));
    }
    if (replay && this.serviceOnlyReplay) await this.refuseForeign(rows, ops);
    try {
      if (this.residency) {
        // Without its condition: it held when the record was appended (docs/cluster.md, "Residency"), and the replica may lack what it reads;
        // but a condition asked only where it applies (`late`) reads only the record's one stream, which is held. Only the ops changing
        // what is held (`opsForHeld`).
        const held = opsForHeld(ops, this.graphs, (s) => this.holds(s));
        if (held.length > 0) {
          if (condition?.late) await this.replica.writeIf({ ask: condition.ask as Sparql, expect: condition.expect }, held as WriteOp[]);
          else await this.replica.write(held as WriteOp[]);
        }
        const changed = graphsChangedByRecord(held);
        const foreign = changed === 'any' ? [] : [...changed].filter((g) => !this.holds(this.graphs.streamOf(g)));
        if (foreign.length > 0) await this.replica.write(foreign.map(dropGraph));
      } else if (replay) replayOnto(this.replica.raw, rows[0]!);
      else if (condition) await this.replica.writeIf({ ask: condition.ask as Sparql, expect: condition.expect }, given);
      else await this.replica.write(given);
    } finally {
      for (const row of rows) {
        this.applied.set(row.stream, row.seq);
        this.appliedTotal++;
        this.bytesSinceSnapshot += row.bytes;
      }
    }
  }

  /** Replaying on the service's graphs alone: a record changing graphs of a stream its write has no row in (the one-stream layout) cannot be passed over. */
  private async refuseForeign(rows: readonly StoredRecord[], ops: readonly StoredOp[]): Promise<void> {
    const changed = graphsChangedByRecord(ops);
    if (changed === 'any') throw new ServiceOnlyRefused();
    const outside = new Set([...changed].map((g) => this.graphs.streamOf(g)).filter((s) => !rows.some((r) => r.stream === s)));
    if (outside.size === 0) return;
    const rowsOfWrite = await this.log.streamsOfWrite(rows[0]!.gseq);
    if ([...outside].some((s) => !rowsOfWrite.has(s))) throw new ServiceOnlyRefused();
  }

  /** At open: the records after the snapshot, applied to the bare replica; answers how many writes. */
  replay(): Promise<number> {
    return this.applyLock.run('apply', async () => (await this.catchUpLocked(true)).applied);
  }

  /**
   * Everything the write will send is checked before it is appended (a
   * refusal appends nothing): updates on an empty scratch store. A large
   * write's loads are checked by the replica when it is made
   * (`OxigraphStore.writeOps` with a commit): loaded ahead, hidden, into
   * graphs that are empty (a first install), or in worker threads.
   */
  private checkOps(ops: WriteOp[]): void {
    const calls = coalesceUpdates(ops);
    checkOnScratch(loadBytes(ops) <= LARGE_WRITE_CHARS ? calls : calls.filter((op) => op.kind === 'update'), 0);
  }

  private async writeChecked(given: WriteOp[], condition: WriteCondition | null): Promise<boolean> {
    if (given.length === 0 && !condition) return true;
    if (this.closed) throw new Error('store is closed');
    if (this.checkGraphs) assertDeclared(given, condition?.ask);
    const expanded = await writeWithReplacesExpanded(given, (ops) => {
      this.checkOps(ops);
      return Promise.resolve(ops);
    });
    const large = loadBytes(expanded) > LARGE_WRITE_CHARS;
    // The streams the write changes, and those whose heads it must find unmoved: the ones it changes and the ones it reads.
    const changes = [...new Set([...declaredGraphs(expanded)].map((g) => this.graphs.streamOf(g)))].sort();
    if (changes.length === 0) changes.push(SERVICE_STREAM);
    const read = graphsReadByWrite(expanded, condition?.ask);
    const checks = new Set(changes);
    if (read !== 'any') for (const g of read) checks.add(this.graphs.streamOf(g));
    // A write to one stream that reads only that stream shares a commit with the ones made meanwhile (below).
    const only = changes.length === 1 ? changes[0]! : undefined;
    if (only && !large && !this.residency && !this.placement && expanded.length > 0 && read !== 'any' && checks.size === 1
      && (!condition || conditionHolds(this.replica.raw, condition))) {
      return this.committedTogether(only, { given, expanded, condition });
    }
    return this.applyLock.run('apply', async () => {
      if (this.residency) {
        // What the write changes and reads is held first: its condition is asked on the replica.
        const needed = read === 'any' ? 'all' as const : checks;
        if (this.missing(needed).size > 0) {
          if (this.unavailable) throw this.unavailableError();
          try {
            await this.ensureLocked(needed);
          } catch (err) {
            this.markUnavailable(err);
            throw this.unavailableError();
          }
        }
        this.residency.touch(needed === 'all' ? this.residency.streams() : needed);
      }
      // First at the replica's seqs, without asking: the append fails if any of them is not the head.
      let atHead = false;
      let behind = false;
      let leaseTries = 0;
      for (;;) {
        if (this.unavailable) throw this.unavailableError();
        // This instance's writes appended together before this one come first (else its seqs would find the heads moved).
        for (const stream of checks) await this.applyOwnPending(stream);
        let rows: Append[];
        try {
          // A condition that fails here, or one asked alone, is asked again at the head.
          const holds = () => !condition || conditionHolds(this.replica.raw, condition);
          if (behind || (!atHead && (expanded.length === 0 || !holds()))) {
            await this.catchUpLocked();
            atHead = true;
            behind = false;
          }
          if (!holds()) return false;
          if (expanded.length === 0) return true;
          // The same record in each stream it changes, at that stream's next seq (each row checks on its own), with one commit time.
          const append = async (record: readonly JournalOp[]): Promise<Append[]> => {
            const at = Date.now();
            const appended = changes.map((stream) => {
              const seq = this.appliedSeq(stream) + 1;
              return { stream, seq, record: encodeRecord(seq, record, at) };
            });
            // A write whose reads cannot be named is checked against every head: each at the seq the replica holds.
            const expected: Heads = read === 'any' ? new Map([...this.applied, ...[...checks].map((stream): [string, number] => [stream, this.appliedSeq(stream)])])
              : new Map([...checks].map((stream) => [stream, this.appliedSeq(stream)]));
            // Placement: under this instance's lease on each workspace stream it changes (taken first when not held).
            const fence: Fence | undefined = this.placement ? await this.placement.fence(changes) : undefined;
            this.noteAppending(appended);
            await this.log.append(appended, expected, read === 'any', fence);
            this.appends.commits++;
            this.appends.writes++;
            for (const row of appended) this.bytesSinceSnapshot += row.record.length;
            return appended;
          };
          if (large) {
            // The replica checks the loads (once: into empty graphs ahead, hidden) and calls `append` before applying.
            let committed: Append[] | null = null;
            try {
              return await this.replica.writeOps(given, condition, async (record) => { committed = await append(record); });
            } catch (err) {
              if (!committed) throw err;
              // Committed: as below, a listener's error is reported, the record counted as applied.
              throw new CommittedError(err);
            } finally {
              if (committed) this.countApplied(committed);
            }
          }
          const record: JournalOp[] = condition ? [{ kind: 'condition', ask: condition.ask, expect: condition.expect }, ...expanded] : expanded;
          rows = await append(record);
        } catch (err) {
          if (err instanceof CommittedError) throw err.cause;
          if (err instanceof WriteRefusedError) throw err;
          if (err instanceof HeadMovedError) {
            this.headConflicts++;
            behind = true;
            continue;
          }
          if (err instanceof NotOwnerError) throw err;
          if (err instanceof LeaseLostError && this.placement) {
            // Fenced: another instance took the stream over (or the lease ended). Taken again if free, else NotOwnerError.
            this.placement.lost(err.stream);
            behind = true;
            if (++leaseTries < 3) continue;
            throw Object.assign(new StoreUnavailableError(err.message, undefined), { retryAfterSeconds: 1 });
          }
          this.markUnavailable(err);
          throw this.unavailableError();
        }
        // Committed: the replica applies it as every other instance will. Counted as applied even if that
        // throws (a listener's error): applying a record twice would be worse than reporting the error.
        try {
          return condition ? await this.replica.writeIf(condition, given) : (await this.replica.write(given), true);
        } finally {
          this.countApplied(rows);
        }
      }
    }).finally(() => this.scheduleResidency());
  }

  /** Writes to one stream waiting for the instance's previous group append, by stream: they are appended together. */
  private readonly together = new Map<string, Together[]>();
  /** One group append at a time (its seqs follow the previous one's), beside the apply lock: a group is appended while the one before it is applied. */
  private readonly appendLock = new ExclusiveSections();
  /**
   * Writes of this instance appended together and not yet applied, by
   * `ownKey(stream, seq)`: each registered before its append is sent, so
   * that whichever reaches its record first under the apply lock, the
   * append's own apply or a catch-up (which finds it in PostgreSQL once
   * committed), applies it in the log's order and settles it.
   */
  private readonly pendingOwn = new Map<string, PendingOwn>();
  /** Per stream, how many of `pendingOwn` are in it: they follow its applied seq, so the next group's seqs follow them. */
  private readonly pendingIn = new Map<string, number>();
  /** How many of `pendingOwn` are known committed (their append answered). */
  private pendingCommitted = 0;

  /**
   * Group commit: writes to one stream that read no other are appended
   * together, one statement and one commit for all the writes queued while
   * the instance's previous group append was under way, each a record of
   * its own. Their conditions are not asked before: each is appended with
   * its condition marked to be asked where it applies (`late`), in the
   * stream's order, which every replica follows, so every replica gives
   * the same outcome (the condition reads only that stream's graphs). A
   * condition that fails leaves a record that changes nothing. The caller
   * asked the condition first on the replica, so records that would change
   * nothing are rare: a condition failing there goes the usual way.
   *
   * A group is applied under the apply lock once committed, while the next
   * group is appended: PostgreSQL's commit of one overlaps the replica's
   * work on the other.
   */
  private committedTogether(stream: string, write: Omit<Together, 'settle'>): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      const entry: Together = { ...write, settle: (outcome) => (outcome instanceof Error ? reject(outcome) : resolve(outcome)) };
      const queued = this.together.get(stream);
      if (queued) {
        queued.push(entry);
        return;
      }
      this.together.set(stream, [entry]);
      void this.appendLock.run('append', async () => {
        // The writes queued until now; those made from here on wait for the next append.
        const writes = this.together.get(stream) ?? [];
        this.together.delete(stream);
        try {
          await this.appendTogether(stream, writes);
        } catch (err) {
          // Not expected (each step settles its writes): none is left waiting. A settled write ignores this.
          for (const w of writes) w.settle(err instanceof Error ? err : new Error(String(err)));
        }
      });
    });
  }

  /** Under the append lock: `writes` (all to `stream`) appended in one statement, after the stream's applied and pending records; then applied in order under the apply lock. */
  private async appendTogether(stream: string, writes: readonly Together[]): Promise<void> {
    for (let behind = false; ;) {
      if (this.unavailable || this.closed) {
        const error = this.unavailable ? this.unavailableError() : new Error('store is closed');
        for (const w of writes) w.settle(error);
        return;
      }
      let records: Append[] = [];
      try {
        if (behind) await this.catchUp();
        const base = this.appliedSeq(stream) + (this.pendingIn.get(stream) ?? 0);
        const at = Date.now();
        records = writes.map((w, i) => {
          const ops: JournalOp[] = w.condition ? [{ kind: 'condition', ask: w.condition.ask, expect: w.condition.expect, late: true }, ...w.expanded] : w.expanded;
          return { stream, seq: base + 1 + i, record: encodeRecord(base + 1 + i, ops, at) };
        });
        for (const [i, w] of writes.entries()) this.pendingOwn.set(ownKey(stream, records[i]!.seq), { write: w, record: records[i]!.record, committed: false });
        this.pendingIn.set(stream, (this.pendingIn.get(stream) ?? 0) + writes.length);
        this.noteAppending(records);
        await this.log.appendMany(stream, base, records.map((r) => r.record));
        this.appends.commits++;
        this.appends.writes += records.length;
        for (const r of records) {
          this.bytesSinceSnapshot += r.record.length;
          const pending = this.pendingOwn.get(ownKey(stream, r.seq));
          // Not there when a catch-up already applied it.
          if (pending) {
            pending.committed = true;
            this.pendingCommitted++;
          }
        }
        break;
      } catch (err) {
        // Not appended: no longer pending (a catch-up cannot have reached records that did not commit).
        for (const r of records) if (this.pendingOwn.delete(ownKey(stream, r.seq))) this.pendingDone(stream);
        if (err instanceof HeadMovedError) {
          this.headConflicts++;
          behind = true;
          continue;
        }
        this.markUnavailable(err);
        const error = this.unavailableError();
        for (const w of writes) w.settle(error);
        return;
      }
    }
    void this.applyLock.run('apply', async () => {
      await this.applyOwnPending(stream);
      this.maybeSnapshot();
    }).finally(() => this.scheduleResidency());
  }

  private pendingDone(stream: string): void {
    const left = (this.pendingIn.get(stream) ?? 1) - 1;
    if (left > 0) this.pendingIn.set(stream, left);
    else this.pendingIn.delete(stream);
  }

  /** Under the apply lock: the committed writes of `pendingOwn` next in `stream`, applied in order. */
  private async applyOwnPending(stream: string): Promise<void> {
    for (;;) {
      const seq = this.appliedSeq(stream) + 1;
      const own = this.pendingOwn.get(ownKey(stream, seq));
      // One whose append is under way may not commit: a catch-up applies it once it is in PostgreSQL.
      if (!own?.committed) return;
      await this.applyOwn(stream, seq, own);
    }
  }

  /** One of this instance's writes appended together, applied (its condition asked here, as on every replica) and settled. */
  private async applyOwn(stream: string, seq: number, pending: PendingOwn): Promise<void> {
    const { write } = pending;
    let outcome: boolean | Error;
    try {
      outcome = write.condition ? await this.replica.writeIf(write.condition, write.given) : (await this.replica.write(write.given), true);
    } catch (err) {
      outcome = err instanceof Error ? err : new Error(String(err));
    }
    // Counted as applied, and no longer pending, in one step (`checkHead` adds the two).
    this.pendingOwn.delete(ownKey(stream, seq));
    this.pendingDone(stream);
    if (pending.committed) this.pendingCommitted--;
    this.applied.set(stream, seq);
    this.appliedTotal++;
    write.settle(outcome);
  }

  /** A write of this instance, committed: the replica holds its rows. */
  private countApplied(rows: readonly Append[]): void {
    for (const row of rows) this.applied.set(row.stream, row.seq);
    this.appliedTotal += rows.length;
    this.maybeSnapshot();
  }

  private retryAfterSeconds(): number {
    return Math.max(1, Math.ceil(this.options.probeMs / 1000));
  }

  private unavailableError(what = 'the cluster\'s journal (PostgreSQL, WSM_POSTGRES_URL) cannot be written'): StoreUnavailableError {
    const error = new StoreUnavailableError(`${what}: ${this.unavailable?.reason ?? 'unknown'}`, undefined);
    error.retryAfterSeconds = this.retryAfterSeconds();
    return error;
  }

  /** Writes stop (reads go on from the replica) until a probe reaches PostgreSQL and catches up. */
  private markUnavailable(err: unknown): void {
    if (this.closed) return;
    const reason = err instanceof Error ? err.message : String(err);
    if (!this.unavailable) {
      this.unavailable = { since: new Date(), reason };
      this.options.onWarning(`PostgreSQL (WSM_POSTGRES_URL) cannot be used: ${reason}; writes answer 503 and reads answer from this instance's replica until it can`);
    }
    this.scheduleProbe();
  }

  private scheduleProbe(): void {
    if (this.probeTimer || this.closed) return;
    this.probeTimer = setTimeout(() => {
      this.probeTimer = undefined;
      void this.probe();
    }, this.options.probeMs);
    this.probeTimer.unref();
  }

  private async probe(): Promise<void> {
    try {
      await this.log.headsTotal();
      await this.catchUp();
      if (this.unavailable) this.options.onInfo(`PostgreSQL (WSM_POSTGRES_URL) answers again after ${Math.round((Date.now() - this.unavailable.since.getTime()) / 1000)} s; writes go on`);
      this.unavailable = undefined;
      if (!this.listener) this.scheduleListen(0);
    } catch (err) {
      if (this.unavailable) this.unavailable.reason = err instanceof Error ? err.message : String(err);
      this.scheduleProbe();
    }
  }

  /** Hears other instances' appends (NOTIFY) and catches up; reconnects when the connection drops. */
  async startListening(): Promise<void> {
    const client = await this.listen();
    client.on('notification', (message) => {
      // `<stream>:<seq>`, where a stream's id may hold colons (`ws:<id>`).
      const payload = message.payload ?? '';
      const colon = payload.lastIndexOf(':');
      const stream = colon > 0 ? payload.slice(0, colon) : undefined;
      const seq = payload.slice(colon + 1);
      // This instance's own appends are applied by their writer: their notices would only queue empty catch-ups behind its next writes.
      if (stream !== undefined && Number(seq) > Math.max(this.appliedSeq(stream), this.ownAppends.get(stream) ?? 0) && this.holds(stream)) this.catchUpSoon();
    });
    const lost = () => {
      if (this.listener !== client) return;
      this.listener = undefined;
      client.end().catch(() => undefined);
      this.scheduleListen(this.options.probeMs);
    };
    client.on('error', lost);
    client.on('end', lost);
    await client.query(`LISTEN ${CHANNEL}`);
    this.listener = client;
  }

  private scheduleListen(ms: number): void {
    if (this.listenTimer || this.closed) return;
    this.listenTimer = setTimeout(() => {
      this.listenTimer = undefined;
      this.startListening().then(() => this.catchUp()).catch(() => this.scheduleListen(this.options.probeMs));
    }, ms);
    this.listenTimer.unref();
  }

  /** Registers this instance and keeps its lease on the commands it runs (docs/architecture.md, "Command leases"). */
  async startLease(base: string, durationMs: number, warn?: (message: string, details?: Record<string, unknown>) => void): Promise<InstanceLease> {
    this.ownPrefix = `${base}store/`;
    const lease = new InstanceLease(this, base, durationMs, warn);
    await lease.start();
    this.instance = lease;
    return lease;
  }

  /**
   * Past `snapshotAfterBytes` of records since the newest snapshot, the
   * instance whose write crossed it stores a snapshot (unless another
   * instance stored a newer one meanwhile).
   */
  private maybeSnapshot(): void {
    if (this.snapshotting || this.bytesSinceSnapshot < this.options.snapshotAfterBytes) return;
    this.snapshotting = true;
    this.snapshot()
      .catch((err: unknown) => { if (!this.closed) this.options.onWarning(`snapshot to PostgreSQL failed: ${err instanceof Error ? err.message : String(err)}`); })
      .finally(() => { this.snapshotting = false; });
  }

  /**
   * Stores a snapshot of every stream at the heads, with the seq of each
   * (built in a worker thread, below); records every kept snapshot holds
   * are pruned, per stream.
   */
  snapshot(force = false): Promise<void> {
    // One at a time: a second one started while the first is built would build the same.
    const run = this.snapshots.catch(() => undefined).then(() => this.snapshotNow(force));
    this.snapshots = run;
    return run;
  }

  private snapshots: Promise<void> = Promise.resolve();
  /** Aborted at close: stops a snapshot's worker. */
  private readonly closing = new AbortController();

  private async snapshotNow(force: boolean): Promise<void> {
    const newest = (await this.log.snapshots())[0];
    if (newest && newest.seq > this.snapshotSeq) {
      this.snapshotSeq = newest.seq;
      this.bytesSinceSnapshot = await this.log.bytesAfter(newest.heads);
      if (this.bytesSinceSnapshot < this.options.snapshotAfterBytes && !force) return;
    }
    await this.snapshotBuilt();
  }

  /**
   * The snapshot is built apart, as a residency load is (`materialize`):
   * every stream at the heads now, from the newest snapshot and the records
   * after it, in a worker thread with connections of its own, so the event
   * loop neither dumps nor sends anything (a replica of a million quads
   * took seconds of it) and writes go on meanwhile. It costs a copy of the
   * whole data in that thread while it is built.
   */
  private async snapshotBuilt(): Promise<void> {
    const built = await snapshotInWorker({ url: this.url, baseIri: this.graphs.base, knownSeq: this.snapshotSeq }, this.closing.signal);
    if (!built.stored) return;
    this.snapshotSeq = Math.max(this.snapshotSeq, built.seq);
    this.bytesSinceSnapshot = built.bytesAfter;
    this.options.onInfo(`snapshot of ${built.quads} quads (${built.streams} streams, built from the previous snapshot and ${built.records} writes) stored in PostgreSQL`);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closing.abort();
    clearInterval(this.residencyTimer);
    await this.instance?.close().catch(() => undefined);
    this.closed = true;
    clearTimeout(this.probeTimer);
    clearTimeout(this.listenTimer);
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => undefined);
    // Writes under way finish before the pool goes; then the leases go, so others take the workspaces at once.
    await this.appendLock.run('append', () => Promise.resolve());
    await this.applyLock.run('apply', () => Promise.resolve());
    await this.placement?.close();
    await this.log.pool.end();
  }
}

/** A record replayed at open changes graphs of a stream it is not in: the store cannot open on the service's graphs alone. */
export class ServiceOnlyRefused extends Error {
  constructor() {
    super('a record after the snapshot changes graphs of a stream it is not in');
    this.name = 'ServiceOnlyRefused';
  }
}

function dropGraph(graph: string): WriteOp {
  return updateOp(sparql`DROP SILENT GRAPH ${iri(graph)}`, [graph]);
}

function countLines(text: string): number {
  let n = 0;
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) n++;
  return n;
}

/** Applies a record to a store being opened (no listener, no cache yet); false when its condition did not hold. */
export function replayOnto(raw: oxigraph.Store, record: JournalRecord): boolean {
  const { condition, ops } = splitRecord(record.ops);
  if (condition && !conditionHolds(raw, condition)) return false;
  for (const op of coalesceUpdates(ops)) applyOp(raw, op);
  return true;
}
