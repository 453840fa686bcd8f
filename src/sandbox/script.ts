import sparqljs from 'sparqljs';
import { badRequest } from '../errors.js';

/**
 * Reading user SPARQL: parse with sparqljs (line and column on a syntax
 * error), refuse what a read-only sandbox must never run (updates, LOAD,
 * SERVICE), and cap the number of solutions so a result can be counted and
 * truncated without building an unbounded answer first.
 */

export type QueryForm = 'SELECT' | 'ASK' | 'CONSTRUCT' | 'DESCRIBE';

export interface ReadQuery {
  form: QueryForm;
  /** The prefixes the text declares (used to compact Turtle and JSON-LD answers). */
  prefixes: Record<string, string>;
  /** The query names its own dataset (FROM / FROM NAMED). */
  hasDataset: boolean;
  /**
   * That dataset, each graph once (a dataset is a set; the engine reads a
   * graph named twice twice): run the query with it as the engine's dataset.
   */
  dataset?: QueryDataset;
  /** The parsed query, for `limitedText`. */
  parsed: sparqljs.Query;
  text: string;
}

/** A query's dataset: the graphs merged into its default graph, and its named graphs. */
export interface QueryDataset {
  defaultGraphs: string[];
  namedGraphs: string[];
}

const MAX_EXPECTED_SHOWN = 6;

interface JisonHash {
  text?: string;
  token?: string;
  line?: number;
  loc?: { first_line: number; first_column: number; last_line: number; last_column: number };
  expected?: string[];
}

/**
 * Where the offending token starts. jison reports the location of the token
 * before it, so start at that token's end and skip blanks and comments.
 */
function errorPosition(text: string, loc: NonNullable<JisonHash['loc']>): { line: number; column: number } {
  const lines = text.split('\n');
  let offset = 0;
  for (let i = 0; i < loc.last_line - 1 && i < lines.length; i++) offset += lines[i]!.length + 1;
  offset += loc.last_column;
  while (offset < text.length) {
    if (/\s/.test(text[offset]!)) offset++;
    else if (text[offset] === '#') { while (offset < text.length && text[offset] !== '\n') offset++; }
    else break;
  }
  const before = text.slice(0, Math.min(offset, text.length)).split('\n');
  return { line: before.length, column: before.at(-1)!.length + 1 };
}

/** Turns a sparqljs error into a 400 that names the line and column. */
function syntaxError(err: unknown, field: string, text: string): Error {
  const e = err as { message?: string; hash?: JisonHash };
  const message = typeof e?.message === 'string' ? e.message : String(err);
  const hash = e?.hash;
  if (hash?.loc) {
    const { line, column } = errorPosition(text, hash.loc);
    let what: string;
    if (hash.token === 'EOF') what = 'unexpected end of the query';
    else if (hash.token === 'INVALID') what = `unrecognized text ${JSON.stringify(hash.text ?? '')}`;
    else if (hash.text) what = `unexpected ${JSON.stringify(hash.text)}`;
    else what = message.split('\n')[0]!;
    const expected = (hash.expected ?? []).map((x) => x.replace(/^'|'$/g, ''));
    const hint = expected.length
      ? `; expected ${expected.slice(0, MAX_EXPECTED_SHOWN).join(', ')}${expected.length > MAX_EXPECTED_SHOWN ? ', ...' : ''}`
      : '';
    return badRequest(`${field} is not valid SPARQL: line ${line}, column ${column}: ${what}${hint}`, { line, column });
  }
  // Lexer errors and semantic checks of sparqljs (e.g. an ungrouped variable) carry no location.
  const lineOnly = /on line (\d+)/.exec(message);
  if (lineOnly) return badRequest(`${field} is not valid SPARQL: line ${lineOnly[1]}: ${message.split('\n')[0]}`, { line: Number(lineOnly[1]) });
  return badRequest(`${field} is not valid SPARQL: ${message.split('\n')[0]}`);
}

/** Is there a SERVICE clause anywhere in the parsed query (subqueries, EXISTS, ... included)? */
function usesService(node: unknown, seen = new Set<unknown>()): boolean {
  if (node === null || typeof node !== 'object' || seen.has(node)) return false;
  seen.add(node);
  if ((node as { type?: unknown }).type === 'service') return true;
  for (const value of Object.values(node)) if (usesService(value, seen)) return true;
  return false;
}

const distinctNames = (terms: Array<{ value: string }>): string[] => [...new Set(terms.map((t) => t.value))];

/**
 * Parses a read query. Throws a 400 naming the problem for a syntax error
 * (with line and column), an update, LOAD, or SERVICE.
 */
export function parseReadQuery(text: string, field = 'query'): ReadQuery {
  if (text.trim() === '') throw badRequest(`${field} is empty; give a SPARQL query`);
  let parsed: sparqljs.SparqlQuery;
  try {
    // A fresh parser each time: sparqljs keeps prefixes between parses of one instance.
    parsed = new sparqljs.Parser({ sparqlStar: true }).parse(text);
  } catch (err) {
    throw syntaxError(err, field, text);
  }
  // Comments, PREFIX or BASE declarations and nothing else: the parser gives an object without a type.
  if (parsed.type !== 'query' && parsed.type !== 'update') throw badRequest(`${field} holds no query (only comments or declarations); give a SPARQL query`);
  if (parsed.type === 'update') {
    const kinds = parsed.updates.map((u) => ('type' in u ? String(u.type) : String(u.updateType)).toLowerCase());
    if (kinds.includes('load')) throw badRequest(`${field} uses LOAD, which is not allowed: queries here only read the workspace's graphs`);
    throw badRequest(`${field} is a SPARQL update (${[...new Set(kinds)].join(', ').toUpperCase()}); updates are not allowed, only queries that read`);
  }
  // The engine reads a CONSTRUCT's or an ASK's solution modifiers as those of `SELECT *`, which may not group: it refuses
  // them at run time, with a position in the text it was given (the query with its limit), not this one.
  if ((parsed.queryType === 'CONSTRUCT' || parsed.queryType === 'ASK') && (parsed as { group?: unknown }).group) {
    throw badRequest(`${field} is ${parsed.queryType === 'ASK' ? 'an' : 'a'} ${parsed.queryType} query with GROUP BY, which the engine does not run; group in a subquery instead: ${parsed.queryType === 'ASK' ? 'ASK' : 'CONSTRUCT { ... } WHERE'} { { SELECT ... WHERE { ... } GROUP BY ... } }`);
  }
  if (usesService(parsed)) {
    throw badRequest(`${field} uses SERVICE, which is not allowed: a query sees only the workspace's own graphs`);
  }
  const from = parsed.from;
  const hasDataset = !!from && (from.default.length > 0 || from.named.length > 0);
  return {
    form: parsed.queryType,
    prefixes: { ...parsed.prefixes },
    hasDataset,
    ...(hasDataset ? { dataset: { defaultGraphs: distinctNames(from.default), namedGraphs: distinctNames(from.named) } } : {}),
    parsed,
    text,
  };
}

export type ScriptType = 'CONSTRUCT' | 'DESCRIBE';

/**
 * A slash command's script: a read query of exactly the declared form
 * (docs/slash-commands.md).
 */
export function parseScript(text: string, scriptType: ScriptType): ReadQuery {
  const query = parseReadQuery(text, 'scriptContent');
  if (query.form === 'SELECT' || query.form === 'ASK') {
    throw badRequest(`scriptContent is ${query.form === 'ASK' ? 'an' : 'a'} ${query.form} query; a slash command must be a CONSTRUCT or DESCRIBE query`);
  }
  if (query.form !== scriptType) {
    throw badRequest(`scriptContent is a ${query.form} query but scriptType is ${scriptType}; make them agree`);
  }
  return query;
}

/**
 * The query text with at most `maxSolutions` solutions: the user's own
 * LIMIT when it is lower, otherwise a LIMIT added (the query regenerated by
 * sparqljs). Bounds the work and memory of one answer.
 */
export function limitedText(query: ReadQuery, maxSolutions: number): string {
  const current = (query.parsed as { limit?: number }).limit;
  if (current !== undefined && current <= maxSolutions) return query.text;
  const copy = { ...query.parsed, limit: maxSolutions } as sparqljs.SparqlQuery;
  return new sparqljs.Generator({ sparqlStar: true }).stringify(copy);
}
