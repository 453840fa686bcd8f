import { randomBytes } from 'node:crypto';
import { Parser, type Quad, type Term } from 'n3';
import { BlankNodeGroups } from '../../rdf/blank-node-groups.js';
import { quotedString } from '../../rdf/sparql.js';
import { StoreUnreachableError } from '../store.js';
import { DEADLOCK_RETRIES, EngineRequestError, isDeadlock, sendEngineRequest, type EngineRequest } from './engine-request.js';

export { isDeadlock };

/**
 * The HTTP side of the remote store: SPARQL 1.1 Protocol requests to a
 * query and an update endpoint, and the compilation of the service's write
 * ops into update requests a given engine accepts in one all-or-nothing call.
 */

export type SparqlDialect = 'standard' | 'virtuoso';

export interface SparqlEndpointOptions {
  queryUrl: string;
  updateUrl: string;
  user?: string;
  password?: string;
  dialect: SparqlDialect;
  /** Milliseconds before a request is abandoned. */
  timeoutMs?: number;
}

/** An error the engine answered (4xx/5xx), with the engine's own text. */
export class EngineError extends Error {
  constructor(message: string, readonly status: number, readonly engineText: string) {
    super(message);
    this.name = 'EngineError';
  }
}

/** The engine could not be reached (refused, reset, timed out). */
export class EngineUnavailableError extends StoreUnreachableError {
  constructor(message: string) {
    super(message);
    this.name = 'EngineUnavailableError';
  }
}

export class SparqlClient {
  private readonly authorization: string | undefined;

  /** Since when no request reached the engine (the last one failed to connect or lost its answer); null once one does. */
  unreachableSince: Date | null = null;

  constructor(readonly options: SparqlEndpointOptions) {
    this.authorization = options.user !== undefined
      ? `Basic ${Buffer.from(`${options.user}:${options.password ?? ''}`).toString('base64')}`
      : undefined;
  }

  /** A request to the engine as plain data (a query worker may send it: `engine-request.ts`). */
  request(url: string, form: Record<string, string>, accept: string): EngineRequest {
    const headers: Record<string, string> = { 'Content-Type': 'application/x-www-form-urlencoded', Accept: accept };
    if (this.authorization) headers.Authorization = this.authorization;
    return { url, headers, body: new URLSearchParams(form).toString(), timeoutMs: this.options.timeoutMs ?? 120_000 };
  }

  /** A query as a request to the query endpoint (see `request`). */
  queryRequest(query: string, accept: string): EngineRequest {
    return this.request(this.options.queryUrl, { query }, accept);
  }

  private async post(url: string, form: Record<string, string>, accept: string): Promise<string> {
    const pieces: string[] = [];
    try {
      await sendEngineRequest(this.request(url, form, accept), (piece) => pieces.push(piece));
    } catch (err) {
      if (!(err instanceof EngineRequestError)) throw err;
      if (err.kind === 'answered') {
        this.unreachableSince = null;
        throw new EngineError(err.message, err.status, err.engineText);
      }
      this.unreachableSince ??= new Date();
      throw new EngineUnavailableError(err.message);
    }
    this.unreachableSince = null;
    return pieces.join('');
  }

  /**
   * A query answered in the given media type. Serializable isolation answers
   * a conflict between concurrent transactions (reads included) with a
   * deadlock that rolled the loser back whole: it is sent again. (A write
   * through `applyAtomically` is a query too, and all or nothing.)
   */
  async query(query: string, accept: string, retries = DEADLOCK_RETRIES): Promise<string> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.post(this.options.queryUrl, { query }, accept);
      } catch (err) {
        if (!(err instanceof EngineError) || !isDeadlock(err.engineText) || attempt >= retries) throw err;
        await new Promise((resolve) => setTimeout(resolve, 20 * 2 ** Math.min(attempt, 7) * (0.5 + Math.random())));
      }
    }
  }

  /** One update request (several operations may be joined with `;`). */
  update(update: string): Promise<string> {
    return this.post(this.options.updateUrl, { update }, 'application/sparql-results+json, text/plain;q=0.5, */*;q=0.1');
  }

  /**
   * Virtuoso: runs update operations in one transaction through the
   * `WSM_APPLY` procedure (installed by `npm run virtuoso`); the first
   * refusal rolls every operation back. With a condition, the ASK runs
   * first in the same transaction (`WSM_APPLY_IF`) and nothing is applied
   * unless it answers as expected. Resolves whether the ops were applied.
   * A call rolled back as deadlocked is sent again, at most `retries` times.
   */
  async applyAtomically(operations: string[], condition: { ask: string; expect: boolean } | Array<{ ask: string; expect: boolean }> | null = null, retries = DEADLOCK_RETRIES): Promise<boolean> {
    const conditions = condition === null ? [] : Array.isArray(condition) ? condition : [condition];
    if (operations.length === 0 && conditions.length === 0) return true;
    if (conditions.length > 30) throw new Error('at most 30 conditions in one write');
    // Text beyond ASCII goes as it is: the procedure recodes the wide string Virtuoso makes of it to UTF-8
    // before exec() (which would narrow it to '?'). Codepoint escapes would not do: Virtuoso refuses them in IRIs.
    const asks = conditions.map((c) => c.ask);
    const body = [...operations, ...asks].join('\n');
    let sep = `#wsm-op-${randomBytes(8).toString('hex')}#`;
    while (body.includes(sep)) sep = `#wsm-op-${randomBytes(8).toString('hex')}#`;
    const ops = stringLiteral(operations.join(sep));
    // With conditions (`WSM_APPLY_IF`): the ASKs and the ops in one transaction; -1 when one did not hold.
    // The answer condition i must give is bit i of the second argument.
    const expect = conditions.reduce((mask, c, i) => mask + (c.expect ? 2 ** i : 0), 0);
    const call = conditions.length > 0
      ? `SELECT (<sql:WSM_APPLY_IF>(${stringLiteral(asks.join(sep))}, ${expect}, ${stringLiteral(sep)}, ${ops}) AS ?n) {}`
      : `SELECT (<sql:WSM_APPLY>(${stringLiteral(sep)}, ${ops}) AS ?n) {}`;
    const answer = JSON.parse(await this.query(call, 'application/sparql-results+json', retries)) as { results?: { bindings: Array<{ n?: { value: string } }> } };
    return Number(answer.results?.bindings[0]?.n?.value ?? 0) >= 0;
  }
}

/**
 * Virtuoso's pragma that reads every quad table of a SPARQL query at read
 * committed, whatever the engine's default isolation: such a read takes no
 * lock and waits for none, but may see a large commit half done.
 */
export const READ_COMMITTED = 'define sql:table-option "isolation read committed"';

/**
 * A SPARQL string literal holding any text, escaped as the `sparql` tag
 * escapes literals: no control character reaches the engine raw (Virtuoso
 * stops reading a request at a raw U+0000).
 */
export const stringLiteral = quotedString;

function termText(term: Term, bnodes: Map<string, string>): string {
  switch (term.termType) {
    case 'NamedNode': return `<${term.value}>`;
    case 'BlankNode': {
      let label = bnodes.get(term.value);
      if (!label) { label = `_:b${bnodes.size}`; bnodes.set(term.value, label); }
      return label;
    }
    case 'Literal': {
      const body = stringLiteral(term.value);
      if (term.language) return `${body}@${term.language}`;
      if (term.datatype.value !== 'http://www.w3.org/2001/XMLSchema#string') return `${body}^^<${term.datatype.value}>`;
      return body;
    }
    default: throw new Error(`cannot write a ${term.termType} term in an update`);
  }
}

/** Most triples one INSERT operation carries (Virtuoso refuses INSERT DATA above about 1,000). */
export const TRIPLES_PER_OPERATION = 500;

/**
 * Turns RDF data into INSERT operations into one graph, at most
 * `TRIPLES_PER_OPERATION` triples each. Triples without blank nodes go in
 * INSERT DATA; triples sharing blank nodes stay in one `INSERT {} WHERE {}`
 * (blank nodes of a template are fresh per operation, so a blank node's
 * triples must not be split across operations).
 */
export function insertOperations(graph: string, data: string, format: string): string[] {
  const quads: Quad[] = new Parser({ format: format === 'application/n-quads' ? 'N-Quads' : format === 'text/turtle' ? 'Turtle' : 'N-Triples' }).parse(data);
  const ground: Quad[] = [];
  // Quads with blank nodes, grouped by linked blank nodes.
  const groups = new BlankNodeGroups();
  const withBnodes: Quad[] = [];
  for (const q of quads) {
    const labels = [q.subject, q.object].filter((t) => t.termType === 'BlankNode').map((t) => t.value);
    if (labels.length === 0) { ground.push(q); continue; }
    withBnodes.push(q);
    groups.link(labels);
  }
  const g = `<${graph}>`;
  const ops: string[] = [];
  for (let i = 0; i < ground.length; i += TRIPLES_PER_OPERATION) {
    const bnodes = new Map<string, string>();
    const lines = ground.slice(i, i + TRIPLES_PER_OPERATION)
      .map((q) => `${termText(q.subject, bnodes)} ${termText(q.predicate, bnodes)} ${termText(q.object, bnodes)} .`);
    ops.push(`INSERT DATA { GRAPH ${g} {\n${lines.join('\n')}\n} }`);
  }
  const components = new Map<string, Quad[]>();
  for (const q of withBnodes) {
    const label = (q.subject.termType === 'BlankNode' ? q.subject : q.object).value;
    const root = groups.group(label);
    let list = components.get(root);
    if (!list) { list = []; components.set(root, list); }
    list.push(q);
  }
  let batch: Quad[] = [];
  const flush = () => {
    if (batch.length === 0) return;
    const bnodes = new Map<string, string>();
    const lines = batch.map((q) => `${termText(q.subject, bnodes)} ${termText(q.predicate, bnodes)} ${termText(q.object, bnodes)} .`);
    ops.push(`INSERT { GRAPH ${g} {\n${lines.join('\n')}\n} } WHERE {}`);
    batch = [];
  };
  const large: Quad[][] = [];
  for (const component of components.values()) {
    if (component.length > TRIPLES_PER_OPERATION) { large.push(component); continue; }
    if (batch.length > 0 && batch.length + component.length > TRIPLES_PER_OPERATION) flush();
    batch.push(...component);
  }
  flush();
  if (large.length > 0) ops.push(...largeComponentOperations(g, large));
  return ops;
}

/** The predicate that names a blank node of a large component while its write runs (`largeComponentOperations`). */
const BNODE_KEY = 'urn:x-wsm:bnode-key';

/**
 * Blank nodes connected by more triples than one operation carries (a
 * validation report of hundreds of results hangs off one node: in one
 * operation Virtuoso refused it, "generated SQL text has exceeded 10000
 * lines"). The component goes in operations of at most
 * `TRIPLES_PER_OPERATION` triples: the operation that first writes a blank
 * node also gives it a key (a triple `BNODE_KEY` "key" unique to this
 * write) when a later operation names it, and a later operation finds it by
 * that key in its WHERE; the last operation deletes the keys. The
 * operations run in one transaction (or the keys are deleted from a staging
 * graph before it is added to its target), so no reader sees a key.
 */
function largeComponentOperations(g: string, components: Quad[][]): string[] {
  const writeId = randomBytes(8).toString('hex');
  const ops: string[] = [];
  for (const component of components) {
    const chunks: Quad[][] = [];
    for (let i = 0; i < component.length; i += TRIPLES_PER_OPERATION) chunks.push(component.slice(i, i + TRIPLES_PER_OPERATION));
    const blanks = (q: Quad) => [q.subject, q.object].filter((t) => t.termType === 'BlankNode').map((t) => t.value);
    /** The chunk each blank node is first written in, and the last chunk naming it. */
    const first = new Map<string, number>();
    const last = new Map<string, number>();
    chunks.forEach((chunk, c) => { for (const q of chunk) for (const b of blanks(q)) { if (!first.has(b)) first.set(b, c); last.set(b, c); } });
    const keys = new Map<string, string>();
    chunks.forEach((chunk, c) => {
      const names = new Map<string, string>();
      const where: string[] = [];
      const name = (label: string): string => {
        let n = names.get(label);
        if (n) return n;
        const k = `${writeId}-${keys.size}`;
        if (first.get(label) === c) {
          n = `_:k${names.size}`;
        } else {
          n = `?k${names.size}`;
          where.push(`${n} <${BNODE_KEY}> "${keys.get(label)}" .`);
        }
        names.set(label, n);
        if (!keys.has(label) && last.get(label)! > c) keys.set(label, k);
        return n;
      };
      const term = (t: Term) => (t.termType === 'BlankNode' ? name(t.value) : termText(t, new Map()));
      const lines = chunk.map((q) => `${term(q.subject)} ${termText(q.predicate, new Map())} ${term(q.object)} .`);
      for (const [label, n] of names) {
        if (first.get(label) === c && keys.has(label)) lines.push(`${n} <${BNODE_KEY}> "${keys.get(label)}" .`);
      }
      ops.push(`INSERT { GRAPH ${g} {\n${lines.join('\n')}\n} } WHERE { ${where.length > 0 ? `GRAPH ${g} { ${where.join(' ')} }` : ''} }`);
    });
  }
  ops.push(`DELETE { GRAPH ${g} { ?node <${BNODE_KEY}> ?key } } WHERE { GRAPH ${g} { ?node <${BNODE_KEY}> ?key FILTER(STRSTARTS(?key, "${writeId}-")) } }`);
  return ops;
}
