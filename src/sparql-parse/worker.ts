import { parentPort } from 'node:worker_threads';
import { AppError } from '../errors.js';
import { limitedText, parseReadQuery, parseScript } from '../sandbox/script.js';
import n3 from 'n3';
import { bindValues, queryVariables, type BoundTerm } from '../sandbox/bind.js';
import type { ParseReply, ParseRequest, WireTerm } from './protocol.js';

const termOf = (t: WireTerm): BoundTerm => (t.kind === 'iri'
  ? n3.DataFactory.namedNode(t.value)
  : n3.DataFactory.literal(t.value, t.language ?? (t.datatype ? n3.DataFactory.namedNode(t.datatype) : undefined)));

/*
 * The query-parse worker (a worker thread): sparqljs runs here, so a query
 * that is slow or deep to parse never holds the service's event loop; the
 * service terminates this worker when a parse overruns its time limit.
 */
const port = parentPort;
if (!port) throw new Error('the parse worker must run in a worker thread');

const post = (message: ParseReply) => port.postMessage(message);

port.on('message', (request: ParseRequest) => {
  try {
    const parsed = request.scriptType ? parseScript(request.text, request.scriptType) : parseReadQuery(request.text, request.field);
    const variables = [...queryVariables(parsed)];
    const bindings = Object.entries(request.bindings ?? {});
    const query = bindings.length ? bindValues(parsed, Object.fromEntries(bindings.map(([name, t]) => [name, termOf(t)]))) : parsed;
    const limited = query.form === 'ASK' ? query.text : limitedText(query, request.maxSolutions);
    post({ id: request.id, ok: { form: query.form, prefixes: query.prefixes, hasDataset: query.hasDataset, ...(query.dataset ? { dataset: query.dataset } : {}), text: query.text, variables, limited } });
  } catch (err) {
    if (err instanceof AppError) {
      post({ id: request.id, error: { message: err.message, ...(err.details ? { details: err.details } : {}) } });
    } else if (err instanceof RangeError) {
      // The parser's own recursion ran out of stack: the query is nested too deeply.
      post({ id: request.id, error: { message: `${request.field} is nested too deeply to be parsed; simplify it` } });
    } else {
      post({ id: request.id, error: { message: `${request.field} could not be parsed as SPARQL` } });
    }
  }
});

post({ ready: true });
