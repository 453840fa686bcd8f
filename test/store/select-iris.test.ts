import { expect } from 'chai';
import { OxigraphStore } from '../../src/store/embedded/oxigraph-store.js';
import { sparql } from '../../src/rdf/sparql.js';

/** `selectIris`: the IRIs one variable of a SELECT binds, read from the engine's tab-separated answer. */
describe('store: selectIris', () => {
  const data = `<urn:s:1> <urn:p> <http://example.org/b> .
<urn:s:1> <urn:label> "a tab\\there, a line\\nbreak, <not an IRI>" .
<urn:s:2> <urn:p> <http://example.org/%C3%A9,a?x=1#y> .
<urn:s:2> <urn:label> "two" .
<urn:s:3> <urn:p> "a literal" .
<urn:s:4> <urn:p> _:b1 .
<urn:s:5> <urn:label> "no p" .
<urn:s:6> <urn:p> <http://example.org/é> .
`;

  it('answers the IRIs of the variable in row order, as select() does, skipping rows where it is unbound or not an IRI', async () => {
    const store = new OxigraphStore();
    await store.write([{ kind: 'load', graph: 'urn:g', format: 'application/n-triples', data }]);
    const query = sparql`SELECT ?s ?label ?o WHERE { GRAPH <urn:g> { ?s ?any ?x OPTIONAL { ?s <urn:p> ?o } OPTIONAL { ?s <urn:label> ?label } } } ORDER BY ?s ?o`;
    const fromJson = (await store.select(query)).flatMap((b) => (b.o?.type === 'uri' ? [b.o.value] : []));
    expect(fromJson).to.include('http://example.org/é');
    expect(await store.selectIris(query, 'o')).to.deep.equal(fromJson);
    expect(await store.selectIris(query, 's')).to.deep.equal((await store.select(query)).map((b) => b.s!.value));
    // One column alone, and an answer without rows.
    expect(await store.selectIris(sparql`SELECT DISTINCT ?o WHERE { GRAPH <urn:g> { ?s <urn:p> ?o FILTER isIRI(?o) } } ORDER BY ?o`, 'o'))
      .to.deep.equal(['http://example.org/%C3%A9,a?x=1#y', 'http://example.org/b', 'http://example.org/é']);
    expect(await store.selectIris(sparql`SELECT ?o WHERE { GRAPH <urn:none> { ?s ?p ?o } }`, 'o')).to.deep.equal([]);
  });

  it('refuses a variable the query does not select', async () => {
    const store = new OxigraphStore();
    let error: unknown;
    try { await store.selectIris(sparql`SELECT ?s WHERE { ?s ?p ?o }`, 'o'); } catch (err) { error = err; }
    expect(String(error)).to.match(/does not select \?o/);
  });
});
