import oxigraph from 'oxigraph';
import { ExclusiveSections } from '../sections.js';
import { GraphRevisions } from '../revisions.js';
import { assertDeclared, checkGraphsFromEnv } from '../declared-graphs.js';
import { checkLoadsOffThread } from './load-check.js';
import { blankNodeSafeSlices } from '../ntriples-slices.js';
import { withScratchStore } from '../scratch.js';
import { WriteRefusedError, declaredGraphs, opsWithTexts, writeWithReplacesExpanded, type WriteInput, type Binding, type QuadStore, type StoreCapabilities, type QueryScope, type JournalOp, type RdfFormat, type StoredOp, type WriteCondition, type WriteOp } from '../store.js';
import { iri, sparql, trustedSparql, type Sparql } from '../../rdf/sparql.js';

/**
 * Where writes go to become durable. The journal implements it; the store
 * calls `append` synchronously once the ops are checked, and applies them in
 * memory, in append order, only after the returned promise (fsync) resolves;
 * if it rejects, the write is not applied.
 */
export interface WriteSink {
  /** Appends one record; resolves once it is durable. Its sequence number is `lastSeq` right after the call. */
  append(ops: readonly JournalOp[]): Promise<void>;
  readonly lastSeq: number;
  close(): Promise<void>;
}

/** Makes one write's record durable (`OxigraphStore.writeOps`); a rejection leaves nothing of the write. */
export type Commit = (record: readonly JournalOp[]) => Promise<void>;

/**
 * What a store that makes the engine durable (`DurableStore`, which holds
 * an `OxigraphStore` and gives it the journal as its sink) tells it.
 */
export interface DurabilityHooks {
  /** While appends must wait (a snapshot is dumping the store), what to wait for; null when a write may append now. */
  appendBlocked(): Promise<void> | null;
  /** Seq of the last journal record the engine already holds (replayed at open). */
  appliedSeq: number;
  /** Records up to `appliedSeq` whose condition did not hold when they were replayed. */
  skipped: Iterable<number>;
}

/**
 * The test read-delay mode (`WSM_TEST_READ_DELAY=1`): not a user setting.
 * The suite runs once normally and once in this mode (.ci/run), so code
 * that relied on a read answering before some other request's write fails
 * there. Read when a store is opened.
 */
export function readDelayFromEnv(): boolean {
  return process.env.WSM_TEST_READ_DELAY === '1';
}

const RESULTS_JSON = 'application/sparql-results+json';
const RESULTS_TSV = 'text/tab-separated-values';

function scopeOptions(scope?: QueryScope): Record<string, unknown> {
  const options: Record<string, unknown> = {};
  if (scope?.defaultGraphs) options.default_graph = scope.defaultGraphs.map((g) => oxigraph.namedNode(g));
  if (scope?.namedGraphs) options.named_graphs = scope.namedGraphs.map((g) => oxigraph.namedNode(g));
  return options;
}

/** Whether a write's condition (an ASK and the answer it must give) holds on a raw store; also asked by journal replay. */
export function conditionHolds(store: oxigraph.Store, condition: { ask: string; expect: boolean }): boolean {
  return askBoolean(store, condition.ask, {}, 'writeIf() was given a condition that is not an ASK') === condition.expect;
}

/**
 * An ASK's answer. Asked without a results format, the engine gives an ASK's
 * boolean as is: no result document to write and parse again (about a
 * quarter of a small ASK's time).
 */
function askBoolean(store: oxigraph.Store, query: string, options: Record<string, unknown>, notAnAsk: string): boolean {
  const answer = store.query(query, options);
  if (typeof answer !== 'boolean') throw new Error(notAnAsk);
  return answer;
}

/** Applies one op to a raw Oxigraph store (also used by journal replay, whose old records declare no graphs). */
export function applyOp(store: oxigraph.Store, op: StoredOp): void {
  if (op.kind === 'update') {
    store.update(op.sparql);
  } else {
    store.load(op.data, { format: op.format as RdfFormat, to_graph_name: oxigraph.namedNode(op.graph) });
  }
}

const PROLOGUE_ITEM = /^\s*(?:PREFIX\s+([A-Za-z][\w.-]*)?:\s*<([^>]*)>|BASE\s*<([^>]*)>)/i;

/**
 * Splits an update into its leading PREFIX/BASE declarations and the rest.
 * Oxigraph accepts a prologue only at the very start of a request (not after
 * `;`), so a joined update carries one merged prologue at its head.
 */
export function splitPrologue(update: string): { prefixes: Map<string, string>; base: string | null; body: string } {
  const prefixes = new Map<string, string>();
  let base: string | null = null;
  let rest = update;
  for (let m = PROLOGUE_ITEM.exec(rest); m; m = PROLOGUE_ITEM.exec(rest)) {
    if (m[3] !== undefined) base = m[3];
    else prefixes.set(m[1] ?? '', m[2]!);
    rest = rest.slice(m[0].length);
  }
  return { prefixes, base, body: rest };
}

/**
 * A run of updates being joined into one multi-operation update (one atomic
 * Oxigraph call) under one merged prologue. An update whose prologue
 * disagrees with the run's (a prefix bound to another IRI, another base)
 * does not fit it.
 */
export class UpdateRun {
  private readonly prefixes = new Map<string, string>();
  private base: string | null = null;
  private readonly bodies: string[] = [];
  private readonly graphs = new Set<string>();
  private chars = 0;

  get empty(): boolean { return this.bodies.length === 0; }
  /** Characters of the joined bodies. */
  get length(): number { return this.chars; }

  /** Whether all these updates (split by `splitPrologue`, in order) can join the run. */
  fits(parts: ReadonlyArray<ReturnType<typeof splitPrologue>>): boolean {
    let base = this.base;
    let started = !this.empty;
    const bound = new Map<string, string>();
    for (const part of parts) {
      if (started && part.base !== base) return false;
      for (const [p, i] of part.prefixes) {
        const before = bound.get(p) ?? (started ? this.prefixes.get(p) : undefined);
        if (before !== undefined && before !== i) return false;
        bound.set(p, i);
      }
      if (part.base !== null) base = part.base;
      started = true;
    }
    return true;
  }

  add(part: ReturnType<typeof splitPrologue>, graphs: readonly string[] | undefined): void {
    for (const [p, i] of part.prefixes) this.prefixes.set(p, i);
    if (part.base !== null) this.base = part.base;
    this.bodies.push(part.body);
    this.chars += part.body.length;
    for (const g of graphs ?? []) this.graphs.add(g);
  }

  /** The joined update. */
  op(): StoredOp {
    const head = [...this.prefixes].map(([p, i]) => `PREFIX ${p}: <${i}>`);
    if (this.base !== null) head.unshift(`BASE <${this.base}>`);
    return { kind: 'update', sparql: trustedSparql(`${head.join('\n')}\n${this.bodies.join(' ;\n')}`, 'store internals: text the store builds from a request it was given'), graphs: [...this.graphs] };
  }
}

/**
 * Joins runs of consecutive update ops into one multi-operation update (one
 * atomic Oxigraph call), hoisting their prologues into one. Updates whose
 * prologues disagree (a prefix bound to two IRIs, another base) stay separate.
 */
export function coalesceUpdates<Op extends StoredOp>(ops: readonly Op[]): Op[] {
  const out: StoredOp[] = [];
  let run: UpdateRun | null = null;
  const flush = () => {
    if (run) out.push(run.op());
    run = null;
  };
  for (const op of ops) {
    if (op.kind !== 'update') { flush(); out.push(op); continue; }
    const part = splitPrologue(op.sparql);
    if (run && !run.fits([part])) flush();
    run ??= new UpdateRun();
    run.add(part, op.graphs);
  }
  flush();
  return out as Op[];
}

/**
 * A write whose N-Triples loads hold more than this many bytes is applied in
 * slices of about this size, with an event-loop turn between slices (see
 * `OxigraphStore.write`). About 700 triples: a few milliseconds each.
 */
export const SLICE_BYTES = 64 * 1024;

export const loadBytes = (ops: readonly WriteOp[]) => ops.reduce((n, op) => n + (op.kind === 'load' ? op.data.length : 0), 0);

/** A write whose loads hold more than this many characters is large: checked off the event loop and published in slices. */
export const LARGE_WRITE_CHARS = SLICE_BYTES * 4;
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Applies engine calls to an empty scratch store, in order; throws
 * `WriteRefusedError` for the first one the engine refuses.
 */
export function checkOnScratch(calls: WriteOp[], firstIndex: number): void {
  withScratchStore((scratch) => calls.forEach((op, i) => {
    try {
      applyOp(scratch, op);
    } catch (err) {
      throw new WriteRefusedError(firstIndex + i, (err as Error).message);
    }
  }));
}

/** A replacing load a large write begins with, and its index among the write's expanded ops. */
interface LeadLoad { index: number; graph: string; format: RdfFormat; data: string }

/**
 * The replacing loads a write begins with, when the store may load them
 * ahead of the write's other ops: every load of the write is one of them,
 * each names a graph of its own, and no other op names (may change) those
 * graphs. Applied first, they give what the write in its order gives once
 * the graphs are empty when it applies (`OxigraphStore.writeLarge` asks).
 * Null when the write is not of that form. Indices are those of
 * `expandReplaces(ops)` (a replacing load is a DROP, then the load).
 */
function leadingReplaces(ops: readonly WriteOp[]): LeadLoad[] | null {
  const lead: LeadLoad[] = [];
  for (const op of ops) {
    if (op.kind !== 'load' || !op.replace) break;
    lead.push({ index: lead.length * 2 + 1, graph: op.graph, format: op.format, data: op.data });
  }
  if (lead.length === 0) return null;
  const graphs = new Set(lead.map((l) => l.graph));
  if (graphs.size !== lead.length) return null;
  for (const op of ops.slice(lead.length)) {
    if (op.kind === 'load') return null;
    if (op.graphs.some((g) => graphs.has(g))) return null;
  }
  return lead;
}

/** Most answers kept between writes, and most rows of a kept SELECT answer. */
export const MAX_KEPT_ANSWERS = 5000;
export const MAX_KEPT_ROWS = 200;

/** The key of a kept answer: the kind of read, its scope and its text. */
export function answerKey(kind: string, query: string, scope?: QueryScope): string {
  if (!scope?.defaultGraphs && !scope?.namedGraphs) return `${kind}\n${query}`;
  return `${kind}\n${JSON.stringify([scope.defaultGraphs ?? null, scope.namedGraphs ?? null])}\n${query}`;
}

/**
 * The embedded store: Oxigraph in memory. With a sink, each write is durable
 * when its promise resolves; without one it is a plain in-memory store.
 * `DurableStore` holds one with the journal as its sink (and `durability`
 * hooks): it adds the journal's files, snapshots and the directory lock.
 */
export class OxigraphStore implements QuadStore {
  /** One process writes it; durable when it has a sink (the journal). */
  readonly capabilities: StoreCapabilities;
  private versionCounter = 0;
  private readonly listeners = new Set<(graphs: ReadonlySet<string>) => void>();
  private readonly revisions = new GraphRevisions();
  /** The test suite's check of write declarations (`src/store/declared-graphs.ts`). */
  private readonly checkGraphs: boolean;
  /**
   * Answers of SELECT and ASK since the last write, by query and scope: the
   * service asks the same small questions on every request (who is the
   * caller, which workspace, is it a member) while the store rarely changes.
   * Every write empties it before changing anything. Small answers only;
   * their bindings are frozen (callers read them, never change them).
   */
  private readonly answers = new Map<string, Binding[] | boolean>();

  /** Test mode: every read resolves only after a random macrotask delay (see `readDelayFromEnv`). */
  private readonly readDelay: boolean;

  constructor(
    readonly raw: oxigraph.Store = new oxigraph.Store(),
    private readonly sink?: WriteSink,
    options: { readDelay?: boolean; checkGraphs?: boolean; durability?: DurabilityHooks } = {},
  ) {
    this.readDelay = options.readDelay ?? readDelayFromEnv();
    this.checkGraphs = options.checkGraphs ?? checkGraphsFromEnv();
    this.appendBlocked = options.durability ? () => options.durability!.appendBlocked() : () => null;
    this.appliedThrough = options.durability?.appliedSeq ?? 0;
    for (const seq of options.durability?.skipped ?? []) this.skippedSeqs.add(seq);
    this.capabilities = { otherInstancesWrite: false, durable: sink !== undefined, graphPatternNamesGraphs: true };
  }

  /**
   * In the test read-delay mode, waits 0-3 ms (a timer: other requests'
   * reads and writes run meanwhile).
   */
  private readGate(): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, Math.floor(Math.random() * 4)));
  }

  /**
   * Answers a read. In the test read-delay mode, as a remote engine would:
   * the request travels (0-3 ms), the store answers as it is at that
   * moment, and the answer travels back (0-3 ms) while other requests'
   * writes go on, so it may be stale when it arrives. Code that checks with
   * a read and then writes without a condition shows up as failures there.
   */
  private async delayed<T>(answer: () => T): Promise<T> {
    if (this.readDelay) await this.readGate();
    // A large write is being published in slices: the store answers once it is whole.
    while (this.publishing) await this.publishing;
    const value = answer();
    if (this.readDelay) await this.readGate();
    return value;
  }

  /**
   * Set while a large write is being published slice by slice (see
   * `publish`): reads wait for it, so none sees a part of the write.
   */
  private publishing: Promise<void> | null = null;

  /**
   * Set while a large write's loads are checked off the event loop (before
   * it is journaled): writes made meanwhile are journaled after it, so
   * writes are journaled, and applied, in the order they were made.
   */
  private checking: Promise<void> | null = null;

  get version(): number {
    return this.versionCounter;
  }

  select(query: Sparql, scope?: QueryScope): Promise<Binding[]> {
    return this.delayed(() => this.selectNow(query, scope));
  }

  private selectNow(query: string, scope?: QueryScope): Binding[] {
    const key = answerKey('select', query, scope);
    const known = this.answers.get(key);
    if (known !== undefined) return (known as Binding[]).slice();
    const text = this.raw.query(query, { results_format: RESULTS_JSON, ...scopeOptions(scope) }) as string;
    const parsed = JSON.parse(text) as { results?: { bindings: Binding[] } };
    if (!parsed.results) throw new Error('select() was given a query that is not a SELECT');
    const bindings = parsed.results.bindings;
    if (bindings.length <= MAX_KEPT_ROWS) {
      for (const b of bindings) {
        for (const v of Object.values(b)) Object.freeze(v);
        Object.freeze(b);
      }
      this.keep(key, bindings);
      return bindings.slice();
    }
    return bindings;
  }

  selectIris(query: Sparql, variable: string, scope?: QueryScope): Promise<string[]> {
    return this.delayed(() => {
      const text = this.raw.query(query, { results_format: RESULTS_TSV, ...scopeOptions(scope) }) as string;
      // SPARQL 1.1 TSV: a header of the variables, then one line per row, each term in N-Triples syntax
      // (an IRI as <...>, which holds no tab, newline or '>'; tabs and newlines in literals are escaped).
      const lines = text.split('\n');
      const header = lines[0]!.split('\t');
      const column = header.indexOf(`?${variable}`);
      if (column < 0) throw new Error(`selectIris() was given a query that does not select ?${variable}`);
      const iris: string[] = [];
      for (let i = 1; i < lines.length; i++) {
        const cell = header.length === 1 ? lines[i]! : lines[i]!.split('\t')[column] ?? '';
        if (cell.startsWith('<') && cell.endsWith('>')) iris.push(cell.slice(1, -1));
      }
      return iris;
    });
  }

  ask(query: Sparql, scope?: QueryScope): Promise<boolean> {
    return this.delayed(() => this.askNow(query, scope));
  }

  private askNow(query: string, scope?: QueryScope): boolean {
    const key = answerKey('ask', query, scope);
    const known = this.answers.get(key);
    if (known !== undefined) return known as boolean;
    const answer = askBoolean(this.raw, query, scopeOptions(scope), 'ask() was given a query that is not an ASK');
    this.keep(key, answer);
    return answer;
  }

  private keep(key: string, answer: Binding[] | boolean): void {
    if (this.answers.size >= MAX_KEPT_ANSWERS) this.answers.clear();
    this.answers.set(key, answer);
  }

  construct(query: Sparql, scope?: QueryScope): Promise<string> {
    return this.delayed(() => this.raw.query(query, { results_format: 'application/n-triples', ...scopeOptions(scope) }) as string);
  }

  queryRaw(query: Sparql, resultsFormat: string, scope?: QueryScope): Promise<string | boolean> {
    return this.delayed(() => this.raw.query(query, { results_format: resultsFormat, ...scopeOptions(scope) }) as string | boolean);
  }

  /** The last write's turn to be applied: writes are applied one after another, in journal order. */
  private applyTail: Promise<void> = Promise.resolve();

  /**
   * Sequence number of the last journal record applied (or skipped: a
   * conditional write whose condition did not hold), and the records
   * skipped; `DurableStore` tells readers outside this thread (query
   * workers replaying the journal) which records to leave out.
   */
  private appliedThrough = 0;
  private readonly skippedSeqs = new Set<number>();

  /** Seq of the last journal record applied or skipped (every record up to it is one or the other). */
  get appliedSeq(): number {
    return this.appliedThrough;
  }

  /** The records in `(afterSeq, throughSeq]` skipped when they applied (a condition that did not hold). */
  skippedBetween(afterSeq: number, throughSeq: number): number[] {
    return [...this.skippedSeqs].filter((seq) => seq > afterSeq && seq <= throughSeq);
  }

  /** Forgets the skipped records up to `seq` (a snapshot holds their outcome: no reader replays them again). */
  forgetSkippedThrough(seq: number): void {
    for (const skipped of this.skippedSeqs) if (skipped <= seq) this.skippedSeqs.delete(skipped);
  }

  /** Resolves once every write made so far has been applied (or has failed). */
  async appliedSoFar(): Promise<void> {
    for (let tail = this.applyTail; ; tail = this.applyTail) {
      await tail;
      if (tail === this.applyTail) return;
    }
  }

  async write(ops: WriteInput[]): Promise<void> {
    await this.writeOps(opsWithTexts(ops), null);
  }

  writeIf(condition: WriteCondition, ops: WriteInput[]): Promise<boolean> {
    return this.writeOps(opsWithTexts(ops), condition);
  }

  /**
   * Asks the condition of a conditional write of the store as it is now,
   * bypassing the read delay and the answer cache: it is evaluated in the
   * same synchronous stretch as the journal append that depends on it.
   */
  private holds(condition: WriteCondition): boolean {
    return conditionHolds(this.raw, condition);
  }

  /**
   * While appends must wait (a snapshot is dumping the store: see
   * `DurableStore`), what to wait for; null when a write may append now.
   */
  private readonly appendBlocked: () => Promise<void> | null;

  /**
   * A write, or a conditional one. Writes are journaled first and applied
   * after their fsync, in journal order. A conditional write is journaled
   * with its condition and the condition asked when it applies (below); a
   * condition without ops is asked once every write journaled before it is
   * applied. The ops' load data is text (`opsWithTexts`); a conditional
   * write resolves whether it applied, any other true.
   *
   * `commit`, when given, makes this one write durable in place of the
   * sink: it is called with the write's record once the write is checked
   * (a large write's leading loads loaded ahead, hidden), and the write is
   * applied once it resolves; when it throws, nothing of the write stays
   * and the error is the write's. The cluster store appends to PostgreSQL
   * this way, so a first install's data is parsed once, by the engine.
   */
  async writeOps(given: WriteOp[], condition: WriteCondition | null, commit?: Commit): Promise<boolean> {
    if (given.length === 0 && !condition) return true;
    if (this.checkGraphs) assertDeclared(given, condition?.ask);
    return writeWithReplacesExpanded(given, (ops) => this.writeExpanded(ops, condition, given, commit));
  }

  /** The record's durability: the given commit, else the sink's append, else none. */
  private durable(record: readonly JournalOp[], commit: Commit | undefined): Promise<void> {
    if (commit) return commit(record);
    return this.sink ? this.sink.append(record) : Promise.resolve();
  }

  private async writeExpanded(ops: WriteOp[], condition: WriteCondition | null, given: readonly WriteOp[], commit: Commit | undefined): Promise<boolean> {
    // Everything the write will send is checked before anything else, on an
    // empty scratch store (consecutive updates run as one SPARQL request,
    // which Oxigraph applies atomically; a load is atomic on its own). A
    // refusal changes nothing and journals nothing. A large write (an
    // install) has its loads checked apart (`writeLarge`), so the event
    // loop keeps turning; writes made meanwhile wait their turn.
    const calls = coalesceUpdates(ops);
    const large = loadBytes(ops) > LARGE_WRITE_CHARS;
    if (!large) checkOnScratch(calls, 0);
    else {
      checkOnScratch(calls.filter((op) => op.kind === 'update'), 0);
      return this.writeLarge(ops, calls, condition, leadingReplaces(given), commit);
    }
    const touched = declaredGraphs(ops);
    if (condition && ops.length === 0) {
      // A condition alone: asked once every write journaled before it is applied.
      for (;;) {
        const blocked = this.checking ?? this.appendBlocked();
        if (blocked) {
          await blocked;
          continue;
        }
        const tail = this.applyTail;
        await tail;
        if (tail === this.applyTail && !this.checking && !this.appendBlocked()) break;
      }
      return this.holds(condition);
    }
    await this.untilAppendMayGo();
    // Journal first, in this tick (journal order is call order), and apply
    // only once the record is fsynced: a write whose journal write or fsync
    // fails (StoreUnavailableError) is never visible to any read, and no
    // cache or listener hears of it. Writes are applied one after another.
    // A conditional write is journaled with its condition as the record's
    // first op (so it shares the group commit of the writes around it), and
    // the condition is asked when its turn to apply comes: after its fsync,
    // every write journaled before it applied, in the same synchronous
    // stretch as its apply. Replay asks it at the same point of history, so
    // it gives the same outcome; a record whose condition failed is
    // remembered as skipped (`skippedSeqs`).
    const record: readonly JournalOp[] = condition ? [{ kind: 'condition', ask: condition.ask, expect: condition.expect }, ...ops] : ops;
    const durable = this.durable(record, commit);
    const seq = this.sink && !commit ? this.sink.lastSeq : this.appliedThrough + 1;
    let applied = true;
    const turn = this.applyTail.then(async () => {
      await durable;
      if (condition && !this.holds(condition)) {
        applied = false;
        this.skippedSeqs.add(seq);
      } else {
        this.apply(calls, touched);
      }
      this.appliedThrough = seq;
    });
    this.applyTail = turn.catch(() => {});
    await turn;
    return applied;
  }

  /**
   * A large write: its place in the journal is taken at once (writes made
   * later are journaled after it, `checking`), then, once every write
   * journaled before it is applied, its loads are checked, it is journaled,
   * and applied in slices (`publish`).
   *
   * The check, two ways. When the write begins with replacing loads of
   * graphs that are empty now (a first install: its matrix, derived and
   * report graphs) and its condition holds, the engine checks those loads
   * by loading them into the store itself, ahead of the journal, while no
   * read can see the store (`hide`): the load is the check and the
   * publication at once. A refusal, or a journal that cannot be written,
   * drops those graphs (they were empty) and the store is as it was; no
   * read saw them and no cache or listener heard of them. Otherwise the
   * loads are loaded into throwaway stores in worker threads
   * (`checkLoadsOffThread`), and published after the journal.
   */
  private async writeLarge(ops: WriteOp[], calls: WriteOp[], condition: WriteCondition | null, lead: LeadLoad[] | null, commit: Commit | undefined): Promise<boolean> {
    await this.untilAppendMayGo();
    let release!: () => void;
    const slot: Promise<void> = new Promise<void>((resolve) => {
      release = () => {
        if (this.checking === slot) this.checking = null;
        resolve();
      };
    });
    this.checking = slot;
    const touched = declaredGraphs(ops);
    let applied = true;
    const turn = this.applyTail.then(async () => {
      // Every write journaled before this one is applied, and none can be journaled until `release`.
      const ahead = lead !== null && lead.every((l) => !this.holdsTriples(l.graph)) && (!condition || this.holds(condition));
      let unhide: (() => void) | null = null;
      /** Graphs loaded ahead (a part of the last one too): dropped again unless the write is journaled. */
      const loaded: string[] = [];
      let journaled = false;
      try {
        if (ahead) {
          unhide = this.hide();
          await this.loadAhead(lead, loaded);
        } else {
          const loads = ops.flatMap((op, index) => (op.kind === 'load' ? [{ index, format: op.format, data: op.data }] : []));
          const refused = await checkLoadsOffThread(loads.map(({ format, data }) => ({ format, data })));
          if (refused) throw new WriteRefusedError(loads[refused.index]!.index, refused.message);
        }
        const record: readonly JournalOp[] = condition ? [{ kind: 'condition', ask: condition.ask, expect: condition.expect }, ...ops] : ops;
        const durable = this.durable(record, commit);
        const seq = this.sink && !commit ? this.sink.lastSeq : this.appliedThrough + 1;
        release();
        await durable;
        journaled = true;
        if (ahead) {
          // The condition was asked before the loads ahead, on the store as it is now but for them.
          // The rest are updates (checked on the scratch store) after the lead's DROPs and loads.
          try {
            for (const op of coalesceUpdates(ops.slice(lead.length * 2))) applyOp(this.raw, op);
          } finally {
            this.applied(touched);
          }
        } else if (condition && !this.holds(condition)) {
          applied = false;
          this.skippedSeqs.add(seq);
        } else {
          await this.publish(calls, touched);
        }
        this.appliedThrough = seq;
      } catch (err) {
        if (!journaled) for (const graph of loaded) this.raw.update(sparql`DROP SILENT GRAPH ${iri(graph)}`);
        throw err;
      } finally {
        release();
        unhide?.();
      }
    });
    this.applyTail = turn.catch(() => {});
    await turn;
    return applied;
  }

  /** Resolves once a write may append to the journal: no large write is waiting for its record, no snapshot is being taken (the durable store). */
  private async untilAppendMayGo(): Promise<void> {
    for (let blocked = this.checking ?? this.appendBlocked(); blocked; blocked = this.checking ?? this.appendBlocked()) await blocked;
  }

  /** Whether `graph` holds a triple now (the raw store: no read delay, no answer cache). */
  private holdsTriples(graph: string): boolean {
    return askBoolean(this.raw, sparql`ASK { GRAPH ${iri(graph)} { ?s ?p ?o } }`, {}, 'not an ASK');
  }

  /**
   * Loads a write's leading replacing loads into the store (their graphs
   * are empty), in slices with an event-loop turn before each, validating
   * every term: the engine's check of the text. Each graph goes into
   * `loaded` before its first slice; a refusal throws `WriteRefusedError`
   * (the caller drops what was loaded).
   */
  private async loadAhead(lead: LeadLoad[], loaded: string[]): Promise<void> {
    for (const load of lead) {
      loaded.push(load.graph);
      // Cut so that no blank node spans two pieces: each load call reads blank node labels afresh.
      const pieces = load.format === 'application/n-triples' ? blankNodeSafeSlices(load.data, SLICE_BYTES, nextTurn) : [load.data];
      for await (const piece of pieces) {
        await nextTurn();
        try {
          this.raw.load(piece, { format: load.format, to_graph_name: oxigraph.namedNode(load.graph), no_transaction: true });
        } catch (err) {
          throw new WriteRefusedError(load.index, (err as Error).message);
        }
      }
    }
  }

  /**
   * Hides the store from reads until the returned function is called:
   * reads made meanwhile wait (`delayed`), so none sees a part of a write.
   */
  private hide(): () => void {
    let open!: () => void;
    this.publishing = new Promise<void>((resolve) => { open = resolve; });
    this.answers.clear();
    return () => {
      this.answers.clear();
      this.sizeAt = undefined;
      this.publishing = null;
      open();
    };
  }

  /** Applies a checked, journaled (small) write in memory, then tells caches and listeners. */
  private apply(calls: WriteOp[], touched: ReadonlySet<string>): void {
    this.revisions.bump(touched);
    try {
      this.answers.clear();
      this.sizeAt = undefined;
      // Checked on the scratch store above; the engine refusing here would
      // need a non-SILENT graph-management op (the store contract forbids them).
      calls.forEach((op, i) => {
        try {
          applyOp(this.raw, op);
        } catch (err) {
          throw new WriteRefusedError(i, (err as Error).message);
        }
      });
    } catch (err) {
      this.revisions.bump(touched);
      throw err;
    }
    this.applied(touched);
  }

  /** After a write was applied: revisions, version, listeners. */
  private applied(touched: ReadonlySet<string>): void {
    this.revisions.bump(touched);
    this.versionCounter++;
    for (const listener of this.listeners) listener(touched);
  }

  /**
   * Applies a large write (an install's graphs: hundreds of thousands of
   * triples) in bounded steps so the event loop keeps turning, while no
   * read sees a part of it: reads made meanwhile wait until it is whole
   * (`publishing`), answers cached by callers stay good (the graphs'
   * revisions move when the write becomes visible, at the end), and other
   * writes wait their turn (writes apply one after another). Each update
   * is one step; each load goes in slices of about `SLICE_BYTES` (whole
   * lines of N-Triples), an event-loop turn before each.
   *
   * Every load was accepted by the engine in the check before the write
   * was journaled, and updates on the scratch store: the engine refusing
   * a step here would be a fault of the engine itself (out of memory).
   * Then the write stays applied as far as it got and the error is thrown;
   * the journal holds the whole write.
   */
  private async publish(calls: WriteOp[], touched: ReadonlySet<string>): Promise<void> {
    const unhide = this.hide();
    try {
      for (const [i, op] of calls.entries()) {
        // Cut so that no blank node spans two pieces: each load call reads blank node labels afresh.
        const pieces = op.kind === 'update' ? [null] : op.format === 'application/n-triples' ? blankNodeSafeSlices(op.data, SLICE_BYTES, nextTurn) : [op.data];
        for await (const piece of pieces) {
          await nextTurn();
          try {
            if (op.kind === 'update') applyOp(this.raw, op);
            // The engine accepted this text in the check: its terms are not validated a second time.
            else this.raw.load(piece!, { format: op.format, to_graph_name: oxigraph.namedNode(op.graph), no_transaction: true, lenient: true });
          } catch (err) {
            throw new WriteRefusedError(i, (err as Error).message);
          }
        }
      }
    } finally {
      this.applied(touched);
      unhide();
    }
  }

  update(sparql: Sparql, graphs: readonly string[]): Promise<void> {
    return this.write([{ kind: 'update', sparql, graphs }]);
  }

  revision(graph: string): number {
    return this.revisions.get(graph);
  }

  /** No other instance writes this store: its revisions are always up to date. */
  syncRevisions(): Promise<void> {
    return Promise.resolve();
  }

  dumpGraph(graph: string): Promise<string> {
    return this.delayed(() => this.raw.dump({ format: 'application/n-triples', from_graph_name: oxigraph.namedNode(graph) }));
  }

  async graphNames(): Promise<string[]> {
    const bindings = await this.select(sparql`SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }`);
    return bindings.map((b) => b.g!.value);
  }

  /** Oxigraph counts every quad on each call: remember the count until the next write (/health asks often). */
  size(): Promise<number> {
    return this.delayed(() => {
      if (this.sizeAt?.version !== this.versionCounter) this.sizeAt = { version: this.versionCounter, size: this.raw.size };
      return this.sizeAt.size;
    });
  }
  private sizeAt: { version: number; size: number } | undefined;

  isEmpty(): Promise<boolean> {
    return this.ask(sparql`ASK { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } } }`).then((any) => !any);
  }

  private readonly sections = new ExclusiveSections();

  exclusive<T>(key: string, fn: () => Promise<T>): Promise<T> {
    return this.sections.run(key, fn);
  }

  onWrite(listener: (graphs: ReadonlySet<string>) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    await this.sink?.close();
  }
}
