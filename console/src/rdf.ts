import { Parser } from 'n3';

/** One triple, each term as the console shows it. */
export interface Term { kind: 'iri' | 'blank' | 'literal'; value: string; datatype?: string; language?: string }
export interface Triple { s: Term; p: Term; o: Term }

const term = (t: { termType: string; value: string; datatype?: { value: string }; language?: string }): Term => {
  if (t.termType === 'NamedNode') return { kind: 'iri', value: t.value };
  if (t.termType === 'BlankNode') return { kind: 'blank', value: `_:${t.value}` };
  return { kind: 'literal', value: t.value, datatype: t.datatype?.value, language: t.language || undefined };
};

/** Parses N-Triples (as the service answers with Accept: application/n-triples) with N3.js. */
export function parseNTriples(text: string): Triple[] {
  return new Parser({ format: 'application/n-triples' }).parse(text).map((q) => ({ s: term(q.subject), p: term(q.predicate), o: term(q.object) }));
}
