/**
 * Per-graph revisions (the store contract's `revision(graph)`): every write
 * moves the revision of each graph it declared, once when it starts and once
 * when it has been applied, so a read that overlapped any part of a write to
 * a graph sees that graph's revision move.
 *
 * A revision is the value of one counter at the graph's last write, so the
 * map holds only graphs written since the process started. To stay bounded
 * it is emptied when it grows past `max` graphs; every graph then answers a
 * new floor above every revision handed out before, so each revision still
 * only moves upwards (an answer cached before reads as stale, never as
 * current).
 */
export class GraphRevisions {
  private counter = 0;
  private floor = 0;
  private readonly last = new Map<string, number>();

  constructor(private readonly max = 100_000) {}

  get(graph: string): number {
    return this.last.get(graph) ?? this.floor;
  }

  bump(graphs: Iterable<string>): void {
    if (this.last.size >= this.max) {
      this.floor = ++this.counter;
      this.last.clear();
    }
    for (const graph of graphs) this.last.set(graph, ++this.counter);
  }
}
