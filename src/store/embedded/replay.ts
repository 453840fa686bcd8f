import type oxigraph from 'oxigraph';
import { UpdateRun, applyOp, splitPrologue } from './oxigraph-store.js';
import type { StoredOp } from '../store.js';

/** Records joined into one engine call at most: bounds the text of one call. */
const MAX_RECORDS = 64;
const MAX_CHARS = 1 << 20;

/**
 * Replays journal records whose ops are all updates with fewer engine
 * calls: consecutive such records are joined into one multi-operation
 * update (about a third of a small record's replay is the engine's fixed
 * cost per call). A joined call does what the records' calls did one after
 * another (each operation sees the ones before it) and is atomic: when the
 * engine refuses it (a record's own error, or blank node labels two records
 * share, which one request may not), nothing of it was applied, and the
 * records are applied one at a time by `applyAlone`, which reports the
 * record at fault. A record with a condition or a load is not held: call
 * `flush` first, so that it sees every record before it applied.
 */
export class RecordReplayer<R> {
  private run = new UpdateRun();
  private held: R[] = [];

  constructor(
    private readonly raw: oxigraph.Store,
    private readonly applyAlone: (record: R) => void,
  ) {}

  /** Holds a record of updates only, to be applied with the ones after it; false (nothing held) when it does not fit the current run. */
  hold(record: R, updates: readonly StoredOp[]): boolean {
    const only = updates.filter((op): op is Extract<StoredOp, { kind: 'update' }> => op.kind === 'update');
    if (only.length === 0 || only.length !== updates.length) return false;
    const parts = only.map((op) => splitPrologue(op.sparql));
    if (!this.run.fits(parts)) {
      this.flush();
      if (!this.run.fits(parts)) return false;
    }
    parts.forEach((part, i) => this.run.add(part, only[i]!.graphs));
    this.held.push(record);
    if (this.held.length >= MAX_RECORDS || this.run.length >= MAX_CHARS) this.flush();
    return true;
  }

  /** Applies the held records. */
  flush(): void {
    if (this.run.empty) return;
    const held = this.held;
    const run = this.run;
    this.held = [];
    this.run = new UpdateRun();
    if (held.length === 1) {
      this.applyAlone(held[0]!);
      return;
    }
    try {
      applyOp(this.raw, run.op());
    } catch {
      for (const record of held) this.applyAlone(record);
    }
  }
}
