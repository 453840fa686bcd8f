import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDurableStore, type DurableStore, type DurableStoreOptions } from '../../src/store/durable.js';

/** A fresh temporary data directory, removed by `cleanup()`. */
export async function tempDir(): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'wsm-durable-'));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Opens a store collecting its warnings. */
export async function openCollecting(
  dir: string,
  options: DurableStoreOptions = {},
): Promise<{ store: DurableStore; warnings: string[] }> {
  const warnings: string[] = [];
  const store = await openDurableStore(dir, { ...options, onWarning: (m) => warnings.push(m) });
  return { store, warnings };
}

/** INSERT DATA of two triples about number `n` in one update. */
export function insertPair(n: number): string {
  return `INSERT DATA { GRAPH <urn:g:test> { <urn:n:${n}> <urn:p:a> ${n} . <urn:n:${n}> <urn:p:b> ${n} . } }`;
}

/** The numbers having an `a` triple and those having a `b` triple. */
export async function numbers(store: DurableStore): Promise<{ a: Set<number>; b: Set<number> }> {
  const rows = await store.select('SELECT ?p ?n WHERE { GRAPH <urn:g:test> { ?s ?p ?n } }');
  const a = new Set<number>();
  const b = new Set<number>();
  for (const row of rows) {
    const n = Number(row.n!.value);
    (row.p!.value === 'urn:p:a' ? a : b).add(n);
  }
  return { a, b };
}

/** Whole store content as sorted N-Quads lines, for comparing states. */
export function content(store: DurableStore): string[] {
  return store.raw.dump({ format: 'application/n-quads' }).split('\n').filter(Boolean).sort();
}
