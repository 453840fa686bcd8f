import type { QuadStore, WriteOp } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { affectedBy } from '../store/write-reach.js';
import { stableId } from '../rdf/ids.js';

/**
 * Memoizes reads of the store between writes: every entry is dropped as soon
 * as the store's version changes (it is bumped synchronously by each write,
 * before the write's promise settles), so a cached answer is always the one a
 * query would give now. For the lookups every request repeats (the caller's
 * user record, the workspace, membership and administrator checks): between
 * writes they cost a Map lookup instead of a SPARQL query. Cached objects are
 * frozen: callers share them. At most `max` entries (all dropped when full).
 */
export class ReadCache<V> {
  private version = -1;
  private readonly entries = new Map<string, V>();

  /**
   * @param relevant when given, only writes for which it answers true drop
   * the entries (e.g. user records survive a write to a slash-command graph);
   * without it every write does.
   */
  constructor(private readonly store: QuadStore, private readonly max = 10_000, relevant?: (ops: WriteOp[]) => boolean) {
    if (relevant) {
      store.onWrite((ops) => {
        if (this.version === store.version - 1 && !relevant(ops)) this.version = store.version;
      });
    }
  }

  /**
   * The value for `key`, computing it when missing. The computed value is
   * kept only if no write that matters happened while it was read (reads are
   * asynchronous: the answer may be older than the store by then).
   */
  async get(key: string, compute: () => Promise<V>): Promise<V> {
    const hit = this.peek(key);
    if (hit.found) return hit.value;
    const at = this.stamp();
    const value = await compute();
    this.setIfCurrent(key, value, at);
    return value;
  }

  peek(key: string): { found: true; value: V } | { found: false } {
    this.sync();
    return this.entries.has(key) ? { found: true, value: this.entries.get(key)! } : { found: false };
  }

  /** The version a read started at; pass it to `setIfCurrent` with what the read found. */
  stamp(): number {
    this.sync();
    return this.version;
  }

  /** Keeps a value read since `stamp()` returned `at`, unless a write that matters happened meanwhile. */
  setIfCurrent(key: string, value: V, at: number): void {
    this.sync();
    if (this.version !== at) return;
    if (this.entries.size >= this.max) this.entries.clear();
    this.entries.set(key, deepFreeze(value));
  }

  /** Drops everything when a write happened that was not found irrelevant. */
  private sync(): void {
    if (this.store.version !== this.version) {
      this.entries.clear();
      this.version = this.store.version;
    }
  }
}

/** Writes that may change records of the system graph (users, workspaces). */
export const touchesSystem = (graphs: Graphs) => (ops: WriteOp[]): boolean =>
  ops.some((op) => { const reach = affectedBy(op, graphs); return reach.all || reach.system; });

/** Writes that may change the system graph or a workspace's IAM graph (memberships, administrators). */
export const touchesSystemOrIam = (graphs: Graphs) => (ops: WriteOp[]): boolean =>
  ops.some((op) => {
    const reach = affectedBy(op, graphs);
    return reach.all || reach.system || [...reach.workspaces.values()].some((paths) => paths.has('iam'));
  });

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

const stableIds = new Map<string, string>();

/** `stableId(...keys)`, remembered (a name-based UUID hashes with SHA-1; requests derive the same few ids). */
export function cachedStableId(...keys: string[]): string {
  const key = keys.map((k) => `${k.length}:${k}`).join('|');
  let id = stableIds.get(key);
  if (id === undefined) {
    id = stableId(...keys);
    if (stableIds.size >= 50_000) stableIds.clear();
    stableIds.set(key, id);
  }
  return id;
}
