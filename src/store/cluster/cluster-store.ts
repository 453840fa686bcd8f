import oxigraph from 'oxigraph';
import type pg from 'pg';
import { encodeRecord, type JournalRecord } from '../journal.js';
import { splitRecord } from '../journal-records.js';
import { OxigraphStore, LARGE_WRITE_CHARS, applyOp, checkOnScratch, coalesceUpdates, conditionHolds, loadBytes } from '../embedded/oxigraph-store.js';
import { checkLoadsOffThread } from '../embedded/load-check.js';
import { assertDeclared, checkGraphsFromEnv } from '../declared-graphs.js';
import { ExclusiveSections } from '../sections.js';
import { InstanceLease } from '../instance-lease.js';
import {
  StoreUnavailableError, WriteRefusedError, declaredGraphs, opsWithTexts, writeWithReplacesExpanded,
  type Binding, type JournalOp, type QuadStore, type QueryScope, type StoreCapabilities, type StoreHealth, type WriteCondition, type WriteInput, type WriteOp,
} from '../store.js';
import { literal, sparql, sparqlFragment, type Sparql, type SparqlFragment } from '../../rdf/sparql.js';
import { Graphs, SERVICE_STREAM } from '../../rdf/graphs.js';
import { CHANNEL, HeadMovedError, LogCorruptError, PgArchives, PgLog, type Append, type Heads, type StoredRecord } from './log.js';
import { graphsReadByWrite } from './read-graphs.js';
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
}

/** The options with their defaults filled in. */
export type ClusterStoreSettings = Required<Omit<ClusterStoreOptions, 'baseIri'>> & Pick<ClusterStoreOptions, 'baseIri'>;

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
  instance: InstanceLease | undefined;
  /** The hosted registry's archives, in PostgreSQL: every instance serves every published version. */
  readonly archives: PgArchives;

  constructor(
    raw: oxigraph.Store,
    readonly log: PgLog,
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
  }

  /** Seq of the last record of `stream` the replica holds (0: none). */
  appliedSeq(stream: string): number {
    return this.applied.get(stream) ?? 0;
  }

  /** Seq of every stream the replica holds. */
  appliedHeads(): Heads {
    return new Map(this.applied);
  }

  get version(): number {
    return this.replica.version;
  }

  select(query: Sparql, scope?: QueryScope): Promise<Binding[]> {
    return this.fresh().then(() => this.replica.select(query, scope));
  }

  selectIris(query: Sparql, variable: string, scope?: QueryScope): Promise<string[]> {
    return this.fresh().then(() => this.replica.selectIris(query, variable, scope));
  }

  ask(query: Sparql, scope?: QueryScope): Promise<boolean> {
    return this.fresh().then(() => this.replica.ask(query, scope));
  }

  construct(query: Sparql, scope?: QueryScope): Promise<string> {
    return this.fresh().then(() => this.replica.construct(query, scope));
  }

  queryRaw(query: Sparql, resultsFormat: string, scope?: QueryScope): Promise<string | boolean> {
    return this.fresh().then(() => this.replica.queryRaw(query, resultsFormat, scope));
  }

  dumpGraph(graph: string): Promise<string> {
    return this.fresh().then(() => this.replica.dumpGraph(graph));
  }

  /** The store's own graphs (`<base>store/...`: instance leases), known once the lease started; left out of the service's graphs. */
  private ownPrefix: string | undefined;

  private serviceGraphFilter(): SparqlFragment {
    return this.ownPrefix ? sparqlFragment`FILTER(!STRSTARTS(STR(?g), ${literal(this.ownPrefix)}))` : sparqlFragment``;
  }

  async graphNames(): Promise<string[]> {
    const rows = await this.select(sparql`SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } ${this.serviceGraphFilter()} }`);
    return rows.map((b) => b.g!.value);
  }

  /** Quads of the service's graphs (the store's own records left out, as `graphNames` does). */
  async size(): Promise<number> {
    if (!this.ownPrefix) return this.fresh().then(() => this.replica.size());
    const rows = await this.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } ${this.serviceGraphFilter()} } }`);
    return Number(rows[0]?.n?.value ?? 0);
  }

  /** Whether the store holds no quad of the service: an instance's lease record does not count (the first start's check). */
  async isEmpty(): Promise<boolean> {
    return !await this.ask(sparql`ASK { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } ${this.serviceGraphFilter()} } }`);
  }

  revision(graph: string): number {
    return this.replica.revision(graph);
  }

  /** The read caches' hook: the replica caught up to the head, so revisions moved by other instances' writes have moved here. */
  syncRevisions(): Promise<void> {
    return this.fresh();
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
   * answer from the replica as it is.
   */
  fresh(): Promise<void> {
    if (this.unavailable || this.closed) return Promise.resolve();
    if (!this.checkRunning) return this.startCheck();
    this.checkQueued ??= this.checkRunning.then(() => {
      this.checkQueued = null;
      return this.startCheck();
    });
    return this.checkQueued;
  }

  private startCheck(): Promise<void> {
    const run: Promise<void> = this.checkHead().finally(() => {
      if (this.checkRunning === run) this.checkRunning = null;
    });
    this.checkRunning = run;
    return run;
  }

  private async checkHead(): Promise<void> {
    try {
      // Heads only grow and the replica holds only committed records: equal sums mean nothing moved.
      if (await this.log.headsTotal() > this.appliedTotal) await this.catchUp();
    } catch (err) {
      this.markUnavailable(err);
    }
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
  private async catchUpLocked(replay = false): Promise<number> {
    const upto = await this.log.heads();
    let applied = 0;
    for (;;) {
      let rows = await this.log.recordsBetween(this.applied, upto, CATCH_UP_BATCH);
      const full = rows.length === CATCH_UP_BATCH;
      // A full batch may end inside a write's rows: the rest of that write comes with the next batch.
      if (full) {
        const last = rows[rows.length - 1]!.gseq;
        const whole = rows.filter((r) => r.gseq !== last);
        if (whole.length > 0) rows = whole;
      }
      for (let i = 0; i < rows.length;) {
        let j = i + 1;
        while (j < rows.length && rows[j]!.gseq === rows[i]!.gseq) j++;
        await this.applyWrite(rows.slice(i, j), replay);
        applied++;
        i = j;
      }
      if (!full) return applied;
    }
  }

  /** Applies another instance's write (its rows, one per stream) to the replica, as replay does: its condition asked here, where it was asked when it was appended. */
  private async applyWrite(rows: StoredRecord[], replay: boolean): Promise<void> {
    for (const row of rows) {
      const expected = this.appliedSeq(row.stream) + 1;
      if (row.seq !== expected) throw new LogCorruptError(`stream ${row.stream} in PostgreSQL lacks record ${expected} (the next one is ${row.seq}): refusing an incomplete history`);
    }
    const { condition, ops } = splitRecord(rows[0]!.ops);
    const given = ops as WriteOp[];
    try {
      if (replay) replayOnto(this.replica.raw, rows[0]!);
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

  /** At open: the records after the snapshot, applied to the bare replica; answers how many writes. */
  replay(): Promise<number> {
    return this.applyLock.run('apply', () => this.catchUpLocked(true));
  }

  /**
   * Everything the write will send is checked before it is appended (a
   * refusal appends nothing): updates on an empty scratch store, the loads
   * of a large write in worker threads.
   */
  private async checkOps(ops: WriteOp[]): Promise<void> {
    const calls = coalesceUpdates(ops);
    if (loadBytes(ops) <= LARGE_WRITE_CHARS) {
      checkOnScratch(calls, 0);
      return;
    }
    checkOnScratch(calls.filter((op) => op.kind === 'update'), 0);
    const loads = ops.flatMap((op, index) => (op.kind === 'load' ? [{ index, format: op.format, data: op.data }] : []));
    const refused = await checkLoadsOffThread(loads.map(({ format, data }) => ({ format, data })));
    if (refused) throw new WriteRefusedError(loads[refused.index]!.index, refused.message);
  }

  private async writeChecked(given: WriteOp[], condition: WriteCondition | null): Promise<boolean> {
    if (given.length === 0 && !condition) return true;
    if (this.closed) throw new Error('store is closed');
    if (this.checkGraphs) assertDeclared(given, condition?.ask);
    const expanded = await writeWithReplacesExpanded(given, async (ops) => {
      await this.checkOps(ops);
      return ops;
    });
    // The streams the write changes, and those whose heads it must find unmoved: the ones it changes and the ones it reads.
    const changes = [...new Set([...declaredGraphs(expanded)].map((g) => this.graphs.streamOf(g)))].sort();
    if (changes.length === 0) changes.push(SERVICE_STREAM);
    const read = graphsReadByWrite(expanded, condition?.ask);
    const checks = new Set(changes);
    if (read !== 'any') for (const g of read) checks.add(this.graphs.streamOf(g));
    return this.applyLock.run('apply', async () => {
      // First at the replica's seqs, without asking: the append fails if any of them is not the head.
      let atHead = false;
      let behind = false;
      for (;;) {
        if (this.unavailable) throw this.unavailableError();
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
          const record: JournalOp[] = condition ? [{ kind: 'condition', ask: condition.ask, expect: condition.expect }, ...expanded] : expanded;
          // The same record in each stream it changes, at that stream's next seq (each row checks on its own), with one commit time.
          const at = Date.now();
          rows = changes.map((stream) => {
            const seq = this.appliedSeq(stream) + 1;
            return { stream, seq, record: encodeRecord(seq, record, at) };
          });
          // A write whose reads could not be named checks every stream this replica holds (a stream it does not hold yet moves its head: caught up, then held).
          const checked = read === 'any' ? new Set([...checks, ...this.applied.keys()]) : checks;
          const expected: Heads = new Map([...checked].map((stream) => [stream, this.appliedSeq(stream)]));
          await this.log.append(rows, expected, read === 'any');
          for (const row of rows) this.bytesSinceSnapshot += row.record.length;
        } catch (err) {
          if (err instanceof HeadMovedError) {
            this.headConflicts++;
            behind = true;
            continue;
          }
          this.markUnavailable(err);
          throw this.unavailableError();
        }
        // Committed: the replica applies it as every other instance will. Counted as applied even if that
        // throws (a listener's error): applying a record twice would be worse than reporting the error.
        try {
          return condition ? await this.replica.writeIf(condition, given) : (await this.replica.write(given), true);
        } finally {
          for (const row of rows) this.applied.set(row.stream, row.seq);
          this.appliedTotal += rows.length;
          this.maybeSnapshot();
        }
      }
    });
  }

  private retryAfterSeconds(): number {
    return Math.max(1, Math.ceil(this.options.probeMs / 1000));
  }

  private unavailableError(): StoreUnavailableError {
    const error = new StoreUnavailableError(`the cluster's journal (PostgreSQL, WSM_POSTGRES_URL) cannot be written: ${this.unavailable?.reason ?? 'unknown'}`, undefined);
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
      if (stream !== undefined && Number(seq) > this.appliedSeq(stream)) this.catchUp().catch((err: unknown) => this.markUnavailable(err));
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
   * instance whose write crossed it stores a snapshot of its replica (unless
   * another instance stored a newer one meanwhile).
   */
  private maybeSnapshot(): void {
    if (this.snapshotting || this.bytesSinceSnapshot < this.options.snapshotAfterBytes) return;
    this.snapshotting = true;
    this.snapshot()
      .catch((err: unknown) => this.options.onWarning(`snapshot to PostgreSQL failed: ${err instanceof Error ? err.message : String(err)}`))
      .finally(() => { this.snapshotting = false; });
  }

  /**
   * Stores a snapshot of the whole replica with the seq of each stream it
   * holds (dumped under the apply lock, sent after it); records every kept
   * snapshot holds are pruned, per stream.
   */
  async snapshot(): Promise<void> {
    const newest = (await this.log.snapshots())[0];
    if (newest && newest.seq > this.snapshotSeq) {
      this.snapshotSeq = newest.seq;
      this.bytesSinceSnapshot = await this.log.bytesAfter(newest.heads);
      if (this.bytesSinceSnapshot < this.options.snapshotAfterBytes) return;
    }
    const dump = await this.applyLock.run('apply', async () => ({
      heads: this.appliedHeads(),
      total: this.appliedTotal,
      quads: this.replica.raw.size,
      data: Buffer.from(this.replica.raw.dump({ format: 'application/n-quads' }), 'utf8'),
      bytesAfter: this.bytesSinceSnapshot,
    }));
    if (dump.total <= this.snapshotSeq) return;
    this.snapshotSeq = await this.log.putSnapshot(dump.heads, dump.quads, dump.data);
    this.bytesSinceSnapshot -= dump.bytesAfter;
    this.options.onInfo(`snapshot of ${dump.quads} quads (${dump.heads.size} streams, ${dump.total} records in all) stored in PostgreSQL`);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.instance?.close().catch(() => undefined);
    this.closed = true;
    clearTimeout(this.probeTimer);
    clearTimeout(this.listenTimer);
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => undefined);
    // Writes under way finish before the pool goes.
    await this.applyLock.run('apply', () => Promise.resolve());
    await this.log.pool.end();
  }
}

/** Applies a record to a store being opened (no listener, no cache yet); false when its condition did not hold. */
export function replayOnto(raw: oxigraph.Store, record: JournalRecord): boolean {
  const { condition, ops } = splitRecord(record.ops);
  if (condition && !conditionHolds(raw, condition)) return false;
  for (const op of coalesceUpdates(ops)) applyOp(raw, op);
  return true;
}
