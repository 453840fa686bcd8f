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
  const shape = shapeOf(text) ?? { key: text, iris: [] };
  let kept = readsKept.get(shape.key);
  if (kept !== undefined) {
    // Most recently used last.
    readsKept.delete(shape.key);
    readsKept.set(shape.key, kept);
  } else {
    kept = parsedReads(shape.key);
    readsKept.set(shape.key, kept);
    if (readsKept.size > READS_KEPT) readsKept.delete(readsKept.keys().next().value!);
  }
  return kept === 'any' ? 'any' : filledIn(kept, shape.iris);
}

/**
 * What `graphsReadBy` found, by the shape of a text (`shapeOf`): its
 * string literals' contents left out and its IRIs numbered, so the texts
 * of one kind of write (a slash command's alias check for each alias, a
 * command's record for each command) share one parse. Parsing with
 * sparqljs was the largest part of a small write's time on the cluster
 * store.
 */
const readsKept = new Map<string, GraphsRead>();
const READS_KEPT = 1024;

const IRI_REF = /<[^<>"{}|^`\\\x00-\x20]*>/y;
/** An IRI with a scheme: the same wherever it stands (a relative one is resolved against a base). */
const ABSOLUTE = /^[A-Za-z][A-Za-z0-9+.-]*:/;
/** Just before a prefix's IRI (`PREFIX x: <...>`): kept in the shape, since prefixed names are made from it. */
const PREFIX_BEFORE = /PREFIX\s+[^\s:]*:\s*$/i;
/** The n-th absolute IRI of a text, in its shape. */
const NUMBERED = 'urn:x-wsm-shape:';

/** A shape's graphs with its numbered IRIs replaced by the text's own; `'any'` if a numbered IRI became part of another (not expected: prefixes are kept whole). */
function filledIn(graphs: ReadonlySet<string>, iris: readonly string[]): GraphsRead {
  const out = new Set<string>();
  for (const g of graphs) {
    if (!g.startsWith(NUMBERED)) {
      out.add(g);
      continue;
    }
    const iri = iris[Number(g.slice(NUMBERED.length))];
    if (iri === undefined) return 'any';
    out.add(iri);
  }
  return out;
}

/**
 * A text's shape: the text with the content of every string literal left
 * out (`"b-12"` → `""`, in each of the four quote forms) and each absolute
 * IRI but a prefix's replaced by `<urn:x-wsm-shape:n>` (n counting from 0,
 * the IRI itself the n-th of `iris`). Texts of one shape read the same
 * graphs up to those IRIs: a literal never names a graph, and a numbered
 * IRI names a graph in a text exactly where it does in the shape.
 * Undefined when this cannot be done safely: a comment (`#`, outside IRIs
 * and literals), a literal that does not end, or a BASE (relative IRIs are
 * resolved against it).
 */
export function shapeOf(text: string): { key: string; iris: string[] } | undefined {
  const iris: string[] = [];
  let out = '';
  let copied = 0;
  for (let i = 0; i < text.length;) {
    const c = text[i]!;
    if (c === '<') {
      IRI_REF.lastIndex = i;
      const ref = IRI_REF.exec(text);
      if (!ref) {
        i++;
        continue;
      }
      const value = ref[0].slice(1, -1);
      if (ABSOLUTE.test(value) && !PREFIX_BEFORE.test(text.slice(Math.max(0, i - 200), i))) {
        out += `${text.slice(copied, i)}<${NUMBERED}${iris.length}>`;
        iris.push(value);
        copied = i + ref[0].length;
      }
      i += ref[0].length;
      continue;
    }
    if (c === '#') return undefined;
    if ((c === 'b' || c === 'B') && /^base\b/i.test(text.slice(i, i + 5)) && !/[\w:]/.test(text[i - 1] ?? ' ')) return undefined;
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
  return { key: out + text.slice(copied), iris };
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
        if (u.updateType === 'deletewhere') walk(u.delete, defaults, out, new Map());
        walk(u.where, defaults, out, new Map());
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

/** Graph variables a VALUES block binds to IRIs alone, by name (`?g`): a pattern `GRAPH ?g` joined with it reads only those graphs. */
type Bound = ReadonlyMap<string, readonly string[]>;

/** A query's patterns; a subquery reads the graphs its group reads (`inherited`). Its own variables are its own: nothing bound outside it is taken in. */
function readQuery(q: Record<string, unknown>, out: Set<string>, inherited: readonly string[] | null = [DEFAULT_GRAPH]): void {
  const from = q.from as { default?: Term[]; named?: Term[] } | undefined;
  const defaults = from?.default?.length ? from.default.map((t) => t.value) : inherited;
  for (const t of from?.named ?? []) out.add(t.value);
  // A VALUES after the pattern joins with all of it.
  const bound = boundBy([{ type: 'values', values: q.values }], new Map());
  walk(q.where, defaults, out, bound);
  // Expressions of the projection, GROUP BY, HAVING, ORDER BY may hold EXISTS patterns.
  for (const key of ['variables', 'group', 'having', 'order']) walk(q[key], defaults, out, bound);
}

/**
 * `outer` with the variables the VALUES blocks among `patterns` (one
 * group's) bind: in every row, to an IRI. The group's other patterns, and
 * those nested in them, are joined with the block, so only rows naming one
 * of those IRIs count; a variable left UNDEF in a row, or bound to
 * anything else, is not taken.
 */
function boundBy(patterns: readonly unknown[], outer: Bound): Bound {
  let bound: Map<string, readonly string[]> | undefined;
  for (const p of patterns) {
    const block = p as { type?: string; values?: Record<string, Term | undefined>[] };
    if (block?.type !== 'values' || !Array.isArray(block.values) || block.values.length === 0) continue;
    for (const name of Object.keys(block.values[0]!)) {
      const iris = block.values.map((row) => row[name]);
      if (!iris.every((t) => t?.termType === 'NamedNode')) continue;
      bound ??= new Map(outer);
      // Two blocks binding one variable: only IRIs in both.
      const earlier = bound.get(name);
      const values = iris.map((t) => t!.value);
      bound.set(name, earlier ? values.filter((v) => earlier.includes(v)) : values);
    }
  }
  return bound ?? outer;
}

/** Walks patterns and expressions: `GRAPH <g>` reads g, `GRAPH ?g` the graphs a VALUES binds ?g to (else any graph), triples outside GRAPH the default graphs. */
function walk(node: unknown, defaults: readonly string[] | null, out: Set<string>, bound: Bound): void {
  if (Array.isArray(node)) {
    const inGroup = boundBy(node, bound);
    for (const item of node) walk(item, defaults, out, inGroup);
    return;
  }
  if (!node || typeof node !== 'object' || 'termType' in node) return;
  const n = node as Record<string, unknown>;
  if (n.type === 'graph' && n.name) {
    const name = n.name as Term;
    if (name.termType === 'NamedNode') out.add(name.value);
    else {
      const iris = name.termType === 'Variable' ? bound.get(`?${name.value}`) : undefined;
      if (!iris) throw new AnyGraph();
      for (const g of iris) out.add(g);
    }
    walk(n.patterns, null, out, bound);
    return;
  }
  if ((n.type === 'bgp' || n.type === 'path' || n.subject !== undefined) && defaults) {
    for (const g of defaults) out.add(g);
  }
  if (n.type === 'query') {
    readQuery(n, out, defaults);
    return;
  }
  for (const value of Object.values(n)) walk(value, defaults, out, bound);
}
