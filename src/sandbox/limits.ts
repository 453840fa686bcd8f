import sparqljs from 'sparqljs';

/**
 * Exact result limits (docs/slash-commands.md, "Limits"), planned in the query worker.
 *
 * The result limit counts distinct triples (CONSTRUCT, DESCRIBE) or rows
 * (SELECT). A LIMIT on solutions bounds the work, but for a graph query it
 * is not the same as a limit on triples: one solution gives several
 * triples, and many solutions give the same triple. So a graph query runs
 * with LIMIT `L` solutions (first `L` = limit + 1); if that already gives
 * more distinct triples than the limit, the answer is cut to exactly the
 * limit (`truncated`). Otherwise a probe counts the query's solutions up to
 * `L`: fewer than `L` means the limited run saw every solution, so its
 * answer is complete; else the run is repeated with `L` four times larger.
 * The work grows geometrically, bounded by the time and memory limits.
 */

export interface LimitPlan {
  form: 'SELECT' | 'ASK' | 'CONSTRUCT' | 'DESCRIBE';
  /** The query's own LIMIT, if any. */
  ownLimit: number | undefined;
  /** False when the query has no WHERE clause to limit (`DESCRIBE <iri>`). */
  limitable: boolean;
  /** The query text with LIMIT `solutions`. */
  withLimit(solutions: number): string;
  /** A SELECT counting the query's solutions, at most `solutions` of them (answer variable `n`). */
  probe(solutions: number): string;
}

type Parsed = sparqljs.Query & { limit?: number; where?: sparqljs.Pattern[] };

const PROBE_VAR = 'wsmSolutions';
/** The shape of a probe; the query's own WHERE and solution modifiers are put into its subquery. */
const PROBE_TEMPLATE = `SELECT (COUNT(*) AS ?${PROBE_VAR}) WHERE { { SELECT (1 AS ?wsmSolution) WHERE { } } }`;

const generator = () => new sparqljs.Generator({ sparqlStar: true });

export function limitPlan(text: string): LimitPlan {
  const parsed = new sparqljs.Parser({ sparqlStar: true }).parse(text) as Parsed;
  if (parsed.type !== 'query') throw new Error('not a query');
  const where = parsed.where ?? [];
  return {
    form: parsed.queryType,
    ownLimit: parsed.limit,
    limitable: parsed.queryType !== 'ASK' && where.length > 0,
    withLimit: (solutions) => generator().stringify({ ...parsed, limit: solutions } as sparqljs.SparqlQuery),
    probe: (solutions) => {
      const probe = new sparqljs.Parser({ sparqlStar: true }).parse(PROBE_TEMPLATE) as sparqljs.SelectQuery;
      const group = probe.where![0] as sparqljs.GroupPattern;
      const inner = group.patterns[0] as sparqljs.SelectQuery;
      // The query's solution sequence: its WHERE, grouping, order, offset and VALUES, cut at `solutions`.
      const source = parsed as sparqljs.SelectQuery;
      inner.where = where;
      if (source.group) inner.group = source.group;
      if (source.having) inner.having = source.having;
      if (source.order) inner.order = source.order;
      if (source.offset !== undefined) inner.offset = source.offset;
      if (source.values) inner.values = source.values;
      inner.limit = solutions;
      probe.prefixes = parsed.prefixes;
      if (parsed.base) probe.base = parsed.base;
      if (parsed.from) probe.from = parsed.from;
      return generator().stringify(probe);
    },
  };
}

export { PROBE_VAR };
