import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDurableStore, type DurableStore, type DurableStoreOptions } from '../../src/store/embedded/durable.js';
import { sparql, iri, integer, type Sparql } from '../../src/rdf/sparql.js';
import { HEADER_BYTES, checksum, lengthAndSeqBytes } from '../../src/store/journal-records.js';
import type { JournalOp } from '../../src/store/store.js';

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
export function insertPair(n: number): Sparql {
  const s = iri(`urn:n:${n}`);
  return sparql`INSERT DATA { GRAPH <urn:g:test> { ${s} <urn:p:a> ${integer(n)} . ${s} <urn:p:b> ${integer(n)} . } }`;
}

/** The numbers having an `a` triple and those having a `b` triple. */
export async function numbers(store: DurableStore): Promise<{ a: Set<number>; b: Set<number> }> {
  const rows = await store.select(sparql`SELECT ?p ?n WHERE { GRAPH <urn:g:test> { ?s ?p ?n } }`);
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

/** Store content with blank node labels (which a load renames) made uniform. */
export const shape = (lines: string[]): string[] => lines.map((l) => l.replace(/_:[0-9a-z]+/g, '_:b')).sort();

/**
 * A journal record in the older form, as the service wrote it before records
 * carried their commit time: the payload is the ops array alone.
 */
export function untimedRecord(seq: number, ops: readonly JournalOp[]): Buffer {
  const payload = Buffer.from(JSON.stringify(ops), 'utf8');
  const header = Buffer.alloc(HEADER_BYTES);
  header.writeUInt32LE(payload.length, 0);
  checksum(lengthAndSeqBytes(payload.length, seq), payload).copy(header, 4);
  header.writeBigUInt64LE(BigInt(seq), 12);
  return Buffer.concat([header, payload]);
}
