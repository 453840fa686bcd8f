import type { Graphs } from '../rdf/graphs.js';
import type { WriteOp } from './store.js';

/*
 * Which graphs a write may have touched, read from the update's syntax. Used
 * by everything that keeps state derived from the store and must drop it
 * only when a write can change it (query sandbox views, read caches).
 */

/** What one write may have touched. */
export interface WriteReach {
  /** It cannot tell (a graph variable, DROP ALL, ...): anything. */
  all: boolean;
  /** The system graph. */
  system: boolean;
  /** Workspace id -> the graphs of it named, as paths under `<base>workspaces/<id>/` (`iam`, `matrices/M`, ...). */
  workspaces: Map<string, Set<string>>;
}

/**
 * Tokens of a SPARQL update that can hide keywords: IRIs (kept), string
 * literals and comments (blanked). The literal forms follow the grammar
 * (STRING_LITERAL1/2 and _LONG1/2), so text inside a literal — an event
 * message saying "graph https://..." — is never read as syntax.
 */
const UPDATE_TOKENS = /(<[^<>"{}|^`\\\s]*>)|"{3}(?:(?:"|"")?(?:[^"\\]|\\[\s\S]))*"{3}|'{3}(?:(?:'|'')?(?:[^'\\]|\\[\s\S]))*'{3}|"(?:[^"\\\n\r]|\\.)*"|'(?:[^'\\\n\r]|\\.)*'|#[^\n\r]*/g;

/** The update's syntax alone: IRIs kept, literals and comments replaced by an empty literal. */
function syntaxOf(sparql: string): string {
  return sparql.replace(UPDATE_TOKENS, (token, iriToken: string | undefined) => iriToken ?? ' "" ');
}

/** Which graphs a write may have touched, read from the graph IRIs it names. */
export function affectedBy(op: WriteOp, graphs: Graphs): WriteReach {
  const text = op.kind === 'update' ? syntaxOf(op.sparql) : `<${op.graph}>`;
  const workspaces = new Map<string, Set<string>>();
  const marker = `<${graphs.base}workspaces/`;
  for (let at = text.indexOf(marker); at !== -1; at = text.indexOf(marker, at + marker.length)) {
    const end = text.indexOf('>', at);
    if (end === -1) break;
    const [id, ...rest] = text.slice(at + marker.length, end).split('/');
    if (!id) continue;
    if (!workspaces.has(id)) workspaces.set(id, new Set());
    workspaces.get(id)!.add(rest.join('/'));
  }
  const system = text.includes(`<${graphs.system}>`);
  const all = op.kind === 'update' && (
    /GRAPH\s*[?$]/i.test(text) // a graph variable: any graph
    || /GRAPH\s+[A-Za-z_][\w.-]*:/i.test(text) // a graph named by a prefixed name
    || /\b(?:WITH|USING(?:\s+NAMED)?)\s+[A-Za-z_][\w.-]*:/i.test(text)
    || /\b(?:DROP|CLEAR)\s+(?:SILENT\s+)?(?:ALL|NAMED|DEFAULT)\b/i.test(text)
    || /\b(?:ADD|MOVE|COPY)\s+(?:SILENT\s+)?(?:GRAPH|DEFAULT|<|[A-Za-z_][\w.-]*:)/i.test(text)
    || (workspaces.size === 0 && !system && !text.includes(`<${graphs.base}`) && /\bGRAPH\b/i.test(text)));
  return { all, system, workspaces };
}
