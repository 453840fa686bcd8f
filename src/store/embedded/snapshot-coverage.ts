import type { StoredOp } from '../store.js';

/*
 * Which graphs still read the same in the newest snapshot file as in the
 * store. A query worker loads those straight from the file, in its own
 * thread, so the service's event loop never serializes them
 * (docs/slash-commands.md, "Where a worker's data comes from").
 */

/** The graphs a write may have changed, or `any` when it does not say. */
export type WrittenGraphs = Set<string> | 'any';

/**
 * The graphs a write op may have changed: a load, its graph; an update, the
 * graphs it declares (store contract). A journal record written before
 * writes declared their graphs says nothing: `any`.
 */
export function graphsWrittenBy(op: StoredOp): WrittenGraphs {
  if (op.kind === 'load') return new Set([op.graph]);
  return op.graphs ? new Set(op.graphs) : 'any';
}

/** Graphs changed since some point (a snapshot's seq). */
export class ChangedGraphs {
  private any = false;
  private readonly names = new Set<string>();

  add(written: WrittenGraphs): void {
    if (written === 'any') this.any = true;
    else if (!this.any) for (const name of written) this.names.add(name);
  }

  addOps(ops: readonly StoredOp[]): void {
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
   * back to the store. A snapshot under way is not waited for.
   */
  unchangedInSnapshot(graphs: string[]): Promise<{ file: string; graphs: string[] } | undefined>;
  /**
   * Like `unchangedInSnapshot`, and for the other graphs,
   * the journal records to replay on the snapshot's content to get them as
   * they are now. Undefined once the store is closed.
   */
  graphSources(graphs: string[]): Promise<GraphSources | undefined>;
}

/** Where a reader outside the store's thread finds the current content of graphs. */
export interface GraphSources {
  /** The newest snapshot file (TriG) and those graphs no write changed since it was taken. */
  snapshot?: { file: string; graphs: string[] };
  /**
   * The other graphs: the snapshot's content (none when there is no
   * snapshot) followed by the journal records of `dir` with seq in
   * `(afterSeq, throughSeq]`, except those in `skipped` (conditional
   * writes whose condition did not hold: nothing of them was applied).
   * Every write applied when this was answered has its record at or before
   * `throughSeq`, and every record up to it was applied or skipped.
   */
  journal: { dir: string; afterSeq: number; throughSeq: number; graphs: string[]; skipped: number[] };
}

export function hasSnapshotCoverage(store: object): store is SnapshotCoverage {
  return typeof (store as Partial<SnapshotCoverage>).graphSources === 'function';
}
