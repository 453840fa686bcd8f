/**
 * Exclusive sections by key, within one process: a section runs once every
 * earlier section of the same key has settled (docs/store.md,
 * "Invariant sites"). Both stores' `exclusive` use it.
 */
export class ExclusiveSections {
  /** Per key: the tail of the queue of sections. */
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const run = previous.then(fn, fn);
    const tail = run.catch(() => {});
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return run;
  }
}
