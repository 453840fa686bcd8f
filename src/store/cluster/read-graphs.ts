import sparqljs from 'sparqljs';
import { DEFAULT_GRAPH, type WriteOp } from '../store.js';

/*
 * The graphs a write reads: its condition's ASK, the WHERE of its updates
 * (and the source of ADD/COPY/MOVE). The cluster store checks, in the
 * transaction that appends a write, that the heads of the streams of these
 * graphs did not move since the replica the write was checked on
 * (docs/cluster.md, "Writes"): a condition asked on one workspace's graphs
 * does not conflict with writes to another workspace.
 *
 * Parsed with sparqljs (prefixes and base resolved, literals never taken
 * for syntax). What cannot be resolved to constant graphs (`GRAPH ?g`, a
 * text the parser refuses) is `'any'`: the write then checks every stream.
 * Patterns outside any GRAPH read the default graph (the replica does not
 * take the default graph as the union of the named graphs), or the graphs
 * of FROM / USING / WITH when given.
 */

export type GraphsRead = Set<string> | 'any';

interface Term { termType: string; value: string }

/** Updates that name none of these words read no graph (INSERT DATA, DELETE DATA, DROP, CLEAR, CREATE, LOAD): no need to parse them. */
const MAY_READ = /\b(?:where|add|copy|move)\b/i;

/**
 * Texts longer than this are not parsed: they count as reading every
 * stream. sparqljs takes about 1.5 ms per KB (a 64 KB update: 150-350 ms on
 * the event loop), where checking every head costs one statement more and
 * a retry when any stream moved meanwhile.
 */
const PARSE_LIMIT = 64 * 1024;

/** One parser for every call (making one costs as much as a short parse); each parse starts from no prefixes. */
const parser = new sparqljs.Parser();

/** Every graph the ops and the condition read, or `'any'`. */
export function graphsReadByWrite(ops: readonly WriteOp[], conditionAsk: string | undefined): GraphsRead {
  const out = new Set<string>();
  const texts = ops.flatMap((op) => (op.kind === 'update' && MAY_READ.test(op.sparql) ? [op.sparql as string] : []));
  if (conditionAsk !== undefined) texts.push(conditionAsk);
  for (const text of texts) {
    const read = graphsReadBy(text);
    if (read === 'any') return 'any';
    for (const g of read) out.add(g);
  }
  return out;
}

/** The graphs a query or an update reads (never the graphs an update only writes), or `'any'` (also for a text past `PARSE_LIMIT`). */
export function graphsReadBy(text: string): GraphsRead {
  if (text.length > PARSE_LIMIT) return 'any';
  const key = literalsBlanked(text) ?? text;
  const kept = readsKept.get(key);
  if (kept !== undefined) {
    // Most recently used last.
    readsKept.delete(key);
    readsKept.set(key, kept);
    return kept === 'any' ? 'any' : new Set(kept);
  }
  const read = parsedReads(text);
  readsKept.set(key, read === 'any' ? 'any' : new Set(read));
  if (readsKept.size > READS_KEPT) readsKept.delete(readsKept.keys().next().value!);
  return read;
}

/**
 * What `graphsReadBy` found, by text with its string literals' contents
 * left out (`literalsBlanked`): a literal never names a graph, so the
 * texts of one kind of write (a slash command's alias check, for each
 * alias) share one parse. Parsing with sparqljs was the largest part of a
 * small write's time on the cluster store.
 */
const readsKept = new Map<string, GraphsRead>();
const READS_KEPT = 1024;

const IRI_REF = /<[^<>"{}|^`\\\x00-\x20]*>/y;

/**
 * The text with the content of every string literal left out (`"b-12"` →
 * `""`, in each of the four quote forms), or undefined when it cannot be
 * done safely: a comment (`#`, outside IRIs and literals) or a literal
 * that does not end. IRIs are skipped whole, so a quote or `#` inside one
 * is not taken for a literal or a comment.
 */
export function literalsBlanked(text: string): string | undefined {
  let out = '';
  let copied = 0;
  for (let i = 0; i < text.length;) {
    const c = text[i]!;
    if (c === '<') {
      IRI_REF.lastIndex = i;
      const iri = IRI_REF.exec(text);
      i += iri ? iri[0].length : 1;
      continue;
    }
    if (c === '#') return undefined;
    if (c !== '"' && c !== "'") {
      i++;
      continue;
    }
    const long = text.startsWith(c.repeat(3), i);
    const quote = long ? c.repeat(3) : c;
    let j = i + quote.length;
    for (;;) {
      if (j >= text.length) return undefined;
      const d = text[j]!;
      if (d === '\\') {
        j += 2;
        continue;
      }
      if (!long && (d === '\n' || d === '\r')) return undefined;
      if (text.startsWith(quote, j)) {
        // A long literal may end with one or two quotes of its own before its closing three.
        if (long) while (text[j + 3] === c) j++;
        break;
      }
      j++;
    }
    out += text.slice(copied, i) + quote + quote;
    i = j + quote.length;
    copied = i;
  }
  return out + text.slice(copied);
}

function parsedReads(text: string): GraphsRead {
  let parsed: sparqljs.SparqlQuery;
  try {
    parsed = parser.parse(text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD'));
  } catch {
    return 'any';
  }
  const out = new Set<string>();
  try {
    if (parsed.type === 'query') {
      readQuery(parsed as unknown as Record<string, unknown>, out);
      return out;
    }
    for (const op of parsed.updates) {
      if ('updateType' in op) {
        const u = op as unknown as { updateType: string; delete?: unknown; where?: unknown; graph?: Term; using?: { default?: Term[]; named?: Term[] } };
        const defaults = u.using?.default?.length ? u.using.default.map((t) => t.value) : u.graph ? [u.graph.value] : [DEFAULT_GRAPH];
        for (const t of u.using?.named ?? []) out.add(t.value);
        // DELETE WHERE's template is its pattern.
        if (u.updateType === 'deletewhere') walk(u.delete, defaults, out);
        walk(u.where, defaults, out);
        continue;
      }
      const m = op as unknown as { type: string; source?: { name?: Term; default?: boolean } };
      if (m.type === 'add' || m.type === 'copy' || m.type === 'move') out.add(m.source?.default || !m.source?.name ? DEFAULT_GRAPH : m.source.name.value);
    }
  } catch (err) {
    if (err instanceof AnyGraph) return 'any';
    throw err;
  }
  return out;
}

/** Thrown out of the walk at a graph it cannot name. */
class AnyGraph extends Error {}

/** A query's patterns; a subquery reads the graphs its group reads (`inherited`). */
function readQuery(q: Record<string, unknown>, out: Set<string>, inherited: readonly string[] | null = [DEFAULT_GRAPH]): void {
  const from = q.from as { default?: Term[]; named?: Term[] } | undefined;
  const defaults = from?.default?.length ? from.default.map((t) => t.value) : inherited;
  for (const t of from?.named ?? []) out.add(t.value);
  walk(q.where, defaults, out);
  // Expressions of the projection, GROUP BY, HAVING, ORDER BY may hold EXISTS patterns.
  for (const key of ['variables', 'group', 'having', 'order', 'values']) walk(q[key], defaults, out);
}

/** Walks patterns and expressions: `GRAPH <g>` reads g, `GRAPH ?g` any graph, triples outside GRAPH the default graphs. */
function walk(node: unknown, defaults: readonly string[] | null, out: Set<string>): void {
  if (Array.isArray(node)) {
    for (const item of node) walk(item, defaults, out);
    return;
  }
  if (!node || typeof node !== 'object' || 'termType' in node) return;
  const n = node as Record<string, unknown>;
  if (n.type === 'graph' && n.name) {
    const name = n.name as Term;
    if (name.termType !== 'NamedNode') throw new AnyGraph();
    out.add(name.value);
    walk(n.patterns, null, out);
    return;
  }
  if ((n.type === 'bgp' || n.type === 'path' || n.subject !== undefined) && defaults) {
    for (const g of defaults) out.add(g);
  }
  if (n.type === 'query') {
    readQuery(n, out, defaults);
    return;
  }
  for (const value of Object.values(n)) walk(value, defaults, out);
}
