import { badRequest, payloadTooLarge, unsupportedMediaType } from '../errors.js';
import { ReservedTerms } from '../rdf/reserved.js';
import { parseTurtle, quadsToNTriples, looksLikeRdfXml } from '../rdf/turtle.js';

/** The uploaded `file` part as multer gives it (only what is read here). */
export interface UploadedTurtle {
  buffer: Buffer;
  originalname?: string;
  mimetype?: string;
}

export interface ExtensionTurtle {
  /** The Turtle as sent (UTF-8). */
  text: string;
  /** Its triples as N-Triples, to load into the content graph. */
  ntriples: string;
  tripleCount: number;
}

/**
 * Media types a Turtle part may be declared with. Clients and browsers often
 * send a generic type for a `.ttl` file, so those pass and the content decides;
 * a type that names another RDF syntax is refused (415).
 */
const ACCEPTED_TYPES = new Set([
  'text/turtle', 'application/x-turtle', 'application/turtle', 'application/n-triples', 'text/plain',
  'application/octet-stream', '',
]);

/**
 * Reads the Turtle of an extension (X5, X2): media type, size, UTF-8, then
 * strict Turtle with relative IRIs resolved against the target matrix URI.
 * Every problem is a 4xx whose message says what to fix; a syntax error
 * names its line and column.
 */
export function readExtensionTurtle(file: UploadedTurtle, options: { baseIri: string; maxBytes: number; reserved?: ReservedTerms }): ExtensionTurtle {
  const type = (file.mimetype ?? '').split(';')[0]!.trim().toLowerCase();
  if (!ACCEPTED_TYPES.has(type)) {
    throw unsupportedMediaType(`The extension file must be Turtle (text/turtle), not ${type}`);
  }
  if (file.buffer.length > options.maxBytes) {
    throw payloadTooLarge(`The extension file is larger than ${options.maxBytes} bytes`);
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(file.buffer);
  } catch {
    throw badRequest('The extension file is not UTF-8 text; send Turtle encoded as UTF-8');
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (looksLikeRdfXml(text)) {
    throw badRequest('The extension file is RDF/XML; only Turtle is accepted (convert it, for example with a Turtle serializer)');
  }
  const start = text.trimStart();
  if (start.startsWith('{') || /^\[\s*\{/.test(start)) {
    throw badRequest('The extension file looks like JSON(-LD); only Turtle is accepted');
  }
  const quads = parseTurtle(text, { baseIri: options.baseIri, source: file.originalname || 'extension' });
  const reserved = options.reserved?.uses(quads, 1)[0];
  if (reserved) throw badRequest(ReservedTerms.message(reserved), { statement: reserved.statement, term: reserved.term });
  if (quads.length === 0) throw badRequest('The extension file holds no triples; an extension adds statements to its target matrix');
  return { text, ntriples: quadsToNTriples(quads), tripleCount: quads.length };
}
