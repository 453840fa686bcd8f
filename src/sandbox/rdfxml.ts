import oxigraph from 'oxigraph';
import { withScratchStore } from '../store/scratch.js';

/**
 * RDF/XML answers (https://www.w3.org/TR/rdf-syntax-grammar/), written by
 * Oxigraph's serializer. RDF/XML cannot carry every graph, and the
 * serializer does not refuse all it cannot carry, so a graph is checked
 * first; one that cannot be written is refused with `RdfXmlUnwritable`
 * (the SPARQL endpoint answers 406 naming the other formats):
 *
 * - a predicate becomes an element name, so its IRI must end in an XML
 *   name (NCName): `http://ex.org/1`, `http://ex.org/` or `urn:isbn:123`
 *   cannot be written (the serializer would write `<oxprefix:>`, which is
 *   not XML); the serializer itself refuses RDF/XML's own syntax terms
 *   (`rdf:li`, `rdf:about`, ...) as predicates;
 * - a literal becomes element text, so it may hold only XML 1.0
 *   characters (no control character but tab, line feed and carriage
 *   return; no U+FFFE or U+FFFF).
 *
 * A carriage return in a literal is written `&#13;`: written as itself an
 * XML parser reads it as a line feed. Reading RDF/XML is not offered
 * anywhere (extensions and matrices take Turtle or N-Triples only).
 */

/** XML 1.0 (fifth edition) NameStartChar without ':', and NameChar without ':'. */
const NAME_START = 'A-Z_a-z\\u00C0-\\u00D6\\u00D8-\\u00F6\\u00F8-\\u02FF\\u0370-\\u037D\\u037F-\\u1FFF\\u200C-\\u200D'
  + '\\u2070-\\u218F\\u2C00-\\u2FEF\\u3001-\\uD7FF\\uF900-\\uFDCF\\uFDF0-\\uFFFD\\u{10000}-\\u{EFFFF}';
const NAME_CHAR = `${NAME_START}\\-.0-9\\u00B7\\u0300-\\u036F\\u203F-\\u2040`;
// The combining marks (U+0300 to U+036F) are a range of name characters here, not a character combined with another.
// eslint-disable-next-line no-misleading-character-class
const ENDS_IN_NCNAME = new RegExp(`[${NAME_START}][${NAME_CHAR}]*$`, 'u');
/** A character XML 1.0 cannot carry at all, not even as a character reference. */
const NOT_XML_CHAR = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/u;

export class RdfXmlUnwritable extends Error {}

/** Why RDF/XML cannot carry this triple, or undefined when it can. */
function obstacle(quad: oxigraph.Quad): string | undefined {
  const p = quad.predicate.value;
  if (!ENDS_IN_NCNAME.test(p)) return `the predicate <${p}> does not end in an XML name, so RDF/XML cannot write it as an element`;
  const o = quad.object;
  if (o.termType === 'Literal' && NOT_XML_CHAR.test(o.value)) {
    return `a literal of <${p}> holds a control character that XML 1.0 cannot carry`;
  }
  return undefined;
}

/**
 * The triples of `ntriples` (N-Triples text of distinct triples) as
 * RDF/XML; throws `RdfXmlUnwritable` saying why when RDF/XML cannot carry
 * them.
 */
export function toRdfXml(ntriples: string): string {
  return withScratchStore((scratch) => {
    if (ntriples) scratch.load(ntriples, { format: 'application/n-triples', lenient: true });
    for (const quad of scratch.match(null, null, null, null)) {
      const why = obstacle(quad);
      if (why) throw new RdfXmlUnwritable(why);
    }
    let xml: string;
    try {
      xml = scratch.dump({ format: 'application/rdf+xml', from_graph_name: oxigraph.defaultGraph() });
    } catch (err) {
      // The serializer's own refusals (RDF/XML's syntax terms as predicates); a broken engine stays an internal error.
      if (err instanceof WebAssembly.RuntimeError || err instanceof RangeError) throw err;
      throw new RdfXmlUnwritable(err instanceof Error ? err.message : String(err));
    }
    // The serializer's layout is line feeds and tabs: a carriage return comes from a literal.
    return xml.replace(/\r/g, '&#13;');
  });
}
