import { parentPort } from 'node:worker_threads';
import oxigraph from 'oxigraph';
import type { FromWorker, RunMessage, RunResult, SyncMessage, ToWorker } from './protocol.js';
import { toCsv, toTsv, toXml, type JsonResults } from './results.js';

/*
 * A query worker (worker thread). It holds its own Oxigraph store with a
 * copy of the graphs one workspace may see, so a query here can neither
 * reach other graphs nor stall the service's event loop; the main thread
 * terminates the worker when a query overruns its time limit.
 */

const port = parentPort;
if (!port) throw new Error('sandbox worker must run in a worker thread');

const store = new oxigraph.Store();

/**
 * The Turtle and JSON-LD libraries load after the worker says it is ready
 * (most of its start-up time), while it receives its data.
 */
type N3 = typeof import('n3');
type JsonLd = typeof import('jsonld');
let libraries: Promise<{ n3: N3; jsonld: JsonLd }> | undefined;
const loadLibraries = () => (libraries ??= Promise.all([import('n3'), import('jsonld')])
  .then(([n3, jsonld]) => ({
    n3: ((n3 as { default?: N3 }).default ?? n3) as N3,
    jsonld: ((jsonld as { default?: JsonLd }).default ?? jsonld) as JsonLd,
  })));

const post = (message: FromWorker) => port.postMessage(message);

/** JSON-LD never fetches a remote context: the only context is the query's own prefixes. */
const documentLoader = async (url: string): Promise<never> => {
  throw new Error(`remote JSON-LD contexts are not loaded (${url})`);
};

/** The query's prefixes as a JSON-LD context; the empty prefix (`PREFIX : <...>`) becomes `@vocab`. */
function jsonLdContext(prefixes: Record<string, string>): Record<string, string> {
  const context: Record<string, string> = {};
  for (const [prefix, iri] of Object.entries(prefixes)) context[prefix === '' ? '@vocab' : prefix] = iri;
  return context;
}

/** Drops the graphs named, then loads each given graph whole (replacing what it held). */
function sync(msg: SyncMessage): number {
  for (const name of [...msg.drop, ...msg.load.map((g) => g.name)]) {
    for (const quad of store.match(null, null, null, oxigraph.namedNode(name))) store.delete(quad);
  }
  for (const graph of msg.load) {
    if (graph.ntriples.length === 0) continue;
    store.load(graph.ntriples, { format: 'application/n-triples', to_graph_name: oxigraph.namedNode(graph.name) });
  }
  return store.size;
}

function queryOptions(msg: RunMessage): Parameters<oxigraph.Store['query']>[1] {
  const options: NonNullable<Parameters<oxigraph.Store['query']>[1]> = {};
  if (msg.defaultGraphs) options.default_graph = msg.defaultGraphs.map((g) => oxigraph.namedNode(g));
  else if (msg.union) options.use_default_graph_as_union = true;
  if (msg.namedGraphs) options.named_graphs = msg.namedGraphs.map((g) => oxigraph.namedNode(g));
  return options;
}

async function graphResult(msg: RunMessage): Promise<RunResult> {
  const text = store.query(msg.query, { ...queryOptions(msg), results_format: 'application/n-triples' }) as string;
  // N-Triples: one triple per line; a CONSTRUCT answer is a set, so drop repeats.
  const unique = new Set<string>();
  let truncated = false;
  for (const line of text.split('\n')) {
    if (line === '' || unique.has(line)) continue;
    if (unique.size === msg.maxResults) { truncated = true; break; }
    unique.add(line);
  }
  const ntriples = unique.size ? `${[...unique].join('\n')}\n` : '';
  let body: string;
  if (msg.format === 'application/n-triples') {
    body = ntriples;
  } else if (msg.format === 'text/turtle') {
    const { n3 } = await loadLibraries();
    const quads = new n3.Parser({ format: 'N-Triples' }).parse(ntriples);
    const writer = new n3.Writer({ prefixes: msg.prefixes });
    writer.addQuads(quads);
    body = await new Promise<string>((resolve, reject) => writer.end((err: Error | null, out: string) => (err ? reject(err) : resolve(out))));
  } else {
    const { jsonld } = await loadLibraries();
    const expanded = await jsonld.fromRDF(ntriples, { format: 'application/n-quads' });
    const options = { documentLoader } as Parameters<typeof jsonld.compact>[2];
    let compacted: object;
    try {
      compacted = await jsonld.compact(expanded, jsonLdContext(msg.prefixes), options);
    } catch {
      // A prefix JSON-LD cannot take as a term: answer with full IRIs rather than fail.
      compacted = await jsonld.compact(expanded, {}, options);
    }
    body = JSON.stringify(compacted);
  }
  return { body, count: unique.size, truncated };
}

function bindingsResult(msg: RunMessage): RunResult {
  const text = store.query(msg.query, { ...queryOptions(msg), results_format: 'application/sparql-results+json' }) as string;
  const results = JSON.parse(text) as JsonResults;
  if (typeof results.boolean === 'boolean') {
    return { body: msg.format === 'application/sparql-results+xml' ? toXml(results) : text, count: 1, truncated: false };
  }
  const rows = results.results?.bindings ?? [];
  const truncated = rows.length > msg.maxResults;
  if (truncated) results.results = { bindings: rows.slice(0, msg.maxResults) };
  let body: string;
  switch (msg.format) {
    case 'application/sparql-results+xml': body = toXml(results); break;
    case 'text/csv': body = toCsv(results); break;
    case 'text/tab-separated-values': body = toTsv(results); break;
    default: body = truncated ? JSON.stringify(results) : text;
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
    post({ type: 'error', id: msg.id, kind: broken ? 'internal' : 'query', message: err instanceof Error ? err.message : String(err) });
    return;
  }
  post({ type: 'result', id: msg.id, result });
}

// Messages are handled one at a time, in order: a load always finishes before the next query.
let chain: Promise<void> = Promise.resolve();
port.on('message', (msg: ToWorker) => {
  chain = chain.then(async () => {
    if (msg.type === 'sync') {
      try {
        post({ type: 'synced', id: msg.id, quads: sync(msg) });
      } catch (err) {
        post({ type: 'error', id: msg.id, kind: 'internal', message: err instanceof Error ? err.message : String(err) });
      }
    } else {
      await run(msg);
    }
  });
});

post({ type: 'ready' });
void loadLibraries();
