/**
 * JSON-LD answers, fast. Oxigraph serializes a graph as JSON-LD in
 * WebAssembly, far faster than jsonld.js `fromRDF` + `compact`
 * (docs/figures.md): one node object per subject, full
 * IRIs, every value in an array. This module then compacts that document
 * with the query's prefixes as the context, following the JSON-LD 1.1
 * compaction rules for a context made only of prefixes (and `@vocab` for the
 * empty prefix), so the answer has the shape jsonld.js `compact` gave:
 *
 * - `@context` is the prefixes; no context at all when there are none;
 * - IRIs become `prefix:suffix` (shortest, then least) when the prefix IRI
 *   ends with a gen-delim character; property and type IRIs under `@vocab`
 *   become the bare suffix;
 * - `rdf:type` with IRI objects becomes `@type`;
 * - a single value is not wrapped in an array; a plain string literal is a
 *   bare string; other literals are `{"@value", "@type" | "@language"}`
 *   (`rdf:JSON` literals become `@json` values);
 * - one node is the document itself; several are `@graph`, by `@id`.
 *
 * What differs from jsonld.js: RDF lists stay `rdf:first`/`rdf:rest` nodes
 * (jsonld.js folds well-formed lists into `@list`), which is the same graph.
 * When an absolute IRI could be read as a compact IRI of one of the
 * prefixes (a prefix named like a scheme, e.g. `http:`), the document is
 * answered without a context, as the earlier code did on jsonld.js's error.
 */

const RDF_TYPE = 'http://www.w3.org/1999/02/22-rdf-syntax-ns#type';
const RDF_JSON = 'http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON';
const XSD_STRING = 'http://www.w3.org/2001/XMLSchema#string';
const GEN_DELIMS = new Set([':', '/', '?', '#', '[', ']', '@']);

type ValueObject = { '@id'?: string; '@value'?: string; '@type'?: string; '@language'?: string; '@direction'?: string };
export type NodeObject = { '@id': string } & Record<string, ValueObject[] | string>;

class Confused extends Error {}

class Compactor {
  private readonly prefixes: Array<[string, string]>;
  private readonly vocab: string | undefined;
  private readonly terms: Set<string>;
  private readonly cache = new Map<string, string>();

  constructor(context: Record<string, string>) {
    this.vocab = context['@vocab'];
    this.terms = new Set(Object.keys(context).filter((k) => k !== '@vocab'));
    this.prefixes = Object.entries(context).filter(([k, iri]) => k !== '@vocab' && iri.length > 0 && GEN_DELIMS.has(iri[iri.length - 1]!));
  }

  /** An IRI, compacted; `vocab` for properties and types. */
  iri(value: string, vocab: boolean): string {
    const key = (vocab ? 'v' : 'i') + value;
    const hit = this.cache.get(key);
    if (hit !== undefined) return hit;
    const out = this.compute(value, vocab);
    this.cache.set(key, out);
    return out;
  }

  private compute(value: string, vocab: boolean): string {
    if (value.startsWith('_:')) return value;
    if (vocab && this.vocab && value.startsWith(this.vocab) && value.length > this.vocab.length) {
      const suffix = value.slice(this.vocab.length);
      if (!suffix.includes(':') && !suffix.startsWith('@') && !this.terms.has(suffix)) return suffix;
    }
    let best: string | undefined;
    for (const [name, ns] of this.prefixes) {
      if (value.length <= ns.length || !value.startsWith(ns)) continue;
      const suffix = value.slice(ns.length);
      if (suffix.startsWith('//')) continue;
      const candidate = `${name}:${suffix}`;
      if (best === undefined || candidate.length < best.length || (candidate.length === best.length && candidate < best)) best = candidate;
    }
    if (best !== undefined) return best;
    const colon = value.indexOf(':');
    if (colon > 0 && this.terms.has(value.slice(0, colon))) throw new Confused(value);
    return value;
  }

  value(v: ValueObject): unknown {
    if (v['@id'] !== undefined) return { '@id': this.iri(v['@id'], false) };
    const type = v['@type'];
    if (v['@language'] !== undefined) {
      const out: Record<string, string> = { '@language': v['@language'], '@value': v['@value']! };
      if (v['@direction'] !== undefined) out['@direction'] = v['@direction'];
      return out;
    }
    if (type === undefined || type === XSD_STRING) return v['@value'];
    if (type === RDF_JSON) {
      try { return { '@type': '@json', '@value': JSON.parse(v['@value']!) as unknown }; } catch { /* not JSON: keep it typed */ }
    }
    return { '@type': this.iri(type, true), '@value': v['@value'] };
  }

  node(node: NodeObject): Record<string, unknown> {
    const out: Record<string, unknown> = { '@id': this.iri(node['@id'], false) };
    const types: string[] = [];
    const properties: Array<[string, unknown[]]> = [];
    for (const key of Object.keys(node).sort()) {
      if (key === '@id') continue;
      const values = node[key] as ValueObject[];
      if (key === RDF_TYPE) {
        const literals: unknown[] = [];
        for (const v of values) {
          if (v['@id'] !== undefined) types.push(this.iri(v['@id'], true));
          else literals.push(this.value(v));
        }
        if (literals.length) properties.push([key, literals]);
        continue;
      }
      properties.push([key, values.map((v) => this.value(v))]);
    }
    if (types.length) out['@type'] = types.length === 1 ? types[0] : types;
    for (const [key, values] of properties) out[this.iri(key, true)] = values.length === 1 ? values[0] : values;
    return out;
  }
}

/** Merges node objects of the same subject (a streaming serializer may split them). */
function mergeNodes(nodes: NodeObject[]): NodeObject[] {
  const byId = new Map<string, NodeObject>();
  for (const node of nodes) {
    const seen = byId.get(node['@id']);
    if (!seen) { byId.set(node['@id'], node); continue; }
    for (const [key, values] of Object.entries(node)) {
      if (key === '@id') continue;
      seen[key] = [...((seen[key] as ValueObject[] | undefined) ?? []), ...(values as ValueObject[])];
    }
  }
  return [...byId.values()].sort((a, b) => (a['@id'] < b['@id'] ? -1 : a['@id'] > b['@id'] ? 1 : 0));
}

/** The query's prefixes as a JSON-LD context; the empty prefix (`PREFIX : <...>`) becomes `@vocab`. */
export function prefixContext(prefixes: Record<string, string>): Record<string, string> {
  const context: Record<string, string> = {};
  for (const [prefix, iri] of Object.entries(prefixes)) context[prefix === '' ? '@vocab' : prefix] = iri;
  return context;
}

function compactWith(nodes: NodeObject[], context: Record<string, string>): Record<string, unknown> {
  const compactor = new Compactor(context);
  const compacted = nodes.map((n) => compactor.node(n));
  const doc: Record<string, unknown> = Object.keys(context).length ? { '@context': context } : {};
  if (compacted.length === 1) return { ...doc, ...compacted[0] };
  if (compacted.length > 1) doc['@graph'] = compacted;
  return doc;
}

/**
 * Compacts Oxigraph's JSON-LD of one graph (a top-level array of node
 * objects) with the prefixes; answers the JSON text.
 */
export function compactJsonLd(oxigraphJsonLd: string, prefixes: Record<string, string>): string {
  const parsed = JSON.parse(oxigraphJsonLd) as NodeObject[] | { '@graph': NodeObject[] };
  return compactNodes(mergeNodes(Array.isArray(parsed) ? parsed : (parsed['@graph'] ?? [])), prefixes);
}

/** Node objects whose triples are distinct (`distinctJsonLd`). */
export interface DistinctNodes {
  nodes: NodeObject[];
  /** How many distinct triples they hold. */
  count: number;
}

/** One value's identity within a subject's property. */
const valueKey = (v: ValueObject): string => (v['@id'] !== undefined ? `i${v['@id']}`
  : `l${v['@value']}\u0000${v['@type'] ?? ''}\u0000${v['@language'] ?? ''}\u0000${v['@direction'] ?? ''}`);

/**
 * The distinct triples of Oxigraph's JSON-LD of a CONSTRUCT answer (the
 * engine writes a triple as often as the template made it, and a subject
 * in as many node objects as it found it in turn), merged per subject and
 * sorted by `@id`; null when there are more than `max`. What the scratch
 * store gave (`compactJsonLd` of its dump) without loading the triples into
 * a store and writing them out again.
 */
export function distinctJsonLd(oxigraphJsonLd: string, max: number): DistinctNodes | null {
  const parsed = JSON.parse(oxigraphJsonLd) as NodeObject[] | { '@graph': NodeObject[] };
  const byId = new Map<string, Map<string, Map<string, ValueObject>>>();
  let count = 0;
  for (const node of Array.isArray(parsed) ? parsed : (parsed['@graph'] ?? [])) {
    let properties = byId.get(node['@id']);
    if (!properties) byId.set(node['@id'], properties = new Map<string, Map<string, ValueObject>>());
    for (const [key, values] of Object.entries(node)) {
      if (key === '@id') continue;
      let seen = properties.get(key);
      if (!seen) properties.set(key, seen = new Map<string, ValueObject>());
      for (const v of values as ValueObject[]) {
        const k = valueKey(v);
        if (seen.has(k)) continue;
        if (count === max) return null;
        seen.set(k, v);
        count++;
      }
    }
  }
  const nodes: NodeObject[] = [];
  for (const [id, properties] of byId) {
    const node = { '@id': id } as NodeObject;
    for (const [key, values] of properties) if (values.size) node[key] = [...values.values()];
    nodes.push(node);
  }
  nodes.sort((a, b) => (a['@id'] < b['@id'] ? -1 : a['@id'] > b['@id'] ? 1 : 0));
  return { nodes, count };
}

/** Compacts merged node objects (sorted by `@id`) with the prefixes; answers the JSON text. */
export function compactNodes(nodes: NodeObject[], prefixes: Record<string, string>): string {
  let doc: Record<string, unknown>;
  try {
    doc = compactWith(nodes, prefixContext(prefixes));
  } catch (err) {
    if (!(err instanceof Confused)) throw err;
    doc = compactWith(nodes, {});
  }
  return JSON.stringify(doc);
}
