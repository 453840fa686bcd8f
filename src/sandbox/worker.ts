import { parentPort } from 'node:worker_threads';
import oxigraph from 'oxigraph';
import { type FromWorker, type RunMessage, type RunResult, type SyncMessage, type ToWorker } from './protocol.js';
import { toCsv, toTsv, toXml, type JsonResults } from './results.js';
import { limitPlan, PROBE_VAR, type LimitPlan } from './limits.js';
import { compactJsonLd, compactNodes, distinctJsonLd } from './jsonld.js';
import { readJournalRecords } from '../store/journal-records.js';
import { snapshotGraphBlocks } from '../store/embedded/snapshot-file.js';
import { giveWayToTheEventLoop } from '../workers/priority.js';
import { nTriplesSlices } from '../store/ntriples-slices.js';
import { engineAnswerPieces, EngineRequestError } from '../store/remote/engine-request.js';
import { withScratchStore } from '../store/scratch.js';
import { RdfXmlUnwritable, toRdfXml } from './rdfxml.js';

/** Characters of N-Triples handed to the engine at a time when a graph sent as text is loaded. */
const LOAD_SLICE_CHARS = 256 * 1024;

/*
 * A query worker (worker thread). It holds its own Oxigraph store with a
 * copy of the graphs one workspace may see, so a query here can neither
 * reach other graphs nor stall the service's event loop; the main thread
 * terminates the worker when a query overruns its time limit.
 */

const port = parentPort;
if (!port) throw new Error('sandbox worker must run in a worker thread');

// This thread gives way to the service's event loop (`workers/priority.ts`).
giveWayToTheEventLoop();

const store = new oxigraph.Store();

/** The Turtle library loads after the worker says it is ready, while it receives its data. */
type N3 = typeof import('n3');
let libraries: Promise<{ n3: N3 }> | undefined;
const loadLibraries = () => (libraries ??= import('n3')
  .then((n3) => ({ n3: ((n3 as { default?: N3 }).default ?? n3) as N3 })));

const post = (message: FromWorker) => port.postMessage(message);

/** This thread's memory: its JS heap and its external memory (Oxigraph's WebAssembly memory is counted there). */
const memory = () => {
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.external;
};

/**
 * Loads the blocks of `graphs` from a snapshot file, in one parse (so a
 * blank node shared by blocks stays one node, as in the service's store).
 * Loads here run in a transaction: Oxigraph's load without one
 * (`no_transaction`) left the worker's memory about half as large again
 * (docs/figures.md), and WebAssembly memory never shrinks.
 */
function loadFromSnapshot(file: string, graphs: string[]): void {
  store.load(snapshotGraphBlocks(file, new Set(graphs)), { format: 'application/trig', lenient: true });
}

function clearGraph(name: string): void {
  store.update(`DROP SILENT GRAPH <${name}>`);
}

/** The snapshot file could not be read; the graphs it was to give are left empty. */
class SnapshotUnreadable extends Error {}

/** The update-replay module (sparqljs) loads when a journaled update first needs it. */
let replayModule: Promise<typeof import('./replay.js')> | undefined;

/** Where an op stands in the journal: its record's seq, then its place in the record. */
type OpAt = { seq: number; op: number };
const before = (a: OpAt, b: OpAt) => a.seq < b.seq || (a.seq === b.seq && a.op < b.op);

/**
 * The last op of the journal records in `(afterSeq, throughSeq]` that
 * empties each of `graphs` (a `DROP`/`CLEAR` it can replay), for the graphs
 * some op empties: nothing before that op can show in such a graph, so
 * neither its snapshot block nor the records' earlier loads into it are
 * read (a reinstalled matrix: its old content is never loaded to be
 * dropped). Only records holding an update are parsed (a record of loads
 * alone empties nothing). Throws what reading the records throws.
 */
async function lastEmptied(source: NonNullable<SyncMessage['fromJournal']>): Promise<Map<string, OpAt>> {
  const wanted = new Set(source.graphs);
  const emptied = new Map<string, OpAt>();
  const records = readJournalRecords(source.dir, source.afterSeq, source.throughSeq, { skip: source.skipped, holdingUpdates: true });
  for (const { seq, ops } of records) {
    for (const [index, op] of ops.entries()) {
      if (op.kind !== 'update' || !op.graphs) continue;
      const live = op.graphs.filter((g) => wanted.has(g));
      if (live.length === 0) continue;
      const { replaySteps } = await (replayModule ??= import('./replay.js'));
      const { steps, unreplayable } = replaySteps(op.sparql, new Set(live));
      for (const step of steps) {
        if (!('clear' in step)) continue;
        for (const g of step.clear) if (!unreplayable.includes(g)) emptied.set(g, { seq, op: index });
      }
    }
  }
  return emptied;
}

/**
 * Brings `graphs` (already holding their snapshot content, but for those
 * `emptied` names) up to date from the journal records in
 * `(afterSeq, throughSeq]`: loads into them are loaded, updates that
 * declare them replayed when their effect depends on their own text only
 * (`replay.ts`); a graph skips every op before the op that last empties it.
 * Answers the graphs it could not bring up to date (left empty: the main
 * thread sends them): those an update writes from other graphs' content,
 * or all of them when the records cannot be read.
 */
async function replayJournal(source: NonNullable<SyncMessage['fromJournal']>, emptied: ReadonlyMap<string, OpAt>): Promise<string[]> {
  const wanted = new Set(source.graphs);
  const lost = new Set<string>();
  const lose = (graphs: Iterable<string>) => {
    for (const g of graphs) {
      if (lost.has(g)) continue;
      lost.add(g);
      clearGraph(g);
    }
  };
  /** The graph's content is made from this op on (not emptied later). */
  const current = (g: string, at: OpAt) => {
    const last = emptied.get(g);
    return last === undefined || !before(at, last);
  };
  try {
    // A conditional write whose condition did not hold applied nothing (skipped); one that held applied its ops.
    for (const { seq, ops } of readJournalRecords(source.dir, source.afterSeq, source.throughSeq, { skip: source.skipped })) {
      for (const [index, op] of ops.entries()) {
        if (op.kind === 'condition') continue;
        const at = { seq, op: index };
        if (op.kind === 'load') {
          // The text in pieces of a megabyte, never one string (an install's is tens of megabytes); in a
          // transaction (less memory, see `loadFromSnapshot`). A load that fails ends the replay, and the graphs are cleared below.
          // The store accepted this text before journaling it: its terms are not validated again (as a snapshot's).
          if (wanted.has(op.graph) && !lost.has(op.graph) && current(op.graph, at)) {
            store.load(op.text(), { format: op.format, to_graph_name: oxigraph.namedNode(op.graph), lenient: true });
          }
          continue;
        }
        const live = (op.graphs ?? [...wanted]).filter((g) => wanted.has(g) && !lost.has(g) && current(g, at));
        if (live.length === 0) continue;
        // A record from before writes declared their graphs: it may have written any of them.
        if (!op.graphs) {
          lose(live);
          continue;
        }
        const { replaySteps } = await (replayModule ??= import('./replay.js'));
        const { steps, unreplayable } = replaySteps(op.sparql, new Set(live));
        lose(unreplayable);
        for (const step of steps) {
          if ('clear' in step) for (const g of step.clear) clearGraph(g);
          else store.update(step.update);
        }
      }
    }
  } catch {
    // Records missing (removed by later snapshots), unreadable, or refused: the main thread sends the graphs.
    lose(wanted);
  }
  return [...lost];
}

/**
 * Drops the graphs named, then loads each given graph whole (replacing what
 * it held): those of the snapshot from its file, the journal's from the
 * snapshot (unless the journal empties them) and the records after it, the
 * others from the text sent. When the snapshot cannot be read, the graphs
 * it was to give (the journal's too) are left empty and
 * `SnapshotUnreadable` thrown (the main thread then sends them as text).
 */
async function sync(msg: SyncMessage): Promise<{ quads: number; unreplayed: string[] }> {
  const journalGraphs = msg.fromJournal?.graphs ?? [];
  const fetched = msg.fetch ?? [];
  for (const name of [...msg.drop, ...msg.load.map((g) => g.name), ...fetched.map((g) => g.name), ...(msg.fromSnapshot?.graphs ?? []), ...journalGraphs]) clearGraph(name);
  // Which journal graphs the records empty (their snapshot blocks are not needed); unreadable records: none is rebuilt.
  let emptied: Map<string, OpAt> | undefined;
  if (msg.fromJournal && journalGraphs.length > 0) emptied = await lastEmptied(msg.fromJournal).catch(() => undefined);
  const replayable = emptied ? journalGraphs : [];
  const fileGraphs = [...(msg.fromSnapshot?.graphs ?? []), ...(msg.fromSnapshot ? replayable.filter((g) => !emptied!.has(g)) : [])];
  if (msg.fromSnapshot && fileGraphs.length > 0) {
    try {
      loadFromSnapshot(msg.fromSnapshot.file, fileGraphs);
    } catch (err) {
      for (const name of fileGraphs) clearGraph(name);
      throw new SnapshotUnreadable(err instanceof Error ? err.message : String(err));
    }
  }
  const unreplayed = msg.fromJournal && journalGraphs.length > 0
    ? (emptied ? await replayJournal(msg.fromJournal, emptied) : journalGraphs)
    : [];
  // The graphs' texts below are the store's own dumps (or the remote engine's): their terms are not
  // validated again, as a snapshot's are not (a term the engine wrote but Oxigraph would refuse no longer fails the copy).
  for (const graph of msg.load) {
    if (graph.ntriples.length === 0) continue;
    // One load call (so blank nodes stay whole) fed in slices: the engine
    // copies its input into WebAssembly memory, which never shrinks, and a
    // graph sent whole was copied whole (tens of megabytes at 100,000 quads).
    store.load(nTriplesSlices(graph.ntriples, LOAD_SLICE_CHARS), { format: 'application/n-triples', to_graph_name: oxigraph.namedNode(graph.name), lenient: true });
  }
  for (const graph of fetched) {
    // The answer in the pieces it arrived in (each ends at a whole character, not a line), given to one load call.
    const pieces = await engineAnswerPieces(graph.request);
    store.load(pieces, { format: 'application/n-triples', to_graph_name: oxigraph.namedNode(graph.name), lenient: true });
  }
  return { quads: store.size, unreplayed };
}

function queryOptions(msg: RunMessage): Parameters<oxigraph.Store['query']>[1] {
  const options: NonNullable<Parameters<oxigraph.Store['query']>[1]> = {};
  if (msg.defaultGraphs) options.default_graph = msg.defaultGraphs.map((g) => oxigraph.namedNode(g));
  else if (msg.union) options.use_default_graph_as_union = true;
  if (msg.namedGraphs) options.named_graphs = msg.namedGraphs.map((g) => oxigraph.namedNode(g));
  return options;
}

/** Limit plans of recent query texts (a slash command runs the same text again and again). */
const plans = new Map<string, LimitPlan>();
function planOf(text: string): LimitPlan {
  let plan = plans.get(text);
  if (!plan) {
    plan = limitPlan(text);
    if (plans.size >= 200) plans.delete(plans.keys().next().value!);
    plans.set(text, plan);
  }
  return plan;
}

/**
 * The distinct triples of a graph query, at most `max` (`truncated` when
 * the query yields more): see `limits.ts` for how the solution LIMIT grows
 * until the answer is exact.
 */
function distinctTriples(msg: RunMessage): { lines: string[]; truncated: boolean } {
  const max = msg.maxResults;
  const options = { ...queryOptions(msg), results_format: 'application/n-triples' };
  return withinLimit(msg, (text) => {
    const out = store.query(text, options) as string;
    // N-Triples: one triple per line; a CONSTRUCT answer is a set, so drop repeats.
    const unique = new Set<string>();
    let truncated = false;
    for (const line of out.split('\n')) {
      if (line === '' || unique.has(line)) continue;
      if (unique.size === max) { truncated = true; break; }
      unique.add(line);
    }
    return { lines: [...unique], truncated };
  });
}

/**
 * The answer of a graph query as `collect` reads the engine's answer to a
 * query text (`truncated` when there are more than `maxResults` distinct
 * triples): the query itself, or with a solution LIMIT grown until the
 * answer is exact (`limits.ts`).
 */
function withinLimit<T extends { truncated: boolean }>(msg: RunMessage, collect: (text: string) => T): T {
  const plan = planOf(msg.query);
  if (!plan.limitable) return collect(msg.query);
  for (let solutions = msg.maxResults + 1; ; solutions *= 4) {
    if (plan.ownLimit !== undefined && plan.ownLimit <= solutions) return collect(msg.query);
    const answer = collect(plan.withLimit(solutions));
    if (answer.truncated) return answer;
    const counted = store.query(plan.probe(solutions), { ...queryOptions(msg), results_format: 'application/sparql-results+json' }) as string;
    const n = Number((JSON.parse(counted) as JsonResults).results?.bindings[0]?.[PROBE_VAR]?.value ?? 0);
    if (n < solutions) return answer;
  }
}

async function graphResult(msg: RunMessage): Promise<RunResult> {
  if (msg.format === 'application/ld+json') {
    // The default answer: the engine writes the JSON-LD of the query's triples (in WebAssembly), and
    // `distinctJsonLd` drops repeats; `compactNodes` gives it the query's prefixes. Loading the distinct
    // triples into a scratch store to write them out would cost about as much as the query (docs/figures.md).
    const options = { ...queryOptions(msg), results_format: 'application/ld+json' };
    const answer = withinLimit(msg, (text) => {
      const nodes = distinctJsonLd(store.query(text, options) as string, msg.maxResults);
      return nodes ? { ...nodes, truncated: false } : { nodes: [], count: 0, truncated: true };
    });
    // Over the limit: the first `maxResults` triples in the engine's order, as the other formats give them (below).
    if (!answer.truncated) return { body: compactNodes(answer.nodes, msg.prefixes), count: answer.count, truncated: false };
  }
  const { lines, truncated } = distinctTriples(msg);
  const ntriples = lines.length ? `${lines.join('\n')}\n` : '';
  let body: string;
  if (msg.format === 'application/n-triples') {
    body = ntriples;
  } else if (msg.format === 'application/rdf+xml') {
    body = toRdfXml(ntriples);
  } else if (msg.format === 'text/turtle') {
    const { n3 } = await loadLibraries();
    const quads = new n3.Parser({ format: 'N-Triples' }).parse(ntriples);
    const writer = new n3.Writer({ prefixes: msg.prefixes });
    writer.addQuads(quads);
    body = await new Promise<string>((resolve, reject) => writer.end((err: Error | null, out: string) => (err ? reject(err) : resolve(out))));
  } else {
    // Oxigraph writes the JSON-LD (in WebAssembly); `compactJsonLd` gives it the query's prefixes.
    const expanded = withScratchStore((scratch) => {
      if (ntriples) scratch.load(ntriples, { format: 'application/n-triples' });
      return scratch.dump({ format: 'application/ld+json', from_graph_name: oxigraph.defaultGraph() });
    });
    body = compactJsonLd(expanded, msg.prefixes);
  }
  return { body, count: lines.length, truncated };
}

function bindingsResult(msg: RunMessage): RunResult {
  const plan = planOf(msg.query);
  const cap = msg.maxResults + 1;
  // Rows are solutions: LIMIT limit + 1 tells exactly whether there are more.
  const text = plan.form === 'SELECT' && (plan.ownLimit === undefined || plan.ownLimit > cap) ? plan.withLimit(cap) : msg.query;
  const raw = store.query(text, { ...queryOptions(msg), results_format: 'application/sparql-results+json' }) as string;
  const results = JSON.parse(raw) as JsonResults;
  if (typeof results.boolean === 'boolean') {
    return { body: msg.format === 'application/sparql-results+xml' ? toXml(results) : raw, count: 1, truncated: false };
  }
  const rows = results.results?.bindings ?? [];
  const truncated = rows.length > msg.maxResults;
  if (truncated) results.results = { bindings: rows.slice(0, msg.maxResults) };
  let body: string;
  switch (msg.format) {
    case 'application/sparql-results+xml': body = toXml(results); break;
    case 'text/csv': body = toCsv(results); break;
    case 'text/tab-separated-values': body = toTsv(results); break;
    default: body = truncated ? JSON.stringify(results) : raw;
  }
  return { body, count: Math.min(rows.length, msg.maxResults), truncated };
}

async function run(msg: RunMessage): Promise<void> {
  let result: RunResult;
  try {
    result = msg.kind === 'graph' ? await graphResult(msg) : bindingsResult(msg);
  } catch (err) {
    // Oxigraph reports query problems (parse, evaluation) as thrown errors; a
    // trap or exhausted memory leaves the engine unusable: the worker is replaced.
    const broken = err instanceof WebAssembly.RuntimeError || err instanceof RangeError;
    const message = err instanceof Error ? err.message : String(err);
    if (err instanceof RdfXmlUnwritable) {
      post({ type: 'error', id: msg.id, kind: 'format', message: `Cannot answer in RDF/XML: ${message}; ask for text/turtle, application/n-triples or application/ld+json` });
      return;
    }
    post({ type: 'error', id: msg.id, kind: broken ? 'internal' : 'query', message });
    return;
  }
  post({ type: 'result', id: msg.id, result, memory: memory() });
}

// Messages are handled one at a time, in order: a load always finishes before the next query.
let chain: Promise<void> = Promise.resolve();
port.on('message', (msg: ToWorker) => {
  chain = chain.then(async () => {
    if (msg.type === 'sync') {
      try {
        const { quads, unreplayed } = await sync(msg);
        post({ type: 'synced', id: msg.id, quads, memory: memory(), ...(unreplayed.length ? { unreplayed } : {}) });
      } catch (err) {
        const kind = err instanceof SnapshotUnreadable ? 'snapshot'
          : err instanceof EngineRequestError && err.kind === 'unreachable' ? 'unreachable' : 'internal';
        post({ type: 'error', id: msg.id, kind, message: err instanceof Error ? err.message : String(err) });
      }
    } else {
      await run(msg);
    }
  });
});

post({ type: 'ready' });
void loadLibraries();
