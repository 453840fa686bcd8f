import oxigraph from 'oxigraph';

/**
 * Frees a store's WebAssembly memory now. Left to the garbage collector, a
 * store is freed only when its JavaScript wrapper is finalized, and until
 * then every new store grows the engine's heap, and a throwaway store per
 * write costs about twice as much (docs/figures.md).
 * The store must not be used afterwards.
 */
export function freeStore(store: oxigraph.Store): void {
  (store as unknown as { free?: () => void }).free?.();
}

/** Runs `fn` on a new, empty store and frees the store when `fn` returns or throws. */
export function withScratchStore<T>(fn: (store: oxigraph.Store) => T): T {
  const store = new oxigraph.Store();
  try {
    return fn(store);
  } finally {
    freeStore(store);
  }
}
