import sparqljs from 'sparqljs';
import { DEFAULT_GRAPH, type WriteOp } from './store.js';
import { withScratchStore } from './scratch.js';

/*
 * The test suite's check of write declarations (the store contract's "every
 * write declares the graphs it touches"). It is not how the store learns
 * what a write touched (the declaration is), and it never runs outside tests
 * (`checkGraphsFromEnv`): it only catches a caller whose declaration lies.
 *
 * Sound by SPARQL 1.1 Update's semantics: an update operation can change
 * only the graphs its templates name (`GRAPH <g> { ... }` in INSERT/DELETE,
 * the `WITH` graph or the default graph for triples outside `GRAPH`) and the
 * graphs its graph management names (the target of DROP/CLEAR/CREATE/LOAD,
 * the destination of ADD/COPY, both graphs of MOVE). The update is parsed
 * with a SPARQL parser (sparqljs: prefixes and base resolved, literals and
 * comments never mistaken for syntax) and each of those graphs must be
 * declared. What cannot be resolved to constant graphs (a graph variable in
 * a template, DROP ALL/NAMED, CLEAR ALL/NAMED, a text the parser refuses but
 * the engine accepts; a text both refuse changes nothing) is
 * reported as undeclarable: in the test suite every write must name its
 * graphs. A load changes exactly its `graph`, so loads must use a triples
 * format (N-Quads data could name other graphs).
 *
 * The same check refuses SPARQL that would mean something else on the
 * remote engine: a WHERE (or a write's condition) with a group of nothing
 * but FILTERs, which Virtuoso ignores.
 */

/** The graphs an update may change, or why it cannot say. */
export function graphsChangedBy(update: string): { graphs: Set<string> } | { unresolved: string } {
  let parsed: sparqljs.SparqlQuery;
  try {
    // The parser refuses lone surrogates (which literals may hold); replacing them changes no graph name
    // a template could match wrongly: a replaced IRI only stops matching its declaration.
    parsed = new sparqljs.Parser().parse(update.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD'));
  } catch (err) {
    // A text the engine refuses too changes nothing (the write is refused); one it accepts cannot be checked.
    try {
      withScratchStore((scratch) => scratch.update(update));
    } catch {
      return { graphs: new Set() };
    }
    return { unresolved: `the SPARQL parser refuses it: ${(err as Error).message.split('\n')[0]}` };
  }
  if (parsed.type !== 'update') return { unresolved: 'it is not an update' };
  const graphs = new Set<string>();
  for (const op of parsed.updates) {
    if ('updateType' in op) {
      const u = op as { insert?: sparqljs.Quads[]; delete?: sparqljs.Quads[]; graph?: { termType: string; value: string }; where?: sparqljs.Pattern[] };
      if (u.where && hasFilterOnlyGroup(u.where)) return { unresolved: FILTER_ONLY };
      for (const quads of [...(u.insert ?? []), ...(u.delete ?? [])]) {
        const term = quads.type === 'graph' ? (quads.name as { termType: string; value: string }) : u.graph;
        if (!term) { graphs.add(DEFAULT_GRAPH); continue; }
        if (term.termType !== 'NamedNode') return { unresolved: `a template names its graph by ${term.termType === 'Variable' ? `the variable ?${term.value}` : term.termType}` };
        graphs.add(term.value);
      }
      continue;
    }
    const m = op as sparqljs.ManagementOperation & {
      graph?: { name?: { termType: string; value: string }; default?: boolean; named?: boolean; all?: boolean };
      source?: { name?: { termType: string; value: string }; default?: boolean } | { termType: string; value: string };
      destination?: { name?: { termType: string; value: string }; default?: boolean } | { termType: string; value: string };
    };
    const target = (ref: typeof m.graph | typeof m.destination): string | { unresolved: string } => {
      if (!ref) return DEFAULT_GRAPH;
      if ('termType' in ref) return ref.value; // LOAD ... INTO GRAPH <g>
      if ('all' in ref && ref.all) return { unresolved: `${m.type.toUpperCase()} ALL changes every graph` };
      if ('named' in ref && ref.named) return { unresolved: `${m.type.toUpperCase()} NAMED changes every named graph` };
      if (ref.default || !ref.name) return DEFAULT_GRAPH;
      return ref.name.value;
    };
    const refs = m.type === 'drop' || m.type === 'clear' || m.type === 'create' ? [m.graph]
      : m.type === 'move' ? [m.source, m.destination] as const
      : [m.destination];
    for (const ref of refs) {
      const g = target(ref as typeof m.graph);
      if (typeof g !== 'string') return g;
      graphs.add(g);
    }
  }
  return { graphs };
}

const FILTER_ONLY = 'its WHERE has a group of nothing but FILTERs, which Virtuoso ignores (the update would apply as if '
  + 'the FILTER held); anchor the group with `VALUES ?condition { true }`';

/**
 * Whether a group pattern (or one nested in it) holds FILTERs and nothing
 * else. Virtuoso 7 drops the FILTERs of such a group (`ASK { FILTER NOT
 * EXISTS { ... } }` answers true, and an update whose WHERE is such a group
 * always applies), so the service's own SPARQL anchors them with VALUES.
 */
export function hasFilterOnlyGroup(patterns: readonly sparqljs.Pattern[]): boolean {
  if (patterns.length > 0 && patterns.every((p) => p.type === 'filter')) return true;
  return patterns.some((p) => {
    switch (p.type) {
      case 'group': case 'optional': case 'minus': case 'graph': case 'service':
        return hasFilterOnlyGroup(p.patterns);
      case 'union':
        return p.patterns.some((branch) => hasFilterOnlyGroup(branch.type === 'group' ? branch.patterns : [branch]));
      default:
        return false;
    }
  });
}

/** The condition of a conditional write, checked like the writes' WHERE (test suite only). */
function conditionProblem(ask: string): string | null {
  let parsed: sparqljs.SparqlQuery;
  try {
    parsed = new sparqljs.Parser().parse(ask);
  } catch {
    return null; // the store refuses it when it asks it
  }
  if (parsed.type === 'query' && parsed.where && hasFilterOnlyGroup(parsed.where)) {
    return `the condition of a conditional write: ${FILTER_ONLY}`;
  }
  return null;
}

/**
 * Checks one write's declarations: the message naming each op whose update
 * may change a graph it did not declare (or whose graphs cannot be named),
 * or null when every op declared what it may change.
 */
function declarationProblem(ops: readonly WriteOp[]): string | null {
  const problems: string[] = [];
  ops.forEach((op, i) => {
    if (op.kind === 'load') {
      if (op.format === 'application/n-quads') problems.push(`op ${i + 1} loads N-Quads, which may name graphs other than its declared graph`);
      return;
    }
    const found = graphsChangedBy(op.sparql);
    if ('unresolved' in found && found.unresolved === FILTER_ONLY) {
      problems.push(`op ${i + 1}: ${FILTER_ONLY}`);
      return;
    }
    if ('unresolved' in found) {
      problems.push(`op ${i + 1}: cannot tell which graphs it changes (${found.unresolved}); name them as constants`);
      return;
    }
    const declared = new Set(op.graphs);
    const missing = [...found.graphs].filter((g) => !declared.has(g));
    if (missing.length) problems.push(`op ${i + 1} changes ${missing.map((g) => (g === DEFAULT_GRAPH ? 'the default graph' : `<${g}>`)).join(', ')} without declaring it`);
  });
  return problems.length ? `a write's declared graphs are wrong: ${problems.join('; ')}` : null;
}

/**
 * The declaration check is on in the test suite (the mocha setup sets
 * `WSM_TEST_CHECK_GRAPHS=1`): not a user setting. Read when a store is opened.
 */
export function checkGraphsFromEnv(): boolean {
  return process.env.WSM_TEST_CHECK_GRAPHS === '1';
}

/** Both stores' check before a write: throws `UndeclaredGraphError` when its declarations do not cover it. */
export function assertDeclared(ops: readonly WriteOp[], condition?: string): void {
  const problem = declarationProblem(ops) ?? (condition === undefined ? null : conditionProblem(condition));
  if (problem) throw new UndeclaredGraphError(problem);
}

/** A write declared graphs that do not cover what it may change (a programming error; test suite only). */
export class UndeclaredGraphError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UndeclaredGraphError';
  }
}
