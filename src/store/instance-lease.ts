import { randomUUID } from 'node:crypto';
import { updateOp, type QuadStore, type WriteCondition, type WriteOp } from './store.js';
import { integer, iri, sequence, sparql, type Sparql } from '../rdf/sparql.js';

const WSM = 'https://w3id.org/wsm/ns#';

/**
 * The lease of one service instance on a store shared by several instances
 * (the remote store, docs/remote-store.md; docs/store.md, "Command
 * leases"). The instance's record in the instances graph
 * (`<base>store/instances`, never listed among the service's graphs) holds
 * the time its lease ends (`wsm:leaseExpiresAt`, milliseconds since the
 * epoch by the instance's clock); the instance renews it every third of the
 * lease duration.
 *
 * What the lease guards (the lifecycle commands an instance runs, the
 * staging graphs of its large writes) belongs to the instance only while its
 * record exists: its writes are conditional on it (`liveAsk`). Another
 * instance that finds a record whose lease ended removes it in a conditional
 * write (`sweep`), after which the late owner can neither renew nor finish
 * anything it held; it registers again under a new id.
 *
 * The clocks of the instances must agree to well within the lease duration.
 */
export class InstanceLease {
  /** This instance's id: it changes when the lease was lost and taken again. */
  id = randomUUID();
  readonly graph: string;
  private timer: NodeJS.Timeout | undefined;
  private renewing: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly store: Pick<QuadStore, 'write' | 'writeIf' | 'select'>,
    private readonly base: string,
    readonly durationMs: number,
    private readonly warn: (message: string, details?: Record<string, unknown>) => void = () => undefined,
  ) {
    this.graph = `${base}store/instances`;
  }

  /** The IRI of an instance's record. */
  iri(id: string): string {
    return `${this.base}store/instance/${encodeURIComponent(id)}`;
  }

  /** The prefix of the staging graphs of an instance's large writes. */
  stagingPrefix(id: string): string {
    return `${this.base}staging/${encodeURIComponent(id)}/`;
  }

  /**
   * The staging graphs in use, one quad each naming the instance that stages
   * in it (`<base>store/staging`, never listed among the service's graphs).
   * A large write records its graph before filling it and removes the record
   * in the transaction that drops the graph, so orphans are found by reading
   * these records instead of every graph name of the store (a scan of every
   * quad: 20.7 s at 10M quads).
   */
  get stagingRecords(): string {
    return `${this.base}store/staging`;
  }

  /** The quad (as INSERT DATA / DELETE DATA content) that records `stage` as staged by instance `id`. */
  stagingRecord(stage: string, id: string): string {
    return `GRAPH <${this.stagingRecords}> { <${stage}> <${WSM}stagedBy> ${JSON.stringify(id)} }`;
  }

  /**
   * Drops the staging graphs of instances that no longer hold a lease (set
   * by the store that stages large writes under this lease). Resolves how
   * many were dropped.
   */
  dropOrphanStaging: () => Promise<number> = () => Promise.resolve(0);

  /**
   * Waits, at most the given milliseconds, while a large write of any
   * instance is in its final transaction (set by the store: its gate). A
   * renewal sent meanwhile was rolled back as deadlocked with that
   * transaction, or made the engine roll the transaction back instead: on
   * Virtuoso the renewals of three instances every third of a 5 s lease
   * made a 300,000-triple install's final transaction lose 10 times in a
   * row, and in one run of five all of its 20 retries.
   */
  awaitLargeWrites: (maxMs: number) => Promise<void> = () => Promise.resolve();

  /** Registers this instance and starts renewing its lease. */
  async start(): Promise<void> {
    await this.register();
    this.timer = setInterval(() => { void this.renew(); }, Math.max(50, Math.floor(this.durationMs / 3)));
    this.timer.unref();
  }

  private async register(): Promise<void> {
    await this.store.write([this.recordOp(this.id, Date.now() + this.durationMs)]);
  }

  /** The instance's record: its type (what `liveAsk` reads) and the end of its lease. */
  private recordOp(id: string, expiresAt: number): WriteOp {
    return updateOp(sparql`INSERT DATA { GRAPH ${iri(this.graph)} { ${iri(this.iri(id))} a ${iri(`${WSM}ServiceInstance`)} ; ${iri(`${WSM}leaseExpiresAt`)} ${integer(expiresAt)} } }`, [this.graph]);
  }

  /**
   * A renewal: the end of the lease alone. The type is left as it is: a
   * large write's final transaction holds its read of it (`liveAsk`, its
   * condition) until it commits, and a renewal that wrote it again waited
   * for that transaction or deadlocked with it (docs/remote-store.md).
   */
  private renewalOp(id: string, expiresAt: number): WriteOp {
    const s = iri(this.iri(id));
    const g = iri(this.graph);
    const expires = iri(`${WSM}leaseExpiresAt`);
    return updateOp(sparql`${sequence([
      sparql`DELETE WHERE { GRAPH ${g} { ${s} ${expires} ?e } }`,
      sparql`INSERT DATA { GRAPH ${g} { ${s} ${expires} ${integer(expiresAt)} } }`,
    ])}`, [this.graph]);
  }

  /**
   * ASK: does the instance `id` still hold its lease (its record exists)? Its
   * writes are conditional on it. It reads the record's type, which renewals
   * leave alone: under serializable isolation a long write of the instance
   * (holding what its condition read until it commits) does not block the
   * renewal of its own lease.
   */
  liveAsk(id: string): Sparql {
    return sparql`ASK { GRAPH ${iri(this.graph)} { ${iri(this.iri(id))} a ${iri(`${WSM}ServiceInstance`)} } }`;
  }

  /** The condition of a write that must apply only while this instance holds its lease. */
  liveCondition(): WriteCondition {
    return { ask: this.liveAsk(this.id), expect: true };
  }

  /** Moves the end of the lease on; when the record was removed (the lease had ended), registers again under a new id. */
  renew(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.renewing ??= (async () => {
      try {
        // Renewed every third of the lease, so its record still has two
        // thirds to run: a renewal held back for one third keeps a third.
        await this.awaitLargeWrites(Math.floor(this.durationMs / 3)).catch(() => undefined);
        if (this.closed) return;
        const kept = await this.store.writeIf(this.liveCondition(), [this.renewalOp(this.id, Date.now() + this.durationMs)]);
        if (!kept && !this.closed) {
          const lost = this.id;
          this.id = randomUUID();
          this.warn('this instance\'s lease had ended and another instance took over what it held; registered again', { lost, id: this.id });
          await this.register();
        }
      } catch (err) {
        this.warn('could not renew this instance\'s lease', { err });
      } finally {
        this.renewing = undefined;
      }
    })();
    return this.renewing;
  }

  /**
   * Removes the records of instances whose lease ended (each in a write
   * conditional on its lease still being over, so an instance that renewed
   * meanwhile keeps it). Resolves the ids removed.
   */
  async expire(now = Date.now()): Promise<string[]> {
    const rows = await this.store.select(sparql`SELECT ?i WHERE { GRAPH ${iri(this.graph)} { ?i ${iri(`${WSM}leaseExpiresAt`)} ?e FILTER (?e < ${integer(now)}) } }`);
    const removed: string[] = [];
    for (const row of rows) {
      const subject = row.i!.value;
      const prefix = `${this.base}store/instance/`;
      if (!subject.startsWith(prefix)) continue;
      const id = decodeURIComponent(subject.slice(prefix.length));
      if (id === this.id) continue;
      const applied = await this.store.writeIf(
        { ask: sparql`ASK { GRAPH ${iri(this.graph)} { ${iri(subject)} ${iri(`${WSM}leaseExpiresAt`)} ?e FILTER (?e < ${integer(now)}) } }`, expect: true },
        [{ kind: 'update', sparql: sparql`DELETE WHERE { GRAPH ${iri(this.graph)} { ${iri(subject)} ?p ?o } }`, graphs: [this.graph] }],
      );
      if (applied) removed.push(id);
    }
    return removed;
  }

  /** Ids of the instances holding a record now (live or not yet removed). */
  async registered(): Promise<Set<string>> {
    const rows = await this.store.select(sparql`SELECT ?i WHERE { GRAPH ${iri(this.graph)} { ?i a ${iri(`${WSM}ServiceInstance`)} } }`);
    const prefix = `${this.base}store/instance/`;
    return new Set(rows.map((r) => r.i!.value).filter((i) => i.startsWith(prefix)).map((i) => decodeURIComponent(i.slice(prefix.length))));
  }

  /** Stops renewing and removes this instance's record (what it held has finished or is taken over by its `close`). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.renewing;
    await this.store.write([{ kind: 'update', sparql: sparql`DELETE WHERE { GRAPH ${iri(this.graph)} { ${iri(this.iri(this.id))} ?p ?o } }`, graphs: [this.graph] }])
      .catch((err: unknown) => this.warn('could not remove this instance\'s lease record', { err }));
  }
}
