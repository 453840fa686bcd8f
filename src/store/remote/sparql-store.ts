import { randomUUID } from 'node:crypto';
import sparqljs from 'sparqljs';
import { ExclusiveSections } from '../sections.js';
import { GraphRevisions } from '../revisions.js';
import { assertDeclared, checkGraphsFromEnv } from '../declared-graphs.js';
import { WriteRefusedError, declaredGraphs, opsWithTexts, writeWithReplacesExpanded, type WriteInput, type Binding, type QuadStore, type QueryScope, type StoreCapabilities, type StoreHealth, type WriteCondition, type WriteOp } from '../store.js';
import { InstanceLease } from '../instance-lease.js';
import type { EngineRequest } from './engine-request.js';
import { EngineError, READ_COMMITTED, SparqlClient, insertOperations, isDeadlock, type SparqlEndpointOptions } from './sparql-client.js';
import { sparql, sparqlFragment, literal, iri, join, variable, type Sparql, type SparqlFragment } from '../../rdf/sparql.js';

const RESULTS_JSON = 'application/sparql-results+json';

/** The large-write gate: when its last closing lapses (ms since the epoch; 0 when open) and the plan epoch ('' before any large write). */
interface GateState { closedUntil: number; epoch: string }

/** The version of src/store/remote/virtuoso.sql's procedures this service needs (`WSM_PROCEDURES_VERSION`). */
const PROCEDURES_VERSION = 2;

/** Above this many bytes of update text, loads go through staging graphs first. */
const MAX_CALL_BYTES = 512 * 1024;

/**
 * The store on a remote SPARQL 1.1 engine (docs/remote-store.md). The engine
 * holds the data and makes it durable; this process keeps no copy and no
 * journal.
 *
 * Writes are all or nothing:
 * - `standard` dialect: the ops go as one update request of several
 *   operations, which a conforming engine applies atomically.
 * - `virtuoso` dialect: Virtuoso commits each operation of a request on its
 *   own, so the ops go through the `WSM_APPLY` procedure, one transaction.
 *   A large write first loads its data in bounded chunks into private
 *   staging graphs (invisible to every read of the service: no record names
 *   them), then one transaction moves them into place with the rest of the
 *   ops; a failure drops the staging graphs. Meanwhile the large-write
 *   gate is closed, which every read asks first (`read`), so readers wait
 *   for that transaction rather than make it roll back as deadlocked.
 *
 * Scoped queries (user queries confined to some graphs) are not answered
 * here: the protocol's dataset parameters do not confine `GRAPH <iri>` on
 * every engine.
 */
export class SparqlStore implements QuadStore {
  /** Several instances share the engine; which graphs a `GRAPH ?g { }` names depends on the engine (Virtuoso: none). */
  readonly capabilities: StoreCapabilities = { otherInstancesWrite: true, durable: true, graphPatternNamesGraphs: false };
  private readonly client: SparqlClient;
  private versionCounter = 0;
  private readonly listeners = new Set<(graphs: ReadonlySet<string>) => void>();
  /**
   * Revisions of graphs as this process knows them: moved by its own writes
   * (when each starts and ends) and by `syncRevisions` when the engine's
   * generation of a graph is not the one seen last (another instance wrote
   * it, or it was never seen).
   */
  private readonly revisions = new GraphRevisions();
  /** The engine's generation of each graph, as last seen by `syncRevisions`. */
  private seen = new Map<string, string>();
  /** Generation reads not sent yet: calls made before it is sent share it. */
  private nextSync: { graphs: Set<string>; done: Promise<void> } | null = null;
  private readonly checkGraphs: boolean;
  /** The graph holding each graph's generation (`${base}store/generations`). */
  readonly generationsGraph: string;
  /** `virtuoso` dialect: the graph of the large-write gate every read passes (`read`). */
  readonly gateGraph: string;
  /** The gate check in flight: reads made while it is share it. */
  private gatePassing: Promise<GateState> | null = null;
  /** `virtuoso` dialect: the plan epoch last read from the gate graph ('' before any large write; see `read`). */
  private planEpoch = '';

  /**
   * This instance's lease on the engine (started by `startLease`): lifecycle
   * commands are claimed under its id, and the staging graphs of its large
   * writes carry it, so another instance can drop them once the lease ended.
   */
  instance: InstanceLease | undefined;

  constructor(options: SparqlEndpointOptions, private readonly base: string, checks: { checkGraphs?: boolean } = {}) {
    this.client = new SparqlClient(options);
    this.generationsGraph = `${base}store/generations`;
    this.gateGraph = `${base}store/gate`;
    this.checkGraphs = checks.checkGraphs ?? checkGraphsFromEnv();
  }

  get version(): number {
    return this.versionCounter;
  }

  /** When the engine was last asked whether it is back (`health`). */
  private lastProbe = 0;
  private probing = false;

  /**
   * Unavailable while the engine cannot be reached: its last request failed
   * to connect or lost its answer, and none has reached it since. Answers
   * from what is known, at once (/health calls it); while unreachable it
   * asks the engine again in the background, at most once a second, so
   * health comes back by itself when the engine does, with no other
   * request.
   */
  health(): StoreHealth {
    const since = this.client.unreachableSince;
    if (!since) return { writable: true };
    if (!this.probing && Date.now() - this.lastProbe >= 1000) {
      this.probing = true;
      this.lastProbe = Date.now();
      this.client.query('ASK {}', RESULTS_JSON, 0).catch(() => {}).finally(() => { this.probing = false; });
    }
    return { writable: false, readable: false, reason: 'the SPARQL engine cannot be reached', since, retryAfterSeconds: 5 };
  }

  private static unscoped(scope?: QueryScope): void {
    if (scope?.defaultGraphs || scope?.namedGraphs) throw new Error('the remote store does not answer scoped queries');
  }

  async select(query: Sparql, scope?: QueryScope): Promise<Binding[]> {
    SparqlStore.unscoped(scope);
    const parsed = JSON.parse(await this.read(query, RESULTS_JSON)) as { results?: { bindings: Binding[] } };
    if (!parsed.results) throw new Error('select() was given a query that is not a SELECT');
    // Virtuoso answers typed literals as "typed-literal"; the service reads the standard "literal". It names a
    // blank node `nodeID://b123` in results and `_:b123` in the N-Triples of a CONSTRUCT: the label goes as
    // `b123`, so a blank node of a SELECT can be found in a CONSTRUCT's answer (e.g. a stored report's nodes).
    for (const row of parsed.results.bindings) {
      for (const v of Object.values(row)) {
        if (!v) continue;
        if ((v.type as string) === 'typed-literal') v.type = 'literal';
        else if (v.type === 'bnode' && v.value.startsWith(VIRTUOSO_BNODE)) v.value = v.value.slice(VIRTUOSO_BNODE.length);
      }
    }
    return parsed.results.bindings;
  }

  async ask(query: Sparql, scope?: QueryScope): Promise<boolean> {
    SparqlStore.unscoped(scope);
    const parsed = JSON.parse(await this.read(query, RESULTS_JSON)) as { boolean?: boolean };
    if (typeof parsed.boolean !== 'boolean') throw new Error('ask() was given a query that is not an ASK');
    return parsed.boolean;
  }

  async construct(query: Sparql, scope?: QueryScope): Promise<string> {
    SparqlStore.unscoped(scope);
    return withoutEmptyComment(await this.read(query, 'application/n-triples'));
  }

  /** The engine's tab-separated answers differ from SPARQL 1.1's (Virtuoso quotes IRIs): read as JSON. */
  async selectIris(query: Sparql, variable: string, scope?: QueryScope): Promise<string[]> {
    const rows = await this.select(query, scope);
    return rows.flatMap((row) => (row[variable]?.type === 'uri' ? [row[variable].value] : []));
  }

  async queryRaw(query: Sparql, resultsFormat: string, scope?: QueryScope): Promise<string | boolean> {
    SparqlStore.unscoped(scope);
    return this.read(query, resultsFormat);
  }

  /**
   * `virtuoso` dialect: refuses an engine whose procedures (src/store/remote/virtuoso.sql)
   * are older than this service needs. Writes rely on them: on version 1, text
   * beyond ASCII that this service now sends as it is would be stored as '?'.
   */
  async checkProcedures(): Promise<void> {
    if (this.client.options.dialect !== 'virtuoso') return;
    let version = 0;
    try {
      const answer = JSON.parse(await this.client.query('SELECT (<sql:WSM_PROCEDURES_VERSION>() AS ?v) {}', RESULTS_JSON)) as { results?: { bindings: Array<{ v?: { value: string } }> } };
      version = Number(answer.results?.bindings[0]?.v?.value ?? 0);
    } catch (err) {
      // Set up by an earlier version: no such procedure (SR185). Any other failure is the engine's own, said as it is.
      if (!(err instanceof EngineError) || !/\bSR185\b|undefined procedure/i.test(err.engineText)) throw err;
    }
    if (version < PROCEDURES_VERSION) {
      throw new Error(`The SPARQL engine's procedures are version ${version || 1}; this service needs version ${PROCEDURES_VERSION}. `
        + 'Run `npm run virtuoso` with the engine\'s data directory (it applies them to a running engine too), then start the service again.');
    }
  }

  /** Registers this instance on the engine and keeps its lease renewed (docs/store.md, "Command leases"). */
  async startLease(durationMs: number, warn?: (message: string, details?: Record<string, unknown>) => void): Promise<InstanceLease> {
    const lease = new InstanceLease(this, this.base, durationMs, warn);
    lease.dropOrphanStaging = () => this.dropOrphanStaging();
    lease.awaitLargeWrites = (maxMs) => this.awaitGate(maxMs);
    await lease.start();
    this.instance = lease;
    return lease;
  }

  /**
   * Drops the staging graphs of instances that no longer hold a lease (a
   * large write cut off by the end of its process). The graphs are listed
   * before the instances, so a graph of an instance that registered since
   * is never taken for an orphan. Resolves how many were dropped.
   */
  async dropOrphanStaging(): Promise<number> {
    const lease = this.instance;
    if (!lease) return 0;
    const rows = await this.select(sparql`SELECT ?g ?i WHERE { GRAPH ${iri(lease.stagingRecords)} { ?g ${iri(STAGED_BY)} ?i } }`);
    const live = await lease.registered();
    const orphans = rows.filter((r) => !live.has(r.i!.value)).map((r) => ({ graph: r.g!.value, id: r.i!.value }));
    if (orphans.length > 0) {
      await this.client.applyAtomically(orphans.flatMap(({ graph, id }) => [`DROP SILENT GRAPH <${graph}>`, `DELETE DATA { ${lease.stagingRecord(graph, id)} }`]));
    }
    return orphans.length;
  }

  /**
   * Every read of the store. `virtuoso` dialect:
   *
   * - The large-write gate. Under serializable isolation a reader scanning a
   *   graph that a large write's final transaction is adding to (tens of
   *   thousands of rows, seconds) holds locks the write needs while waiting
   *   for rows the write holds; the engine rolled the write back as
   *   deadlocked, and a steady stream of readers did so past every retry. So
   *   a large write (and any write that lost `DEADLOCKS_BEFORE_GATE` times)
   *   closes the gate (a committed quad in the gate graph
   *   naming when it lapses) before its final transaction, pauses for the
   *   reads already past it, and opens it in that transaction. Every read
   *   first asks the gate, at read committed (no lock taken or waited for),
   *   and waits while it is closed; then it reads at serializable isolation,
   *   so it sees the large write whole or not at all (a read at read
   *   committed can see one half committed). A gate left closed
   *   by a writer that died lapses on its own.
   * - The plan epoch. Virtuoso keeps a query's compiled plan by its exact
   *   text and does not compile it again when the data changes: a plan made
   *   while a graph was empty, used once a large write filled it, is many
   *   times slower than a fresh one (docs/remote-store.md).
   *   Each large write's final transaction sets a new epoch in the gate graph;
   *   the gate check reads it, and the read goes with the epoch as a comment
   *   at its end, so plans made before the last large write are not used
   *   after it (one compilation per query text and large write).
   */
  private async read(query: string, accept: string): Promise<string> {
    await this.awaitGate();
    return this.client.query(this.withPlanEpoch(query), accept);
  }

  /**
   * Waits while the large-write gate is closed (see `read`), at most
   * `maxMs`; passing it open takes the plan epoch it names. `virtuoso`
   * dialect; the `standard` one has no gate.
   */
  private async awaitGate(maxMs = Number.POSITIVE_INFINITY): Promise<void> {
    if (this.client.options.dialect !== 'virtuoso') return;
    await this.passGate(() => (this.gatePassing ??= this.gateState().finally(() => { this.gatePassing = null; })), maxMs);
  }

  /**
   * Asks `probe` for the gate's state until it is open (or `maxMs` passed),
   * polling from 25 ms up to every 500 ms; passing it open takes the plan
   * epoch it names. Answers what the last probe read beside the gate.
   */
  private async passGate<T>(probe: () => Promise<GateState & { value?: T }>, maxMs = Number.POSITIVE_INFINITY): Promise<T | undefined> {
    const until = Date.now() + maxMs;
    for (let wait = 0; ; wait++) {
      const { closedUntil, epoch, value } = await probe();
      const now = Date.now();
      if (closedUntil <= now) {
        if (epoch) this.planEpoch = epoch;
        return value;
      }
      if (now >= until) return value;
      await new Promise((resolve) => setTimeout(resolve, Math.min(25 * 2 ** wait, 500, until - now)));
    }
  }

  /** The text with the plan epoch as a comment at its end (unchanged while no large write was seen). */
  private withPlanEpoch(text: string): string {
    return this.planEpoch ? `${text}\n# wsm-plan ${this.planEpoch}` : text;
  }

  /**
   * The gate at read committed: when its last closing lapses (ms since the
   * epoch; 0 when open) and the plan epoch ('' before any large write).
   */
  private async gateState(): Promise<GateState> {
    const answer = JSON.parse(await this.client.query(`${READ_COMMITTED}
      SELECT (MAX(?until) AS ?last) (MAX(STR(?epoch)) AS ?plans) WHERE { GRAPH <${this.gateGraph}> {
        { ?closing <${GATE_UNTIL}> ?until } UNION { <${this.gateGraph}> <${PLAN_EPOCH}> ?epoch } } }`, RESULTS_JSON)) as { results?: { bindings: Binding[] } };
    const row = answer.results?.bindings[0];
    return { closedUntil: Number(row?.last?.value ?? 0) || 0, epoch: row?.plans?.value ?? '' };
  }

  revision(graph: string): number {
    return this.revisions.get(graph);
  }

  /**
   * Cross-instance freshness (docs/store.md, the cache rule): every
   * write sets a new generation (a fresh UUID) on each graph it declared, in
   * the same engine transaction as its ops. This reads the generations of
   * `graphs` in one query and moves the revision of each graph whose
   * generation is not the one seen last, so a cached value read before
   * another instance's write is not answered after it. Calls made in one
   * synchronous stretch share one query, sent after all of them were made.
   */
  syncRevisions(graphs: readonly string[]): Promise<void> {
    if (graphs.length === 0) return Promise.resolve();
    if (!this.nextSync) {
      const batch = { graphs: new Set<string>(), done: Promise.resolve() };
      batch.done = Promise.resolve().then(() => {
        if (this.nextSync === batch) this.nextSync = null;
        return this.readGenerations([...batch.graphs]);
      });
      this.nextSync = batch;
    }
    for (const g of graphs) this.nextSync.graphs.add(g);
    return this.nextSync.done;
  }

  private async readGenerations(graphs: string[]): Promise<void> {
    // One OPTIONAL per graph, each a lookup by constant subject.
    const gg = iri(this.generationsGraph);
    const lookups = join(graphs.map((g, i) => sparqlFragment`OPTIONAL { GRAPH ${gg} { ${iri(generationSubject(g))} ${iri(GENERATION)} ${variable(`v${i}`)} } }`), '\n      ');
    const row = this.client.options.dialect === 'virtuoso'
      ? await this.generationsPastGate(lookups)
      : (await this.select(sparql`SELECT * WHERE { VALUES ?wsmAnchor { true }\n      ${lookups} }`))[0] ?? {};
    const now = new Map<string, string>();
    graphs.forEach((g, i) => { const v = row[`v${i}`]; if (v) now.set(generationSubject(g), v.value); });
    if (this.seen.size > 100_000) this.seen = new Map();
    const moved: string[] = [];
    for (const g of graphs) {
      // A graph never written has no generation: '' stands for it.
      const gen = now.get(generationSubject(g)) ?? '';
      if (this.seen.get(g) === gen) continue;
      // First sight (or forgotten) moves the revision too: a value kept before cannot be vouched for.
      this.seen.set(g, gen);
      moved.push(g);
    }
    if (moved.length > 0) this.revisions.bump(moved);
  }

  /**
   * `virtuoso` dialect: the generations of `lookups` and the large-write
   * gate in one query at read committed (one round trip where a read past
   * the gate takes two: a warm P5 asked the engine 12 times, 6 now). Read
   * committed locks nothing and sees every committed write, so a generation
   * committed before this query is seen, as at serializable. While the gate
   * is closed it waits and asks again (`passGate`, as `awaitGate`).
   */
  private async generationsPastGate(lookups: SparqlFragment): Promise<Binding> {
    const gate = iri(this.gateGraph);
    const query = sparql`SELECT * WHERE { VALUES ?wsmAnchor { true }
      OPTIONAL { GRAPH ${gate} { ?wsmClosing ${iri(GATE_UNTIL)} ?wsmUntil } }
      OPTIONAL { GRAPH ${gate} { ${gate} ${iri(PLAN_EPOCH)} ?wsmPlans } }
      ${lookups} }`;
    const row = await this.passGate(async () => {
      const answer = JSON.parse(await this.client.query(this.withPlanEpoch(`${READ_COMMITTED}\n${query}`), RESULTS_JSON)) as { results?: { bindings: Binding[] } };
      const rows = answer.results?.bindings ?? [];
      // One row per closing record of the gate (or one when there is none); the generations are the same on each.
      return {
        closedUntil: Math.max(0, ...rows.map((r) => Number(r.wsmUntil?.value ?? 0) || 0)),
        epoch: rows.map((r) => r.wsmPlans?.value ?? '').sort().pop() ?? '',
        value: rows[0],
      };
    });
    return row ?? {};
  }

  /** Update operations that give each of `graphs` a new generation (run in the write's own transaction). */
  private generationOps(graphs: ReadonlySet<string>): string[] {
    // The store's own graphs (instance leases, generations) are read by no cache: their writes (lease
    // renewals every few seconds) set no generation, so they never wait for another write's generations.
    const subjects = [...graphs].filter((g) => !g.startsWith(`${this.base}store/`)).map((g) => `<${generationSubject(g)}>`);
    if (subjects.length === 0) return [];
    const gen = randomUUID();
    const gg = `<${this.generationsGraph}>`;
    return [
      // One DELETE per graph, by constant subject: it locks that graph's generation only.
      ...subjects.map((s) => `DELETE WHERE { GRAPH ${gg} { ${s} <${GENERATION}> ?old } }`),
      `INSERT DATA { GRAPH ${gg} { ${subjects.map((s) => `${s} <${GENERATION}> "${gen}" .`).join(' ')} } }`,
    ];
  }

  async write(ops: WriteInput[]): Promise<void> {
    await this.writeChecked(opsWithTexts(ops), null);
  }

  /**
   * `virtuoso` dialect: the condition and the ops run in one engine
   * transaction (`WSM_APPLY_IF`) under serializable isolation, so the
   * answer holds across service instances. `standard` dialect: SPARQL 1.1
   * has no conditional request that reports its effect; the condition is
   * asked first and the write sent after it, guarded within this process
   * only (one instance per engine in that dialect).
   */
  writeIf(condition: WriteCondition, given: WriteInput[]): Promise<boolean> {
    const ops = opsWithTexts(given);
    if (this.client.options.dialect === 'standard') {
      return this.standardConditions.run('writeIf', async () => {
        if (await this.ask(condition.ask) !== condition.expect) return false;
        await this.writeChecked(ops, null);
        return true;
      });
    }
    return this.writeChecked(ops, condition);
  }

  /** `standard` dialect: conditional writes of this process run one at a time. */
  private readonly standardConditions = new ExclusiveSections();

  private async writeChecked(given: WriteOp[], condition: WriteCondition | null): Promise<boolean> {
    if (given.length === 0 && !condition) return true;
    if (this.checkGraphs) assertDeclared(given, condition?.ask);
    return writeWithReplacesExpanded(given, (ops) => this.writeExpanded(ops, condition));
  }

  private async writeExpanded(ops: WriteOp[], condition: WriteCondition | null): Promise<boolean> {
    const touched = declaredGraphs(ops);
    // Moved when the write starts and when it is done: a read overlapping it is not cached.
    this.revisions.bump(touched);
    let applied: boolean;
    try {
      applied = await this.send(ops, condition, touched);
    } finally {
      this.revisions.bump(touched);
    }
    if (!applied || ops.length === 0) return applied;
    this.versionCounter++;
    for (const listener of this.listeners) listener(touched);
    return true;
  }

  private async send(ops: WriteOp[], condition: WriteCondition | null, touched: ReadonlySet<string>): Promise<boolean> {
    // Everything is compiled (loads parsed) before anything is sent: a load that does not parse changes nothing.
    const compiled = ops.map((op, index) => {
      if (op.kind === 'update') return { op, inserts: null as string[] | null };
      try {
        return { op, inserts: insertOperations(op.graph, op.data, op.format) };
      } catch (err) {
        throw new WriteRefusedError(index, err instanceof Error ? err.message : String(err));
      }
    });
    if (this.client.options.dialect === 'standard') {
      const parts = compiled.map(({ op, inserts }) => (op.kind === 'update' ? op.sparql : inserts!.join(' ;\n')));
      parts.push(...this.generationOps(touched));
      try {
        await this.client.update(parts.join(' ;\n'));
      } catch (err) {
        // A conforming engine applies an update request atomically and says not which operation it refused.
        if (err instanceof EngineError && err.status >= 400 && err.status < 500) throw new WriteRefusedError(0, err.engineText.slice(0, 500));
        throw err;
      }
    } else if (!await this.writeVirtuoso(compiled, condition, touched)) {
      return false;
    }
    return true;
  }

  /** Maps an engine refusal inside WSM_APPLY (`op N refused`) to the write op that sent operation N. */
  private static refusal(err: unknown, owners: number[]): unknown {
    if (!(err instanceof EngineError)) return err;
    const match = /WSM01.*?op (\d+) refused: ([\s\S]*)/.exec(err.engineText);
    if (!match) return err;
    return new WriteRefusedError(owners[Number(match[1])] ?? 0, match[2]!.trim().slice(0, 500));
  }

  /** Applies the ops in one transaction, when `condition` holds in it; false when it did not (nothing applied). */
  private async writeVirtuoso(compiled: Array<{ op: WriteOp; inserts: string[] | null }>, condition: WriteCondition | null, touched: ReadonlySet<string>): Promise<boolean> {
    const operations: string[] = [];
    /** For each operation, the index of the write op it comes from. */
    const owners: number[] = [];
    const staging: string[] = [];
    /** The quad that closes the gate while this write's final transaction runs (large writes only). */
    let gate: string | undefined;
    // The lease (and its id at this moment) the staging graphs are kept under.
    const lease = this.instance ? { lease: this.instance, id: this.instance.id } : undefined;
    const bytes = compiled.reduce((n, c) => n + (c.inserts ?? []).reduce((m, s) => m + Buffer.byteLength(s), 0), 0);
    try {
      for (const [index, { op, inserts }] of compiled.entries()) {
        if (op.kind === 'update') { for (const one of splitUpdate(op.sparql)) { operations.push(one); owners.push(index); } continue; }
        if (bytes <= MAX_CALL_BYTES) { for (const i of inserts!) { operations.push(i); owners.push(index); } continue; }
        // Large: stage in bounded calls, then add to the target inside the final transaction.
        const stage = `${lease ? lease.lease.stagingPrefix(lease.id) : `${this.base}staging/`}${randomUUID()}`;
        // Recorded before it is filled, so a sweep finds it if this process ends in the middle.
        if (lease) await this.client.applyAtomically([`INSERT DATA { ${lease.lease.stagingRecord(stage, lease.id)} }`]);
        staging.push(stage);
        const staged = insertOperations(stage, op.data, op.format);
        for (let i = 0; i < staged.length;) {
          const call: string[] = [];
          let size = 0;
          for (; i < staged.length; i++) {
            const opBytes = Buffer.byteLength(staged[i]!);
            if (call.length > 0 && size + opBytes > MAX_CALL_BYTES) break;
            size += opBytes;
            call.push(staged[i]!);
          }
          try {
            await this.client.applyAtomically(call);
          } catch (err) {
            throw SparqlStore.refusal(err, call.map(() => index));
          }
        }
        operations.push(`ADD SILENT <${stage}> TO <${op.graph}>`, ...this.dropStaging([stage], lease));
        owners.push(index, index, ...(lease ? [index] : []));
      }
      // The new generations of the written graphs, in the same transaction (attributed to the last op).
      for (const op of this.generationOps(touched)) { operations.push(op); owners.push(compiled.length - 1); }
      // Staged under this instance's lease: applied only while it holds (another instance drops the staging
      // graphs of an instance whose lease ended, so a late write would add part of its data).
      const conditions = [...(condition ? [condition] : []), ...(staging.length > 0 && lease ? [{ ask: lease.lease.liveAsk(lease.id), expect: true }] : [])];
      if (staging.length > 0) {
        // The gate (see `read`): closed in a transaction of its own, so it stays closed while the final
        // transaction is sent again after a deadlock; opened by that transaction when it commits.
        gate = this.gateQuad();
        await this.client.applyAtomically([gate]);
        await new Promise((resolve) => setTimeout(resolve, GATE_PAUSE_MS));
        // A new plan epoch (see `read`): plans compiled before this write are not used after it.
        operations.push(
          SparqlStore.gateOpening(gate),
          `DELETE WHERE { GRAPH <${this.gateGraph}> { <${this.gateGraph}> <${PLAN_EPOCH}> ?epoch } }`,
          `INSERT DATA { GRAPH <${this.gateGraph}> { <${this.gateGraph}> <${PLAN_EPOCH}> "${randomUUID()}" } }`,
        );
        owners.push(compiled.length - 1, compiled.length - 1, compiled.length - 1);
      }
      let applied: boolean;
      try {
        try {
          applied = await this.client.applyAtomically(operations, conditions, gate ? undefined : DEADLOCKS_BEFORE_GATE);
        } catch (err) {
          if (gate || !(err instanceof EngineError) || !isDeadlock(err.engineText)) throw err;
          // Readers of the graphs it writes kept winning (see `read`): this write goes again behind the gate,
          // which holds new reads back until its transaction commits (a 100-role install beside a client
          // polling its command lost 21 times in a row, 43 s, and failed).
          gate = this.gateQuad();
          await this.client.applyAtomically([gate]);
          await new Promise((resolve) => setTimeout(resolve, GATE_PAUSE_MS));
          operations.push(SparqlStore.gateOpening(gate));
          owners.push(compiled.length - 1);
          applied = await this.client.applyAtomically(operations, conditions);
        }
      } catch (err) {
        throw SparqlStore.refusal(err, owners);
      }
      if (!applied && gate && staging.length === 0) {
        // The condition did not hold, so the transaction did not open the gate.
        await this.client.applyAtomically([SparqlStore.gateOpening(gate)]).catch(() => undefined);
      }
      if (!applied && staging.length > 0) {
        await this.client.applyAtomically([...this.dropStaging(staging, lease), SparqlStore.gateOpening(gate!)]).catch(() => undefined);
        if (lease && !await this.ask(lease.lease.liveAsk(lease.id))) {
          throw new Error('this instance\'s lease ended during a large write; nothing of the write was applied');
        }
      }
      return applied;
    } catch (err) {
      if (staging.length > 0 || gate) {
        await this.client.applyAtomically([...this.dropStaging(staging, lease), ...(gate ? [SparqlStore.gateOpening(gate)] : [])]).catch(() => undefined);
      }
      throw err;
    }
  }

  /** The update that opens the gate `closing` (from `gateQuad`) closed. */
  private static gateOpening(closing: string): string {
    return closing.replace('INSERT DATA', 'DELETE DATA');
  }

  /** The update that closes the large-write gate until it lapses (see `read`). */
  private gateQuad(): string {
    return `INSERT DATA { GRAPH <${this.gateGraph}> { <${this.gateGraph}/${randomUUID()}> <${GATE_UNTIL}> ${Date.now() + GATE_LAPSE_MS} } }`;
  }

  /** Operations dropping staging graphs and their records (see `InstanceLease.stagingRecords`). */
  private dropStaging(stages: string[], lease: { lease: InstanceLease; id: string } | undefined): string[] {
    return stages.flatMap((g) => [`DROP SILENT GRAPH <${g}>`, ...(lease ? [`DELETE DATA { ${lease.lease.stagingRecord(g, lease.id)} }`] : [])]);
  }

  update(sparql: Sparql, graphs: readonly string[]): Promise<void> {
    return this.write([{ kind: 'update', sparql, graphs }]);
  }

  async dumpGraph(graph: string): Promise<string> {
    return withoutEmptyComment(await this.read(dumpQuery(graph), 'application/n-triples'));
  }

  /** Past the large-write gate, as `read` is; the engine's answer may be Virtuoso's `# Empty NT` comment, which N-Triples allows. */
  async graphDumpRequest(graph: string): Promise<EngineRequest> {
    await this.awaitGate();
    return this.client.queryRequest(this.withPlanEpoch(dumpQuery(graph)), 'application/n-triples');
  }

  /**
   * Keeps `?g` to the service's graphs: under the base IRI, and neither a
   * staging graph nor one of the store's own records (the engine's own
   * graphs share the store).
   */
  private serviceGraphFilter(): SparqlFragment {
    return sparqlFragment`FILTER(STRSTARTS(STR(?g), ${literal(this.base)})
      && !STRSTARTS(STR(?g), ${literal(`${this.base}staging/`)}) && !STRSTARTS(STR(?g), ${literal(`${this.base}store/`)}))`;
  }

  async graphNames(): Promise<string[]> {
    const rows = await this.select(sparql`SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } ${this.serviceGraphFilter()} }`);
    return rows.map((r) => r.g!.value);
  }

  async size(): Promise<number> {
    const rows = await this.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } ${this.serviceGraphFilter()} }`);
    return Number(rows[0]?.n?.value ?? 0);
  }

  async isEmpty(): Promise<boolean> {
    // One quad of a service graph is enough: ASK stops at it instead of counting every quad (22 s at 10M quads).
    return !await this.ask(sparql`ASK { GRAPH ?g { ?s ?p ?o } ${this.serviceGraphFilter()} }`);
  }

  private readonly sections = new ExclusiveSections();

  /**
   * Serializes sections with the same key within THIS process only: with one
   * service instance on the engine the invariants hold as on the embedded
   * store; with several they do not (docs/remote-store.md).
   */
  exclusive<T>(key: string, fn: () => Promise<T>): Promise<T> {
    return this.sections.run(key, fn);
  }

  onWrite(listener: (graphs: ReadonlySet<string>) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    // The engine keeps the data; fetch's connections close on their own. The lease record goes.
    await this.instance?.close();
  }
}

/** The predicate of a closing of the large-write gate: when it lapses, ms since the epoch (`SparqlStore.read`). */
/** Deadlocks a write's transaction may lose to readers before it goes again behind the gate (see `writeVirtuoso`). */
const DEADLOCKS_BEFORE_GATE = 3;
const STAGED_BY = 'https://w3id.org/wsm/ns#stagedBy';
export const GATE_UNTIL = 'https://w3id.org/wsm/ns#largeWriteGateClosedUntil';

/** How Virtuoso's SPARQL results name a blank node (`nodeID://b123`, `_:b123` in its N-Triples). */
const VIRTUOSO_BNODE = 'nodeID://';

/** The predicate of the plan epoch in the gate graph, set anew by each large write (`SparqlStore.read`). */
const PLAN_EPOCH = 'https://w3id.org/wsm/ns#queryPlanEpoch';

/** How long a closing of the gate holds at most: a writer that died does not keep readers waiting longer. */
const GATE_LAPSE_MS = 60_000;

/** Milliseconds a large write waits, the gate closed, for the reads already past it before its final transaction. */
const GATE_PAUSE_MS = 200;

/** The predicate of a graph's generation in the generations graph. */
const GENERATION = 'https://w3id.org/wsm/ns#generation';

/** The subject a graph's generation is kept on: the graph's IRI (the default graph has none, so a name of its own). */
function generationSubject(graph: string): string {
  return graph === '' ? 'urn:x-wsm:default-graph' : graph;
}

/** The query that dumps one graph (`dumpGraph`, `graphDumpRequest`). */
const dumpQuery = (graph: string) => `CONSTRUCT { ?s ?p ?o } WHERE { GRAPH <${graph}> { ?s ?p ?o } }`;

/** Virtuoso answers an empty graph in N-Triples as the comment `# Empty NT`; the store's answer is then '' (as embedded). */
function withoutEmptyComment(ntriples: string): string {
  return /^# Empty NT\s*$/.test(ntriples) ? '' : ntriples;
}

/**
 * Virtuoso runs one operation per call inside WSM_APPLY: an update request
 * of several operations (`op ; op`) is split into single operations, each
 * with the request's prologue. A text that does not parse goes as it is, for
 * the engine to refuse.
 */
export function splitUpdate(text: string): string[] {
  let parsed: sparqljs.SparqlQuery;
  try {
    parsed = new sparqljs.Parser().parse(text);
  } catch {
    return [text];
  }
  if (parsed.type !== 'update' || parsed.updates.length <= 1) return [text];
  const generator = new sparqljs.Generator();
  return parsed.updates.map((one) => generator.stringify({ ...parsed, updates: [one] } as sparqljs.Update));
}

