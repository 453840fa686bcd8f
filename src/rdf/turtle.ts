/**
 * Turtle in and N-Triples out, with n3. Matrix specifications and extensions
 * arrive as Turtle from users, so a syntax error must say where it is (file,
 * line and column) and never leak a stack or a parser internal.
 */
import { DataFactory, Parser, Writer, type Quad } from 'n3';
import oxigraph from 'oxigraph';
import { badRequest } from '../errors.js';
import { withScratchStore } from '../store/scratch.js';

export interface ParseTurtleOptions {
  /** Base IRI against which relative IRIs of the document are resolved. */
  baseIri?: string;
  /** Name of the document in error messages (a file path of an archive, "extension", ...). */
  source?: string;
}

interface N3Token {
  line?: number;
  start?: number;
}

interface N3ParseError extends Error {
  context?: { token?: N3Token; line?: number; previousToken?: N3Token & { end?: number } };
}

/** Text of line `line` (1-based) of `text`, or '' past the end. */
function lineText(text: string, line: number): string {
  const lines = text.split(/\r\n|\r|\n/);
  return lines[line - 1] ?? '';
}

/**
 * The 1-based column of an n3 error. n3 gives the offending token's offset
 * within its line when the parser fails; when the lexer fails it only names
 * the line and quotes the unreadable text, so the column is found by looking
 * for that text on the line, after the last token that was read.
 */
function errorColumn(text: string, line: number, error: N3ParseError): number {
  const token = error.context?.token;
  if (token && token.line === line && typeof token.start === 'number') return token.start + 1;
  const source = lineText(text, line);
  const previous = error.context?.previousToken;
  const from = previous && previous.line === line && typeof previous.end === 'number' ? previous.end : 0;
  const quoted = /^Unexpected "(.*)" on line \d+\.?$/s.exec(error.message)?.[1];
  if (quoted) {
    const at = source.indexOf(quoted.slice(0, 20), from);
    if (at >= 0) return at + 1;
  }
  const firstNonBlank = source.slice(from).search(/\S/);
  return firstNonBlank >= 0 ? from + firstNonBlank + 1 : Math.max(1, from + 1);
}

/** n3's message without its trailing "on line N." (the location is added in a uniform form). */
function problemText(message: string): string {
  return message.replace(/\s+on line \d+\.?\s*$/, '').trim() || 'invalid syntax';
}

/**
 * Parses a Turtle document strictly (Turtle only: no N3 rules, no named
 * graphs, no RDF 1.2 triple terms). Quads are in the default graph.
 * Throws BAD_REQUEST "<source>: Turtle syntax error at line L, column C: ..."
 * with details {source, line, column}.
 */
export function parseTurtle(text: string, options: ParseTurtleOptions = {}): Quad[] {
  const source = options.source ?? 'Turtle document';
  const parser = new Parser({ format: 'text/turtle', ...(options.baseIri ? { baseIRI: options.baseIri } : {}) });
  let quads: Quad[];
  try {
    quads = parser.parse(text);
  } catch (cause) {
    const error = cause as N3ParseError;
    const line = error.context?.line ?? Number(/on line (\d+)/.exec(error.message ?? '')?.[1] ?? 1);
    const column = errorColumn(text, line, error);
    throw badRequest(`${source}: Turtle syntax error at line ${line}, column ${column}: ${problemText(String(error.message ?? ''))}`,
      { source, line, column });
  }
  for (const quad of quads) {
    if ((quad.subject.termType as string) === 'Quad' || (quad.object.termType as string) === 'Quad') {
      throw badRequest(`${source}: RDF 1.2 triple terms and reifiers (<<( )>>, << >>, ~) are not supported`, { source });
    }
  }
  checkIrisForStore(quads, text, options, source);
  return quads;
}

/**
 * n3 accepts some IRIs the store (Oxigraph) refuses, such as a bad percent
 * escape (`<http://example.org/a%zz>`). Every distinct IRI is checked the
 * way the store checks it, so such a document is refused here with the IRI
 * and its line, before anything is written.
 */
function checkIrisForStore(quads: readonly Quad[], text: string, options: ParseTurtleOptions, source: string): void {
  const seen = new Set<string>();
  for (const quad of quads) {
    for (const term of [quad.subject, quad.predicate, quad.object, quad.object.termType === 'Literal' ? quad.object.datatype : null]) {
      if (!term || term.termType !== 'NamedNode' || seen.has(term.value)) continue;
      seen.add(term.value);
      let problem: string | null = null;
      try {
        oxigraph.namedNode(term.value);
      } catch (err) {
        problem = err instanceof Error ? err.message : String(err);
      }
      if (problem === null) continue;
      const line = refusedLine(text, options.baseIri) ?? lineOf(text, term.value);
      const where = line ? ` at line ${line}` : '';
      throw badRequest(`${source}: the IRI <${term.value}>${where} is not accepted by the store: ${problem}`,
        { source, iri: term.value, ...(line ? { line } : {}) });
    }
  }
}

/** The line the store's own Turtle parser stops at, if it refuses the document. */
function refusedLine(text: string, baseIri: string | undefined): number | null {
  try {
    withScratchStore((scratch) => scratch.load(text, { format: 'text/turtle', ...(baseIri ? { base_iri: baseIri } : {}), to_graph_name: oxigraph.defaultGraph() }));
    return null;
  } catch (err) {
    const m = /line (\d+)/.exec(err instanceof Error ? err.message : String(err));
    return m ? Number(m[1]) : null;
  }
}

/** The first line holding `iri` (or its last segment), if any. */
function lineOf(text: string, iri: string): number | null {
  const lines = text.split(/\r\n|\r|\n/);
  const tail = iri.slice(Math.max(iri.lastIndexOf('/'), iri.lastIndexOf('#')) + 1);
  for (const needle of [iri, tail]) {
    if (!needle) continue;
    const at = lines.findIndex((l) => l.includes(needle));
    if (at >= 0) return at + 1;
  }
  return null;
}

/** Writes quads as N-Triples (the graph of each quad is dropped). */
export function quadsToNTriples(quads: readonly Quad[]): string {
  const writer = new Writer({ format: 'N-Triples' });
  return writer.quadsToString(quads.map((q) => DataFactory.quad(q.subject, q.predicate, q.object)));
}

const RDF_NS = 'http://www.w3.org/1999/02/22-rdf-syntax-ns#';

/**
 * Does the text look like RDF/XML rather than Turtle? True for an XML
 * declaration, a DOCTYPE, or a first element carrying xmlns declarations
 * (`<rdf:RDF xmlns:rdf=...>`). A Turtle document starting with an IRI
 * (`<urn:x> a ...`) is not mistaken for XML: an IRI has no attributes.
 */
export function looksLikeRdfXml(text: string): boolean {
  let rest = text.replace(/^\uFEFF/, '').trimStart();
  // leading XML comments
  while (rest.startsWith('<!--')) {
    const end = rest.indexOf('-->');
    if (end < 0) return true;
    rest = rest.slice(end + 3).trimStart();
  }
  if (/^<\?xml[\s?]/i.test(rest) || /^<!DOCTYPE\s/i.test(rest)) return true;
  const start = /^<([A-Za-z_][\w.-]*(?::[A-Za-z_][\w.-]*)?)((?:\s+[A-Za-z_][\w.:-]*\s*=\s*(?:"[^"]*"|'[^']*'))*)\s*\/?>/.exec(rest);
  if (!start) return false;
  const [, name, attributes] = start;
  if (name === 'rdf:RDF') return true;
  return /(?:^|\s)xmlns(?::[\w.-]+)?\s*=/.test(attributes ?? '') || (attributes ?? '').includes(RDF_NS);
}
