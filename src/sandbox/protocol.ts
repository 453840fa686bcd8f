/**
 * Messages between the sandbox (main thread) and its query workers. A
 * worker holds its own Oxigraph store with a copy of one workspace's
 * visible graphs; it receives changed graphs (`sync`) and queries (`run`), and
 * answers each query with the serialized result.
 */

import type { EngineRequest } from '../store/remote/engine-request.js';

/** The niceness of a query worker's thread, where the system allows (the service's other threads keep the process's). */
export { WORKER_NICE } from '../workers/priority.js';

/** What kind of answer a query form gives. */
export type ResultKind = 'graph' | 'bindings' | 'boolean';

/** Media types a worker serializes to. `jsonld-body` is JSON-LD text for embedding in an envelope. */
export const GRAPH_FORMATS = ['text/turtle', 'application/n-triples', 'application/ld+json', 'application/rdf+xml'] as const;
export const BINDINGS_FORMATS = [
  'application/sparql-results+json', 'application/sparql-results+xml', 'text/csv', 'text/tab-separated-values',
] as const;
export const BOOLEAN_FORMATS = ['application/sparql-results+json', 'application/sparql-results+xml'] as const;

export type ResultFormat = (typeof GRAPH_FORMATS)[number] | (typeof BINDINGS_FORMATS)[number];

/**
 * Brings a worker's copy up to date: drops graphs, then (re)loads graphs
 * whole: `fromSnapshot` ones by reading their blocks from a snapshot file
 * (in the worker's thread), `load` ones from the text given.
 */
export interface SyncMessage {
  type: 'sync';
  id: number;
  drop: string[];
  load: Array<{ name: string; ntriples: string }>;
  /**
   * Graphs the worker asks the remote engine for itself (their N-Triples,
   * streamed into its copy): the main thread never holds their text.
   */
  fetch?: Array<{ name: string; request: EngineRequest }>;
  fromSnapshot?: { file: string; graphs: string[] };
  /**
   * Graphs the worker rebuilds itself: their blocks of `fromSnapshot.file`
   * (when there is a snapshot), then the journal records of `dir` with seq
   * in `(afterSeq, throughSeq]` (`GraphSources.journal`). Those it cannot
   * replay (`replay.ts`) are left empty and named in the answer.
   */
  fromJournal?: { dir: string; afterSeq: number; throughSeq: number; graphs: string[]; skipped: number[] };
}

export interface RunMessage {
  type: 'run';
  id: number;
  query: string;
  kind: ResultKind;
  format: ResultFormat;
  /** Prefixes for Turtle and JSON-LD output. */
  prefixes: Record<string, string>;
  /** Answer at most this many triples (graph) or rows (bindings); more sets `truncated`. */
  maxResults: number;
  /** The default graph is the union of every graph held (unless the query or `defaultGraphs` says otherwise). */
  union: boolean;
  defaultGraphs?: string[];
  namedGraphs?: string[];
}

export type ToWorker = SyncMessage | RunMessage;

export interface RunResult {
  body: string;
  /** Triples (graph), rows (bindings) or 1 (boolean). */
  count: number;
  truncated: boolean;
}

export type FromWorker =
  | { type: 'ready' }
  /** `memory`: the worker's memory (JS heap and WebAssembly, bytes) after the message. */
  | { type: 'synced'; id: number; quads: number; memory: number; unreplayed?: string[] }
  | { type: 'result'; id: number; result: RunResult; memory: number }
  /**
   * `query`: the query failed (bad input); `snapshot`: the snapshot file could not be read (nothing was changed);
   * `unreachable`: the remote engine could not be reached for a graph of `fetch` (that graph is left empty);
   * `format`: the result cannot be written in the format asked for (RDF/XML cannot carry every graph); `internal`: anything else.
   */
  | { type: 'error'; id: number; kind: 'query' | 'snapshot' | 'unreachable' | 'format' | 'internal'; message: string };
