import { Parser, Writer } from 'n3';
import type { QuadStore, WriteOp } from '../../../src/store/store.js';
import { iri, integer, literal, sparql } from '../../../src/rdf/sparql.js';

/** Number of triples in `graph`. */
export async function count(store: QuadStore, graph: string): Promise<number> {
  const rows = await store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH ${iri(graph)} { ?s ?p ?o } }`);
  return Number(rows[0]?.n?.value ?? 0);
}

/**
 * Every triple of the given graphs, as sorted lines (the state a test compares).
 * Each backend's N-Triples is parsed and written again in one form: the format
 * lets an engine separate terms with tabs or spaces (Virtuoso writes tabs).
 */
export async function state(store: QuadStore, graphs: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  const writer = new Writer({ format: 'N-Triples' });
  for (const g of graphs) {
    for (const q of new Parser({ format: 'N-Triples' }).parse(await store.dumpGraph(g))) {
      out.push(`${g} ${writer.quadToString(q.subject, q.predicate, q.object).trim()}`);
    }
  }
  return out.sort();
}

/** An update op inserting `<urn:s:key> <urn:p:value> value` into `graph`. */
export function insert(graph: string, key: string, value: string | number): WriteOp {
  const object = typeof value === 'number' ? integer(value) : literal(value);
  return { kind: 'update', sparql: sparql`INSERT DATA { GRAPH ${iri(graph)} { ${iri(`urn:s:${key}`)} <urn:p:value> ${object} } }`, graphs: [graph] };
}

/** N-Triples of `n` triples (about 80 bytes each) with subjects tagged `tag`. */
export function triples(n: number, tag: string): string {
  let out = '';
  for (let i = 0; i < n; i++) out += `<urn:${tag}:${i}> <urn:p:label> "item ${i} of a large write, ${tag}" .\n`;
  return out;
}

/** Collects what `onWrite` listeners hear until `stop()`. */
export function listen(store: QuadStore): { heard: string[][]; stop: () => void } {
  const heard: string[][] = [];
  const stop = store.onWrite((graphs) => heard.push([...graphs].sort()));
  return { heard, stop };
}

/** Runs `fn` and answers what it threw (undefined if nothing). */
export async function thrown(fn: () => Promise<unknown>): Promise<unknown> {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  return undefined;
}
