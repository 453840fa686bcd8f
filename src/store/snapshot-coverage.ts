import type { WriteOp } from './store.js';

/*
 * Which graphs still read the same in the newest snapshot file as in the
 * store. A query worker loads those straight from the file, in its own
 * thread, so the service's event loop never serializes them
 * (docs/slash-commands.md, "Where a worker's data comes from").
 */

/** The graphs a write may have changed, or `any` when its text does not say. */
export type WrittenGraphs = Set<string> | 'any';

/** IRIs, string literals and comments of an update; literals and comments are what hides no graph. */
const TOKENS = /(<[^<>"{}|^`\\\s]*>)|"{3}(?:(?:"|"")?(?:[^"\\]|\\[\s\S]))*"{3}|'{3}(?:(?:'|'')?(?:[^'\\]|\\[\s\S]))*'{3}|"(?:[^"\\\n\r]|\\.)*"|'(?:[^'\\\n\r]|\\.)*'|#[^\n\r]*/g;

/** A graph the update writes could be one it does not name by its IRI. */
const UNNAMED_GRAPH = [
  /GRAPH\s*[?$]/i, // a graph variable
  /GRAPH\s+[A-Za-z_][\w.-]*:/i, // a prefixed name
  /\b(?:WITH|USING(?:\s+NAMED)?)\s+[A-Za-z_][\w.-]*:/i,
  /\b(?:DROP|CLEAR)\s+(?:SILENT\s+)?(?:ALL|NAMED)\b/i,
  /\b(?:ADD|MOVE|COPY)\s+(?:SILENT\s+)?(?:GRAPH|DEFAULT|<|[A-Za-z_][\w.-]*:)/i,
];

/**
 * The graphs a write op may have changed: a load, its graph; an update,
 * every IRI its syntax names (a superset of the graphs it writes), or `any`
 * when a graph it writes may go unnamed. To be replaced by the graphs each
 * write declares once writes carry them.
 */
export function graphsWrittenBy(op: WriteOp): WrittenGraphs {
  if (op.kind === 'load') return new Set([op.graph]);
  const iris = new Set<string>();
  const syntax = op.sparql.replace(TOKENS, (token, iri: string | undefined) => {
    if (iri === undefined) return ' "" ';
    iris.add(iri.slice(1, -1));
    return iri;
  });
  return UNNAMED_GRAPH.some((pattern) => pattern.test(syntax)) ? 'any' : iris;
}

/** Graphs changed since some point (a snapshot's seq). */
export class ChangedGraphs {
  private any = false;
  private readonly names = new Set<string>();

  add(written: WrittenGraphs): void {
    if (written === 'any') this.any = true;
    else if (!this.any) for (const name of written) this.names.add(name);
  }

  addOps(ops: WriteOp[]): void {
    for (const op of ops) this.add(graphsWrittenBy(op));
  }

  has(graph: string): boolean {
    return this.any || this.names.has(graph);
  }
}

/** A store that can say which graphs its newest snapshot file still holds as they are. */
export interface SnapshotCoverage {
  /**
   * The newest snapshot file (TriG, `snapshot.ts`) and those of `graphs`
   * no write changed since it was taken; undefined when there is no such
   * file. The file may be removed later (two snapshots on): a reader falls
   * back to the store. While a snapshot is being taken that will hold
   * some of `graphs` as they are and the newest does not, waits for it.
   */
  unchangedInSnapshot(graphs: string[]): Promise<{ file: string; graphs: string[] } | undefined>;
}

export function hasSnapshotCoverage(store: object): store is SnapshotCoverage {
  return typeof (store as Partial<SnapshotCoverage>).unchangedInSnapshot === 'function';
}
