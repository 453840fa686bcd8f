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
  StoreUnavailableError, WriteRefusedError, opsWithTexts, writeWithReplacesExpanded,
  type Binding, type JournalOp, type QuadStore, type QueryScope, type StoreHealth, type WriteCondition, type WriteInput, type WriteOp,
} from '../store.js';
import { literal, sparql, sparqlFragment, type Sparql, type SparqlFragment } from '../../rdf/sparql.js';
import { CHANNEL, HeadMovedError, PgArchives, PgLog } from './log.js';

/** The one stream every write goes to (docs/cluster.md: one stream for now). */
export const SERVICE_STREAM = 'service';
/** Records read from PostgreSQL per query while catching up. */
const CATCH_UP_BATCH = 256;

export interface ClusterStoreOptions {
  /** Record bytes after the newest snapshot past which the instance that appends takes a new one. */
  snapshotAfterBytes: number;
  /** Milliseconds between two attempts to reach PostgreSQL again while it cannot be reached. */
  probeMs?: number;
  onWarning?: (message: string) => void;
  onInfo?: (message: string) => void;
}

/** What opening the store found; for logs and tests. */
export interface ClusterOpenInfo { snapshotSeq: number; snapshotQuads: number; recordsReplayed: number; lastSeq: number; millis: number }

/**
 * The cluster store (docs/cluster.md): the data in an embedded Oxigraph
 * (`OxigraphStore`, in memory, a replica), the journal and the snapshots in
 * PostgreSQL (`PgLog`), shared by every instance.
 *
 * - A write, under this instance's apply lock: its ops checked, its
 *   condition asked on the replica, its record appended at the replica's
 *   last seq + 1 by an insert that fails when another instance took that
 *   seq (then: catch up, ask again, append again), so a record is only ever
 *   appended at the head it was checked against. A condition that fails is
 *   asked again after catching up (the replica may be behind). Once
 *   committed the replica applies it. Acknowledged means committed in
 *   PostgreSQL.
 * - A read first checks the head (one primary-key lookup, shared by every
 *   read that starts while none is under way) and catches up when it moved,
 *   so it sees every write answered before it started, on any instance.
 *   NOTIFY brings the replica up to date between reads.
 * - PostgreSQL out of reach: reads answer from the replica as it is, writes
 *   fail with `StoreUnavailableError`, `health` says so, and the store
 *   probes until it answers again.
 */
export class ClusterStore implements QuadStore {
  /** The replica: every write of every instance, applied in the log's order. */
  readonly replica: OxigraphStore;
  private appliedSeq: number;
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
  private snapshotSeq: number;
  private bytesSinceSnapshot: number;
  private snapshotting = false;
  /** Appends that found their seq taken by another instance (each then caught up and tried again). */
  headConflicts = 0;
  instance: InstanceLease | undefined;
  /** The hosted registry's archives, in PostgreSQL: every instance serves every published version. */
  readonly archives: PgArchives;

  constructor(
    raw: oxigraph.Store,
    readonly log: PgLog,
    private readonly listen: () => Promise<pg.Client>,
    readonly info: ClusterOpenInfo,
    snapshotBytesAfter: number,
    private readonly options: Required<ClusterStoreOptions>,
    readonly stream = SERVICE_STREAM,
  ) {
    this.replica = new OxigraphStore(raw);
    this.archives = new PgArchives(log.pool);
    this.appliedSeq = info.lastSeq;
    this.snapshotSeq = info.snapshotSeq;
    this.bytesSinceSnapshot = snapshotBytesAfter;
  }

  /** Seq of the last record applied to the replica. */
  get lastSeq(): number {
    return this.appliedSeq;
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
      const head = await this.log.head(this.stream);
      if (head > this.appliedSeq) await this.catchUp();
    } catch (err) {
      this.markUnavailable(err);
    }
  }

  /** Applies every record committed after the replica's last one. */
  catchUp(): Promise<void> {
    return this.applyLock.run('apply', () => this.catchUpLocked());
  }

  private async catchUpLocked(): Promise<void> {
    for (;;) {
      const records = await this.log.recordsAfter(this.stream, this.appliedSeq, CATCH_UP_BATCH);
      for (const record of records) await this.applyRecord(record);
      if (records.length < CATCH_UP_BATCH) return;
    }
  }

  /** Applies another instance's record to the replica, as replay does: its condition asked here, where it was asked when it was appended. */
  private async applyRecord(record: JournalRecord & { bytes: number }): Promise<void> {
    const { condition, ops } = splitRecord(record.ops);
    const given = ops as WriteOp[];
    try {
      if (condition) await this.replica.writeIf({ ask: condition.ask as Sparql, expect: condition.expect }, given);
      else await this.replica.write(given);
    } finally {
      this.appliedSeq = record.seq;
      this.bytesSinceSnapshot += record.bytes;
    }
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
    return this.applyLock.run('apply', async () => {
      // First at the replica's last record, without asking: the append fails if that is not the head.
      let atHead = false;
      let behind = false;
      for (;;) {
        if (this.unavailable) throw this.unavailableError();
        let seq: number;
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
          seq = this.appliedSeq + 1;
          const record: JournalOp[] = condition ? [{ kind: 'condition', ask: condition.ask, expect: condition.expect }, ...expanded] : expanded;
          const bytes = encodeRecord(seq, record);
          await this.log.append(this.stream, seq, bytes);
          this.bytesSinceSnapshot += bytes.length;
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
          this.appliedSeq = seq;
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
      await this.log.head(this.stream);
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
      const [stream, seq] = (message.payload ?? '').split(':');
      if (stream === this.stream && Number(seq) > this.appliedSeq) this.catchUp().catch((err: unknown) => this.markUnavailable(err));
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

  /** Stores a snapshot of the replica at its last record (dumped under the apply lock, sent after it). */
  async snapshot(): Promise<void> {
    const newest = (await this.log.snapshotSeqs(this.stream))[0] ?? 0;
    if (newest > this.snapshotSeq) {
      this.snapshotSeq = newest;
      this.bytesSinceSnapshot = await this.log.bytesAfter(this.stream, newest);
      if (this.bytesSinceSnapshot < this.options.snapshotAfterBytes) return;
    }
    const dump = await this.applyLock.run('apply', async () => ({
      seq: this.appliedSeq,
      quads: this.replica.raw.size,
      data: Buffer.from(this.replica.raw.dump({ format: 'application/n-quads' }), 'utf8'),
      bytesAfter: this.bytesSinceSnapshot,
    }));
    if (dump.seq <= this.snapshotSeq) return;
    await this.log.putSnapshot(this.stream, dump.seq, dump.quads, dump.data);
    this.snapshotSeq = dump.seq;
    this.bytesSinceSnapshot -= dump.bytesAfter;
    this.options.onInfo(`snapshot of ${dump.quads} quads at record ${dump.seq} stored in PostgreSQL`);
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
