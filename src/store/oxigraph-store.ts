import oxigraph from 'oxigraph';
import { ExclusiveSections } from './sections.js';
import { WriteRefusedError, type Binding, type QuadStore, type QueryScope, type RdfFormat, type WriteCondition, type WriteOp } from './store.js';

/**
 * Where applied writes go to become durable. The journal implements it; the
 * store calls `append` synchronously right after applying the ops in memory,
 * so journal order is apply order, and awaits the returned promise (fsync)
 * before acknowledging the write.
 */
export interface WriteSink {
  append(ops: WriteOp[]): Promise<void>;
  close(): Promise<void>;
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

function scopeOptions(scope?: QueryScope): Record<string, unknown> {
  const options: Record<string, unknown> = {};
  if (scope?.defaultGraphs) options.default_graph = scope.defaultGraphs.map((g) => oxigraph.namedNode(g));
  if (scope?.namedGraphs) options.named_graphs = scope.namedGraphs.map((g) => oxigraph.namedNode(g));
  return options;
}

/** Applies one op to a raw Oxigraph store (also used by journal replay). */
export function applyOp(store: oxigraph.Store, op: WriteOp): void {
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
 * Joins runs of consecutive update ops into one multi-operation update (one
 * atomic Oxigraph call), hoisting their prologues into one. Updates whose
 * prologues disagree (a prefix bound to two IRIs, another base) stay separate.
 */
export function coalesceUpdates(ops: WriteOp[]): WriteOp[] {
  const out: WriteOp[] = [];
  let run: { prefixes: Map<string, string>; base: string | null; bodies: string[] } | null = null;
  const flush = () => {
    if (!run) return;
    const head = [...run.prefixes].map(([p, i]) => `PREFIX ${p}: <${i}>`);
    if (run.base !== null) head.unshift(`BASE <${run.base}>`);
    out.push({ kind: 'update', sparql: `${head.join('\n')}\n${run.bodies.join(' ;\n')}` });
    run = null;
  };
  for (const op of ops) {
    if (op.kind !== 'update') { flush(); out.push(op); continue; }
    const part = splitPrologue(op.sparql);
    const clashes = run !== null && (part.base !== run.base
      || [...part.prefixes].some(([p, i]) => run!.prefixes.has(p) && run!.prefixes.get(p) !== i));
    if (clashes) flush();
    if (!run) run = { prefixes: new Map(), base: null, bodies: [] };
    for (const [p, i] of part.prefixes) run.prefixes.set(p, i);
    if (part.base !== null) run.base = part.base;
    run.bodies.push(part.body);
  }
  flush();
  return out;
}

/**
 * A write whose N-Triples loads hold more than this many bytes is applied in
 * slices of about this size, with an event-loop turn between slices (see
 * `OxigraphStore.write`). About 700 triples: a few milliseconds each.
 */
export const SLICE_BYTES = 64 * 1024;

/** N-Triples text cut at line ends into pieces of about `size` bytes (a triple never spans lines). */
export function* nTriplesSlices(data: string, size: number): Generator<string> {
  let start = 0;
  while (start < data.length) {
    let end = start + size;
    if (end >= data.length) end = data.length;
    else {
      const newline = data.indexOf('\n', end);
      end = newline === -1 ? data.length : newline + 1;
    }
    yield data.slice(start, end);
    start = end;
  }
}

const loadBytes = (ops: WriteOp[]) => ops.reduce((n, op) => n + (op.kind === 'load' && op.format === 'application/n-triples' ? op.data.length : 0), 0);
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Applies engine calls to an empty scratch store, in order; throws
 * `WriteRefusedError` for the first one the engine refuses.
 */
function checkOnScratch(calls: WriteOp[], firstIndex: number): void {
  const scratch = new oxigraph.Store();
  calls.forEach((op, i) => {
    try {
      applyOp(scratch, op);
    } catch (err) {
      throw new WriteRefusedError(firstIndex + i, (err as Error).message);
    }
  });
}

/** Most answers kept between writes, and most rows of a kept SELECT answer. */
const MAX_KEPT_ANSWERS = 5000;
const MAX_KEPT_ROWS = 200;

function answerKey(kind: string, query: string, scope?: QueryScope): string {
  if (!scope?.defaultGraphs && !scope?.namedGraphs) return `${kind}\n${query}`;
  return `${kind}\n${JSON.stringify([scope.defaultGraphs ?? null, scope.namedGraphs ?? null])}\n${query}`;
}

/**
 * The embedded store: Oxigraph in memory. With a sink, each write is durable
 * when its promise resolves; without one it is a plain in-memory store.
 */
export class OxigraphStore implements QuadStore {
  private versionCounter = 0;
  private readonly listeners = new Set<(ops: WriteOp[]) => void>();
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
    options: { readDelay?: boolean } = {},
  ) {
    this.readDelay = options.readDelay ?? readDelayFromEnv();
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
    if (!this.readDelay) return answer();
    await this.readGate();
    const value = answer();
    await this.readGate();
    return value;
  }

  get version(): number {
    return this.versionCounter;
  }

  select(query: string, scope?: QueryScope): Promise<Binding[]> {
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

  ask(query: string, scope?: QueryScope): Promise<boolean> {
    return this.delayed(() => this.askNow(query, scope));
  }

  private askNow(query: string, scope?: QueryScope): boolean {
    const key = answerKey('ask', query, scope);
    const known = this.answers.get(key);
    if (known !== undefined) return known as boolean;
    const text = this.raw.query(query, { results_format: RESULTS_JSON, ...scopeOptions(scope) }) as string;
    const parsed = JSON.parse(text) as { boolean?: boolean };
    if (typeof parsed.boolean !== 'boolean') throw new Error('ask() was given a query that is not an ASK');
    this.keep(key, parsed.boolean);
    return parsed.boolean;
  }

  private keep(key: string, answer: Binding[] | boolean): void {
    if (this.answers.size >= MAX_KEPT_ANSWERS) this.answers.clear();
    this.answers.set(key, answer);
  }

  construct(query: string, scope?: QueryScope): Promise<string> {
    return this.delayed(() => this.raw.query(query, { results_format: 'application/n-triples', ...scopeOptions(scope) }) as string);
  }

  queryRaw(query: string, resultsFormat: string, scope?: QueryScope): Promise<string | boolean> {
    return this.delayed(() => this.raw.query(query, { results_format: resultsFormat, ...scopeOptions(scope) }) as string | boolean);
  }

  /** The sliced write being applied, if any: later writes wait for it. */
  protected slicing: Promise<void> | null = null;

  async write(ops: WriteOp[]): Promise<void> {
    await this.apply(ops, null);
  }

  writeIf(condition: WriteCondition, ops: WriteOp[]): Promise<boolean> {
    return this.apply(ops, condition);
  }

  /**
   * Asks the condition of a conditional write of the store as it is now,
   * bypassing the read delay and the answer cache: it is evaluated in the
   * same synchronous stretch as the apply that depends on it.
   */
  private holds(condition: WriteCondition): boolean {
    const parsed = JSON.parse(this.raw.query(condition.ask, { results_format: RESULTS_JSON }) as string) as { boolean?: boolean };
    if (typeof parsed.boolean !== 'boolean') throw new Error('writeIf() was given a condition that is not an ASK');
    return parsed.boolean === condition.expect;
  }

  /**
   * Applies a write, or a conditional one: the condition is evaluated right
   * before the ops are applied, in the same synchronous stretch of code, so
   * no other write comes between the check and the apply (writes queued
   * before this one, behind a sliced write or a snapshot, are applied first).
   */
  protected async apply(ops: WriteOp[], condition: WriteCondition | null): Promise<boolean> {
    // Writes apply one after another: none starts while a sliced write is under way.
    while (this.slicing) await this.slicing;
    if (condition && !this.holds(condition)) return false;
    if (ops.length === 0) return true;
    // Consecutive updates run as one SPARQL request, which Oxigraph applies
    // atomically, and a load is atomic on its own: so only a write of several
    // engine calls can half-apply. Each call after the first is checked on a
    // scratch store before the first is applied; a refusal changes nothing.
    // A large write (an install) is applied in slices with event-loop turns
    // between them; its updates are checked on the scratch store first, and
    // its loads hold N-Triples the deployment pipeline already checked term
    // by term against what the store accepts (src/packages/pipeline.ts).
    const calls = coalesceUpdates(ops);
    const sliced = loadBytes(ops) > SLICE_BYTES * 4;
    if (sliced) checkOnScratch(calls.filter((op) => op.kind === 'update'), 0);
    else if (calls.length > 1) checkOnScratch(calls.slice(1), 1);
    this.answers.clear();
    this.sizeAt = undefined;
    if (sliced) {
      const applying = this.applyInSlices(ops);
      this.slicing = applying.catch(() => {}).finally(() => { this.slicing = null; });
      try {
        await applying;
      } finally {
        // Answers read between slices saw part of the write.
        this.answers.clear();
        this.sizeAt = undefined;
      }
    } else {
      try {
        applyOp(this.raw, calls[0]!);
      } catch (err) {
        throw new WriteRefusedError(0, (err as Error).message);
      }
      for (const op of calls.slice(1)) applyOp(this.raw, op);
    }
    // Apply in memory, then hand to the journal in the same tick so journal
    // order = apply order.
    this.versionCounter++;
    const durable = this.sink ? this.sink.append(ops) : Promise.resolve();
    for (const listener of this.listeners) listener(ops);
    await durable;
    return true;
  }

  /**
   * Applies a large write (an install's graphs: hundreds of thousands of
   * triples) in bounded steps, each its own short synchronous call with an
   * event-loop turn before it, so requests keep being answered meanwhile.
   * Its loads must hold data the store accepts (the deployment pipeline
   * checks every term with the store's own constructors before): a slice
   * refused part-way would leave the slices before it applied.
   */
  private async applyInSlices(ops: WriteOp[]): Promise<void> {
    for (const op of coalesceUpdates(ops)) {
      if (op.kind === 'load' && op.format === 'application/n-triples' && op.data.length > SLICE_BYTES) {
        for (const piece of nTriplesSlices(op.data, SLICE_BYTES)) {
          await nextTurn();
          this.raw.load(piece, { format: op.format, to_graph_name: oxigraph.namedNode(op.graph) });
        }
      } else {
        await nextTurn();
        applyOp(this.raw, op);
      }
    }
  }

  update(sparql: string): Promise<void> {
    return this.write([{ kind: 'update', sparql }]);
  }

  dumpGraph(graph: string): Promise<string> {
    return this.delayed(() => this.raw.dump({ format: 'application/n-triples', from_graph_name: oxigraph.namedNode(graph) }));
  }

  async graphNames(): Promise<string[]> {
    const bindings = await this.select('SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }');
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

  private readonly sections = new ExclusiveSections();

  exclusive<T>(key: string, fn: () => Promise<T>): Promise<T> {
    return this.sections.run(key, fn);
  }

  onWrite(listener: (ops: WriteOp[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    await this.sink?.close();
  }
}
