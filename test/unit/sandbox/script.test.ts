import { expect } from 'chai';
import oxigraph from 'oxigraph';
import { Graphs } from '../../../src/rdf/graphs.js';
import { affectedBy } from '../../../src/sandbox/sandbox.js';
import { limitedText, parseReadQuery } from '../../../src/sandbox/script.js';

describe('sandbox: which writes touch which workspace', () => {
  const graphs = new Graphs('https://ws.example/');
  const update = (sparql: string) => affectedBy({ kind: 'update', sparql }, graphs);

  it('finds the workspaces of the graphs an update names', () => {
    const hit = update(`INSERT DATA { GRAPH <${graphs.matrix('w1', 'm1')}> { <urn:a> <urn:b> <urn:c> } } ;
      DELETE WHERE { GRAPH <${graphs.packages('w2')}> { ?s ?p ?o } }`);
    expect(hit.all).to.equal(false);
    expect([...hit.workspaces].sort()).to.deep.equal(['w1', 'w2']);
    expect(hit.system).to.equal(false);
  });

  it('finds the workspace of a load', () => {
    const hit = affectedBy({ kind: 'load', graph: graphs.extension('w3', 'x'), format: 'text/turtle', data: '' }, graphs);
    expect([...hit.workspaces]).to.deep.equal(['w3']);
  });

  it('marks system graph writes, which concern the administrators\' views', () => {
    const hit = update(`INSERT DATA { GRAPH <${graphs.system}> { <urn:a> <urn:b> "x" } }`);
    expect(hit.system).to.equal(true);
    expect(hit.all).to.equal(false);
  });

  it('treats what it cannot tell as touching everything', () => {
    for (const sparql of [
      'DELETE WHERE { GRAPH ?g { ?s ?p ?o } }',
      'DROP ALL', 'CLEAR NAMED', 'drop silent default',
      'PREFIX g: <https://ws.example/workspaces/> INSERT DATA { GRAPH g:w1 { <urn:a> <urn:b> <urn:c> } }',
      'COPY <urn:a> TO <urn:b>',
      'INSERT DATA { GRAPH <urn:elsewhere> { <urn:a> <urn:b> <urn:c> } }',
    ]) expect(update(sparql).all, sparql).to.equal(true);
  });
});

describe('sandbox: the result limit of a query', () => {
  it('adds a LIMIT, keeps a lower one, lowers a higher one, and keeps the meaning', () => {
    const store = new oxigraph.Store();
    store.load('<urn:a> <urn:p> 1 , 2 , 3 , 4 , 5 .', { format: 'text/turtle' });
    const count = (text: string) => (store.query(text) as unknown[]).length;
    const plain = parseReadQuery('PREFIX p: <urn:> CONSTRUCT { ?s p:q ?o } WHERE { ?s p:p ?o } ORDER BY DESC(?o)');
    const limited = limitedText(plain, 2);
    expect(limited).to.match(/LIMIT 2/);
    expect(count(limited)).to.equal(2);
    const own = parseReadQuery('CONSTRUCT WHERE { ?s ?p ?o } LIMIT 1');
    expect(limitedText(own, 2)).to.equal(own.text);
    expect(count(limitedText(parseReadQuery('CONSTRUCT WHERE { ?s ?p ?o } OFFSET 1 LIMIT 10'), 3))).to.equal(3);
  });

  it('reports the dataset clauses and prefixes of a query', () => {
    const q = parseReadQuery('PREFIX ex: <https://example.org/> CONSTRUCT { ?s ?p ?o } FROM <urn:g> WHERE { ?s ?p ?o }');
    expect(q.hasDataset).to.equal(true);
    expect(q.prefixes).to.deep.equal({ ex: 'https://example.org/' });
    expect(parseReadQuery('ASK {}').hasDataset).to.equal(false);
  });
});
