import type { QuadStore } from './store.js';

/**
 * The one read cache of the service (docs/store.md, the cache rule).
 * An entry remembers the graphs its read depends on and their revisions
 * (`QuadStore.revision`) when the read started; it is answered only while
 * none of those revisions has moved. A value whose graphs' revisions moved
 * while it was being read (a write to one of them was in flight or landed)
 * is returned to its caller but not kept. So a write to one graph leaves
 * cached answers that read only other graphs in place.
 *
 * The caller names the graphs its read depends on: every graph the query
 * reads that a write could change in a way that changes the answer.
 *
 * On a store other instances write (`capabilities.otherInstancesWrite`),
 * `get` first brings the revisions of `graphs` up to date
 * (`QuadStore.syncRevisions`), so a write made through another instance
 * before the call moves them too.
 *
 * Values are deep-frozen: callers share them. Bounded: at most `max`
 * entries, the least recently used goes first.
 */
export class GraphCache<V> {
  private readonly entries = new Map<string, { value: V; graphs: readonly string[]; revisions: number[]; placed: number }>();
  /** Counts placements (an entry kept, or moved to the recent end): the age of an entry's place in `entries`. */
  private placements = 0;

  constructor(private readonly store: QuadStore, private readonly max = 10_000) {}

  /** The value for `key`, read by `read` (which depends on `graphs`) unless a current one is kept. */
  async get(key: string, graphs: readonly string[], read: () => Promise<V>): Promise<V> {
    if (this.store.capabilities.otherInstancesWrite) await this.store.syncRevisions(graphs);
    const hit = this.peek(key);
    if (hit.found) return hit.value;
    const at = this.revisionsOf(graphs);
    const value = await read();
    this.keep(key, graphs, at, value);
    return value;
  }

  /**
   * Brings the revisions of `graphs` up to date with other instances' writes
   * (`QuadStore.syncRevisions`, where `capabilities.otherInstancesWrite`):
   * call it before `peek` when not going through `get`. Nothing to do on
   * the embedded store.
   */
  async sync(graphs: readonly string[]): Promise<void> {
    if (this.store.capabilities.otherInstancesWrite) await this.store.syncRevisions(graphs);
  }

  /** A kept, current value for `key`, if any (current as of the last `sync` of its graphs). */
  peek(key: string): { found: true; value: V } | { found: false } {
    const entry = this.entries.get(key);
    if (!entry) return { found: false };
    if (!this.current(entry.graphs, entry.revisions)) {
      this.entries.delete(key);
      return { found: false };
    }
    // Most recently used last. An entry placed in the recent half stays where
    // it is: a hot entry moves about once per max/2 placements, not on every
    // hit, and still never reaches the front, where entries are evicted.
    if (this.placements - entry.placed >= this.max / 2) {
      this.entries.delete(key);
      entry.placed = ++this.placements;
      this.entries.set(key, entry);
    }
    return { found: true, value: entry.value };
  }

  /** The revisions of `graphs` now: take them before a read, pass them to `keep` with what it found. */
  revisionsOf(graphs: readonly string[]): number[] {
    return graphs.map((g) => this.store.revision(g));
  }

  /** Keeps a value read since `revisionsOf(graphs)` returned `at`, unless one of those revisions moved meanwhile. */
  keep(key: string, graphs: readonly string[], at: number[], value: V): void {
    if (!this.current(graphs, at)) return;
    this.entries.delete(key);
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { value: deepFreeze(value), graphs, revisions: at, placed: ++this.placements });
  }

  private current(graphs: readonly string[], revisions: readonly number[]): boolean {
    for (let i = 0; i < graphs.length; i++) if (this.store.revision(graphs[i]!) !== revisions[i]) return false;
    return true;
  }
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
