import type { QueryDataset, QueryForm, ScriptType } from '../sandbox/script.js';

/** Messages between the service and its query-parse worker (src/sparql-parse/worker.ts). */
export interface ParseRequest {
  id: number;
  text: string;
  /** The name of the field the text came from, for messages ("query", "scriptContent"). */
  field: string;
  /** Set for a slash command's script: the form it must have. */
  scriptType?: ScriptType;
  /** The solution cap written into the query (`limited`). */
  maxSolutions: number;
  /** Values of a slash command's declared parameters, added as a VALUES block built from terms (src/sandbox/bind.ts). */
  bindings?: Record<string, WireTerm>;
}

/** An RDF term as plain data, to cross the thread boundary. */
export type WireTerm =
  | { kind: 'iri'; value: string }
  | { kind: 'literal'; value: string; datatype?: string; language?: string };

/** What the service keeps of a parsed read query: plain data, so it crosses the thread boundary. */
export interface ParsedQuery {
  form: QueryForm;
  prefixes: Record<string, string>;
  hasDataset: boolean;
  /** The query's own dataset (FROM / FROM NAMED), each graph once. */
  dataset?: QueryDataset;
  /** The query's text (with the bindings' VALUES block when bindings were given). */
  text: string;
  /** Every variable the query mentions (a slash command's parameters must name some). */
  variables: string[];
  /** The text with at most `maxSolutions` solutions (ASK: the text itself). */
  limited: string;
}

export type ParseReply =
  | { id: number; ok: ParsedQuery }
  | { id: number; error: { message: string; details?: Record<string, unknown> } }
  | { ready: true };
