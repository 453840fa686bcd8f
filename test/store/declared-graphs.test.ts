import { expect } from 'chai';
import { OxigraphStore } from '../../src/store/embedded/oxigraph-store.js';
import { UndeclaredGraphError, graphsChangedBy } from '../../src/store/declared-graphs.js';
import { DEFAULT_GRAPH } from '../../src/store/store.js';
import { sparql, raw } from '../../src/rdf/sparql.js';

/** Every write declares the graphs it may change; the test suite's store refuses a declaration that does not cover them. */
describe('store: write declarations are checked in the test suite', () => {
  const changed = (sparql: string) => {
    const found = graphsChangedBy(sparql);
    return 'graphs' in found ? [...found.graphs].sort() : found.unresolved;
  };

  it('finds the graphs an update may change from its parsed form, not from its text', () => {
    expect(changed('PREFIX g: <urn:g:> INSERT DATA { GRAPH g:a { <urn:s> <urn:p> "GRAPH <urn:g:hidden>" } } # GRAPH <urn:g:comment>')).to.deep.equal(['urn:g:a']);
    expect(changed('DELETE { GRAPH <urn:g:a> { ?s ?p ?o } } INSERT { GRAPH <urn:g:b> { ?s ?p 1 } } WHERE { GRAPH <urn:g:c> { ?s ?p ?o } }')).to.deep.equal(['urn:g:a', 'urn:g:b']);
    expect(changed('WITH <urn:g:w> DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }')).to.deep.equal(['urn:g:w']);
    expect(changed('MOVE SILENT <urn:g:from> TO <urn:g:to> ; COPY <urn:g:x> TO <urn:g:y> ; DROP SILENT GRAPH <urn:g:d>')).to.deep.equal(['urn:g:d', 'urn:g:from', 'urn:g:to', 'urn:g:y']);
    expect(changed('INSERT DATA { <urn:s> <urn:p> 1 }')).to.deep.equal([DEFAULT_GRAPH]);
    expect(changed('DELETE WHERE { GRAPH ?g { ?s ?p ?o } }')).to.match(/variable \?g/);
    expect(changed('DROP ALL')).to.match(/ALL/);
    expect(changed('INSERT DATA { GRAPH <urn:g:a> { <urn:s> <urn:p> ')).to.deep.equal([]); // refused by the engine too: changes nothing
  });

  it('refuses a write that changes a graph it did not declare, before applying anything', async () => {
    const store = new OxigraphStore(undefined, undefined, { checkGraphs: true });
    await store.update(sparql`INSERT DATA { GRAPH <urn:g:a> { <urn:s> <urn:p> 1 } }`, ['urn:g:a']);
    let error: unknown;
    try {
      await store.write([
        { kind: 'update', sparql: sparql`INSERT DATA { GRAPH <urn:g:a> { <urn:s> <urn:p> 2 } }`, graphs: ['urn:g:a'] },
        { kind: 'update', sparql: sparql`INSERT DATA { GRAPH <urn:g:b> { <urn:s> <urn:p> 3 } }`, graphs: ['urn:g:a'] },
      ]);
    } catch (err) {
      error = err;
    }
    expect(error).to.be.instanceOf(UndeclaredGraphError);
    expect((error as Error).message).to.contain('op 2 changes <urn:g:b> without declaring it');
    expect(await store.select(sparql`SELECT ?o WHERE { GRAPH ?g { ?s ?p ?o } }`)).to.have.length(1);
    let variable: unknown;
    await store.update(sparql`DELETE WHERE { GRAPH ?g { ?s ?p ?o } }`, ['urn:g:a']).catch((err: unknown) => { variable = err; });
    expect(variable).to.be.instanceOf(UndeclaredGraphError);
    expect(await store.select(sparql`SELECT ?o WHERE { GRAPH ?g { ?s ?p ?o } }`)).to.have.length(1);
  });

  it('refuses a WHERE or a condition whose group holds nothing but FILTERs (Virtuoso ignores them), before applying anything', async () => {
    const store = new OxigraphStore(undefined, undefined, { checkGraphs: true });
    const insert = (where: string) => sparql`INSERT { GRAPH <urn:g:a> { <urn:s> <urn:p> 2 } } WHERE { ${raw(where)} }`;
    const notThere = 'FILTER NOT EXISTS { GRAPH <urn:g:a> { <urn:s> <urn:p> ?o } }';
    expect(changed(insert(notThere))).to.match(/nothing but FILTERs/);
    expect(changed(insert(`OPTIONAL { ${notThere} }`))).to.match(/nothing but FILTERs/);
    expect(changed(insert(`VALUES ?condition { true } ${notThere}`))).to.deep.equal(['urn:g:a']);
    let refused: unknown;
    await store.update(insert(notThere), ['urn:g:a']).catch((err: unknown) => { refused = err; });
    expect(refused).to.be.instanceOf(UndeclaredGraphError);
    expect((refused as Error).message).to.contain('VALUES ?condition { true }');
    let condition: unknown;
    await store.writeIf({ ask: sparql`ASK { ${raw(notThere)} }`, expect: true },
      [{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH <urn:g:a> { <urn:s> <urn:p> 3 } }`, graphs: ['urn:g:a'] }])
      .catch((err: unknown) => { condition = err; });
    expect((condition as Error).message).to.contain('the condition of a conditional write');
    expect(await store.select(sparql`SELECT ?o WHERE { GRAPH ?g { ?s ?p ?o } }`)).to.have.length(0);
    expect(await store.writeIf({ ask: sparql`ASK { VALUES ?condition { true } ${raw(notThere)} }`, expect: true },
      [{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH <urn:g:a> { <urn:s> <urn:p> 3 } }`, graphs: ['urn:g:a'] }])).to.equal(true);
  });

  it('is on in this suite', () => {
    expect(process.env.WSM_TEST_CHECK_GRAPHS).to.equal('1');
  });
});
