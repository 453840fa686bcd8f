import { DataFactory, Parser, Writer, type Quad } from 'n3';
import { badRequest } from '../errors.js';

/**
 * Interim Turtle reading for extensions until the shared `src/rdf/turtle.ts`
 * (branch `validation`) is merged; same signatures, replaced by it.
 */
export function parseTurtle(text: string, options: { baseIri?: string; source?: string } = {}): Quad[] {
  try {
    return new Parser({ format: 'text/turtle', ...(options.baseIri ? { baseIRI: options.baseIri } : {}) }).parse(text);
  } catch (err) {
    const e = err as { message?: string; context?: { line?: number } };
    const line = e.context?.line ?? 0;
    throw badRequest(`${options.source ?? 'Turtle'}: Turtle syntax error at line ${line}, column 0: ${e.message ?? 'invalid'}`, { line, column: 0 });
  }
}

export function quadsToNTriples(quads: Quad[]): string {
  const writer = new Writer({ format: 'N-Triples' });
  return writer.quadsToString(quads.map((q) => DataFactory.quad(q.subject, q.predicate, q.object)));
}

export function looksLikeRdfXml(text: string): boolean {
  return /^\s*(<\?xml|<rdf:RDF)/.test(text);
}
