import type { QueryForm, ScriptType } from '../sandbox/script.js';

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
}

/** What the service keeps of a parsed read query: plain data, so it crosses the thread boundary. */
export interface ParsedQuery {
  form: QueryForm;
  prefixes: Record<string, string>;
  hasDataset: boolean;
  text: string;
  /** The text with at most `maxSolutions` solutions (ASK: the text itself). */
  limited: string;
}

export type ParseReply =
  | { id: number; ok: ParsedQuery }
  | { id: number; error: { message: string; details?: Record<string, unknown> } }
  | { ready: true };
