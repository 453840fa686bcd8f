import { expect } from 'chai';
import oxigraph from 'oxigraph';
import jsonld from 'jsonld';
import { compactJsonLd, compactNodes, distinctJsonLd } from '../../../src/sandbox/jsonld.js';

/**
 * The sandbox's JSON-LD (Oxigraph's serializer + compaction with the
 * query's prefixes) must mean the same graph, and look like jsonld.js's
 * `compact` for ordinary results.
 */

const documentLoader = async (url: string): Promise<never> => { throw new Error(`no remote contexts (${url})`); };

const TURTLE = `
@prefix ex: <http://example.org/ns#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:a a ex:Thing, ex:Other ; rdfs:label "A", "Un"@fr, "3"^^<http://www.w3.org/2001/XMLSchema#integer> ;
  ex:link ex:b, _:n ; ex:json "{\\"k\\": [1, 2]}"^^<http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON> ;
  ex:quote "say \\"hi\\"\\n" ; <http://other.example/p> <http://other.example/x> .
ex:b rdfs:label "B" ; a "literal type" .
_:n ex:link ex:a .
`;

function expandedOf(turtle: string): { ox: string; ntriples: string } {
  const store = new oxigraph.Store();
  store.load(turtle, { format: 'text/turtle' });
  return {
    ox: store.dump({ format: 'application/ld+json', from_graph_name: oxigraph.defaultGraph() }),
    ntriples: store.dump({ format: 'application/n-triples', from_graph_name: oxigraph.defaultGraph() }),
  };
}

/** The graph a JSON-LD document means, canonicalized (blank nodes relabelled), as sorted N-Quads. */
async function canonical(doc: object | string): Promise<string> {
  const input = typeof doc === 'string' ? await jsonld.fromRDF(doc, { format: 'application/n-quads' }) : doc;
  return jsonld.canonize(input as jsonld.JsonLdDocument, { algorithm: 'URDNA2015', format: 'application/n-quads', documentLoader } as never) as unknown as Promise<string>;
}

describe('sandbox: JSON-LD answers', () => {
  const cases: Array<[string, Record<string, string>]> = [
    ['the query prefixes', { ex: 'http://example.org/ns#', rdfs: 'http://www.w3.org/2000/01/rdf-schema#' }],
    ['an empty prefix (@vocab)', { '': 'http://example.org/ns#' }],
    ['no prefixes', {}],
    ['a prefix without a gen-delim at its end', { ex: 'http://example.org/ns' }],
    ['a prefix named like a scheme', { http: 'http://example.org/' }],
  ];
  for (const [what, prefixes] of cases) {
    it(`means the same graph as the N-Triples, with ${what}`, async () => {
      const { ox, ntriples } = expandedOf(TURTLE);
      const doc = JSON.parse(compactJsonLd(ox, prefixes)) as object;
      expect(await canonical(doc)).to.equal(await canonical(ntriples));
    });
  }

  it('has the shape jsonld.js compact gives: context, @graph, @type, bare strings, single values', async () => {
    const prefixes = { ex: 'http://example.org/ns#', rdfs: 'http://www.w3.org/2000/01/rdf-schema#' };
    const turtle = TURTLE.replace(/_:n/g, 'ex:n').replace(/ex:json[^;]*;/, '');
    const { ox, ntriples } = expandedOf(turtle);
    const ours = JSON.parse(compactJsonLd(ox, prefixes)) as { '@graph': Array<Record<string, unknown>> };
    const theirs = await jsonld.compact(await jsonld.fromRDF(ntriples, { format: 'application/n-quads' }), prefixes, { documentLoader } as unknown as Parameters<typeof jsonld.compact>[2]) as unknown as { '@graph': Array<Record<string, unknown>> };
    const sortValues = (doc: { '@graph': Array<Record<string, unknown>> }) => doc['@graph'].map((node) => Object.fromEntries(
      Object.entries(node).map(([k, v]) => [k, Array.isArray(v) ? [...v].map((x) => JSON.stringify(x)).sort() : v])));
    expect(Object.keys(ours)).to.deep.equal(['@context', '@graph']);
    expect(sortValues(ours)).to.deep.equal(sortValues(theirs));
  });

  it('answers one node as the document itself, and nothing as the context alone', () => {
    const one = JSON.parse(compactJsonLd(expandedOf('<http://example.org/ns#a> <http://example.org/ns#p> "x" .').ox, { ex: 'http://example.org/ns#' }));
    expect(one).to.deep.equal({ '@context': { ex: 'http://example.org/ns#' }, '@id': 'ex:a', 'ex:p': 'x' });
    expect(JSON.parse(compactJsonLd('[]', { ex: 'http://example.org/ns#' }))).to.deep.equal({ '@context': { ex: 'http://example.org/ns#' } });
    expect(JSON.parse(compactJsonLd('[]', {}))).to.deep.equal({});
  });

  describe('from the engine\'s JSON-LD of a CONSTRUCT (distinctJsonLd)', () => {
    const prefixes = { ex: 'http://example.org/ns#', rdfs: 'http://www.w3.org/2000/01/rdf-schema#' };
    // Each triple twice (the template repeats it) and ex:a's triples in several node objects (solution order).
    const query = `PREFIX ex: <http://example.org/ns#> CONSTRUCT { ?s ?p ?o . ?s ?p ?o . ex:a ex:seen ?o } WHERE { ?s ?p ?o }`;
    const answers = () => {
      const store = new oxigraph.Store();
      store.load(TURTLE, { format: 'text/turtle' });
      return {
        jsonLd: store.query(query, { results_format: 'application/ld+json' }) as string,
        ntriples: store.query(query, { results_format: 'application/n-triples' }) as string,
      };
    };
    const distinctLines = (nt: string) => new Set(nt.split('\n').filter(Boolean)).size;

    it('drops the repeats, merges each subject, and means the graph the N-Triples answer holds', async () => {
      const { jsonLd, ntriples } = answers();
      const nodes = distinctJsonLd(jsonLd, 1000)!;
      expect(nodes.count).to.equal(distinctLines(ntriples));
      expect(nodes.nodes.map((n) => n['@id'])).to.deep.equal([...new Set(nodes.nodes.map((n) => n['@id']))].sort());
      const doc = JSON.parse(compactNodes(nodes.nodes, prefixes)) as object;
      expect(await canonical(doc)).to.equal(await canonical(ntriples));
    });

    it('answers null when the distinct triples pass the limit, and counts exactly at it', () => {
      const { jsonLd, ntriples } = answers();
      const n = distinctLines(ntriples);
      expect(distinctJsonLd(jsonLd, n)?.count).to.equal(n);
      expect(distinctJsonLd(jsonLd, n - 1)).to.equal(null);
    });
  });
});
