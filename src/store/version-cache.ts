import type { QuadStore } from './store.js';

/**
 * Answers read from the store, kept until the store next changes: every
 * write bumps `store.version`, and the first lookup after that finds the
 * cache emptied. So an entry never outlives the state it was read from,
 * whichever write (a command's progress, a user, anything) changed it.
 * Bounded: when full it starts over.
 */
export class VersionCache<T> {
  private version = -1;
  private readonly entries = new Map<string, T>();

  constructor(private readonly store: QuadStore, private readonly maxEntries = 10_000) {}

  /** The value read for `key` at the current store version, reading it when missing; kept only if no write happened during the read. */
  async get(key: string, read: () => Promise<T>): Promise<T> {
    if (this.version !== this.store.version || this.entries.size >= this.maxEntries) {
      this.version = this.store.version;
      this.entries.clear();
    }
    if (this.entries.has(key)) return this.entries.get(key)!;
    const at = this.store.version;
    const value = await read();
    if (this.store.version === at && this.version === at) this.entries.set(key, value);
    return value;
  }
}
