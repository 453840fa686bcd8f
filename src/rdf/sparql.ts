/**
 * The one escaping module. SPARQL text is built with the `sparql` tagged
 * template: every interpolated value must be an RDF term made here (iri,
 * literal, ...) or a `raw` fragment built by code, never a plain string, so
 * user text only ever reaches a query as an escaped term.
 *
 * Escaping follows SPARQL 1.1 grammar productions IRIREF [139] and
 * STRING_LITERAL_LONG2 / ECHAR [159].
 */

const XSD = 'http://www.w3.org/2001/XMLSchema#';

declare const sparqlBrand: unique symbol;

/**
 * SPARQL text built by the `sparql` tag (or, in the few listed places, by
 * `trustedSparql`). The store's methods accept only this type, so a plain
 * or pasted string is a type error at the call (docs/store.md,
 * "SPARQL reaches the store only through the tag"). It is a string at run
 * time: it can be logged, compared, concatenated (which gives a plain
 * string again, refused by the store).
 */
export type Sparql = string & { readonly [sparqlBrand]: true };

export interface SparqlFragment {
  readonly __sparql: string;
}

const fragment = (text: string): SparqlFragment => ({ __sparql: text });

/** Characters that IRIREF forbids. */
const BAD_IRI = /[\u0000-\u0020<>"{}|^`\\]/;

/** Is the string usable as an absolute IRI in SPARQL? */
export function isValidIri(value: string): boolean {
  // A "%" must start a percent-encoding, and a lone surrogate is no character: the store's IRI parser refuses both.
  return value.length > 0 && !BAD_IRI.test(value) && /^[A-Za-z][A-Za-z0-9+.-]*:/.test(value)
    && !/%(?![0-9A-Fa-f]{2})/.test(value) && !/[\uD800-\uDFFF]/u.test(value);
}

/** An IRI term. Throws on a value SPARQL cannot express as an IRI. */
export function iri(value: string): SparqlFragment {
  if (!isValidIri(value)) throw new Error(`not a valid absolute IRI: ${JSON.stringify(value)}`);
  return fragment(`<${value}>`);
}

const SHORT_ESCAPES: Record<string, string> = { '\\': '\\\\', '"': '\\"', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\b': '\\b', '\f': '\\f' };

/**
 * The body of a SPARQL string literal holding `value`: backslash, quote and
 * the ECHAR line controls as ECHARs, every other C0 control and DEL as
 * `\uXXXX`, so the text holds no control character at all (an engine may
 * stop reading at a raw U+0000: Virtuoso does).
 */
function escapeString(value: string): string {
  return value.replace(/[\u0000-\u001f"\\\u007f]/g, (ch) => SHORT_ESCAPES[ch] ?? `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** `value` as a quoted SPARQL string literal (no datatype or language), for text the store builds itself. */
export function quotedString(value: string): string {
  return `"${escapeString(value)}"`;
}

/** A string literal (xsd:string), or language-tagged / typed. */
export function literal(value: string, datatypeOrLang?: { datatype?: string; lang?: string }): SparqlFragment {
  const body = `"${escapeString(value)}"`;
  if (datatypeOrLang?.lang) {
    if (!/^[A-Za-z]+(-[A-Za-z0-9]+)*$/.test(datatypeOrLang.lang)) throw new Error('bad language tag');
    return fragment(`${body}@${datatypeOrLang.lang}`);
  }
  if (datatypeOrLang?.datatype && datatypeOrLang.datatype !== `${XSD}string`) {
    return fragment(`${body}^^${iri(datatypeOrLang.datatype).__sparql}`);
  }
  return fragment(body);
}

export const dateTime = (value: Date | string): SparqlFragment =>
  literal(typeof value === 'string' ? value : value.toISOString(), { datatype: `${XSD}dateTime` });

export function integer(value: number): SparqlFragment {
  if (!Number.isSafeInteger(value)) throw new Error(`not an integer: ${value}`);
  return fragment(`"${value}"^^<${XSD}integer>`);
}

export const boolean = (value: boolean): SparqlFragment => fragment(`"${value}"^^<${XSD}boolean>`);

/** A variable name chosen by code. */
export function variable(name: string): SparqlFragment {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`bad variable name: ${name}`);
  return fragment(`?${name}`);
}

/** Trusted SPARQL text written by the service's own code (never user input). */
export const raw = (text: string): SparqlFragment => fragment(text);

/** Joins fragments with a separator. */
export function join(parts: SparqlFragment[], separator = ' '): SparqlFragment {
  return fragment(parts.map((p) => p.__sparql).join(separator));
}

/** Either `sparql\`...\`` template or a helper's fragment, rendered as text. */
export function sparql(strings: TemplateStringsArray, ...values: SparqlFragment[]): Sparql {
  let out = strings[0]!;
  values.forEach((value, i) => {
    if (value === null || typeof value !== 'object' || typeof (value as SparqlFragment).__sparql !== 'string') {
      throw new Error('sparql`` only interpolates terms built by rdf/sparql.ts');
    }
    out += value.__sparql + strings[i + 1]!;
  });
  return out as Sparql;
}

/**
 * Several built requests as one fragment, separated by `separator` (by
 * default the `;` between update operations): `sparql\`${prefixes}${sequence([a, b])}\``.
 */
export function sequence(parts: readonly Sparql[], separator: ' ;\n' | '\n' | ' ' = ' ;\n'): SparqlFragment {
  return fragment(parts.join(separator));
}

/** SPARQL built by the tag, as a fragment to interpolate into another. */
export const fragmentOf = (built: Sparql): SparqlFragment => fragment(built);

/**
 * Why text the service did not build with the tag may still reach the
 * store. Each reason names the one place that uses it (listed in
 * docs/store.md); nothing else may call `trustedSparql`.
 */
export type TrustedSparqlReason =
  | 'store internals: text the store builds from a request it was given';

/**
 * The one conversion of plain text to `Sparql`, for text the service did
 * not build with the tag at this call (see `TrustedSparqlReason`).
 */
export function trustedSparql(text: string, reason: TrustedSparqlReason): Sparql {
  void reason;
  return text as Sparql;
}

/** Like `sparql` but returns a fragment, for composing queries. */
export function sparqlFragment(strings: TemplateStringsArray, ...values: SparqlFragment[]): SparqlFragment {
  return fragment(sparql(strings, ...values));
}

/** Optional-literal helper: a triple pattern line only when the value exists. */
export function optionalTriple(subject: SparqlFragment, predicate: SparqlFragment, value: SparqlFragment | null | undefined): SparqlFragment {
  return value ? fragment(`${subject.__sparql} ${predicate.__sparql} ${value.__sparql} .`) : fragment('');
}
