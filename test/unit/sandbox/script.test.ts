import { expect } from 'chai';
import oxigraph from 'oxigraph';
import { Graphs } from '../../../src/rdf/graphs.js';
import { reaches } from '../../../src/sandbox/sandbox.js';
import { affectedBy } from '../../../src/store/write-reach.js';
import { limitedText, parseReadQuery } from '../../../src/sandbox/script.js';

describe('sandbox: which writes touch which workspace', () => {
  const graphs = new Graphs('https://ws.example/');
  const update = (sparql: string) => affectedBy({ kind: 'update', sparql }, graphs);

  it('finds the workspaces of the graphs an update names', () => {
    const hit = update(`INSERT DATA { GRAPH <${graphs.matrix('w1', 'm1')}> { <urn:a> <urn:b> <urn:c> } } ;
      DELETE WHERE { GRAPH <${graphs.packages('w2')}> { ?s ?p ?o } }`);
    expect(hit.all).to.equal(false);
    expect([...hit.workspaces.keys()].sort()).to.deep.equal(['w1', 'w2']);
    expect([...hit.workspaces.get('w1')!]).to.deep.equal(['matrices/m1']);
    expect(hit.system).to.equal(false);
  });

  it('re-syncs a knowledge view only for its matrices, extensions and the records choosing them', () => {
    const touches = (graph: string) => reaches(update(`INSERT DATA { GRAPH <${graph}> { <urn:a> <urn:b> <urn:c> } }`), 'w1', 'knowledge');
    expect(touches(graphs.matrix('w1', 'm1'))).to.equal(true);
    expect(touches(graphs.packages('w1'))).to.equal(true);
    expect(touches(graphs.extensions('w1'))).to.equal(true);
    expect(touches(graphs.extension('w1', 'x1'))).to.equal(true);
    expect(touches(graphs.derived('w1', 'm1'))).to.equal(false);
    expect(touches(graphs.slashCommands('w1'))).to.equal(false);
    expect(touches(graphs.iam('w1'))).to.equal(false);
    expect(touches(graphs.command('w1', 'c1'))).to.equal(false);
    expect(touches(graphs.matrix('w2', 'm1'))).to.equal(false);
    expect(touches(graphs.system)).to.equal(false);
    const all = (graph: string) => reaches(update(`INSERT DATA { GRAPH <${graph}> { <urn:a> <urn:b> <urn:c> } }`), 'w1', 'all');
    expect(all(graphs.slashCommands('w1'))).to.equal(true);
    expect(all(graphs.system)).to.equal(true);
    expect(all(graphs.iam('w2'))).to.equal(false);
  });

  it('finds the workspace of a load', () => {
    const hit = affectedBy({ kind: 'load', graph: graphs.extension('w3', 'x'), format: 'text/turtle', data: '' }, graphs);
    expect([...hit.workspaces.keys()]).to.deep.equal(['w3']);
  });

  it('marks system graph writes, which concern the administrators\' views', () => {
    const hit = update(`INSERT DATA { GRAPH <${graphs.system}> { <urn:a> <urn:b> "x" } }`);
    expect(hit.system).to.equal(true);
    expect(hit.all).to.equal(false);
  });

  it('reads no syntax inside string literals or comments', () => {
    const events = graphs.command('w1', 'c1');
    for (const quoted of [
      '"Matrix x: 3 triples for graph https://ws.example/workspaces/w2/matrices/m2"',
      "'GRAPH ?g moved; DROP ALL'",
      '"""a "quoted" GRAPH ?g, ""twice"" and COPY <urn:a> TO <urn:b>"""',
      "'''it's DROP ALL, over\nlines'''",
      '"escaped \\" GRAPH ?g \\\\"',
    ]) {
      const hit = update(`INSERT DATA { GRAPH <${events}> { <urn:e> <urn:message> ${quoted} } } # GRAPH ?g <${graphs.packages('w3')}>`);
      expect(hit.all, quoted).to.equal(false);
      expect([...hit.workspaces.keys()], quoted).to.deep.equal(['w1']);
    }
    // A literal hides nothing that follows it.
    const after = update(`INSERT DATA { GRAPH <${events}> { <urn:e> <urn:m> "a \\" GRAPH" } } ; DELETE WHERE { GRAPH ?g { ?s <urn:m> "x" } }`);
    expect(after.all).to.equal(true);
    const named = update(`INSERT DATA { GRAPH <${events}> { <urn:e> <urn:m> '''it''s''' } } ; INSERT DATA { GRAPH <${graphs.matrix('w2', 'm')}> { <urn:a> <urn:b> "#" } }`);
    expect([...named.workspaces.keys()].sort()).to.deep.equal(['w1', 'w2']);
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

describe('sandbox: a regenerated query means the same', () => {
  const store = new oxigraph.Store();
  store.load(`@prefix ex: <https://example.org/> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
    ex:a ex:knows ex:b ; rdfs:label "A \\"quoted\\"\\nline"@en , "Ä"@de ; ex:age 30 .
    ex:b ex:knows ex:c ; ex:age 40 ; ex:tag [ ex:name "blank" ] .
    ex:c ex:knows ex:a ; ex:age 50 .`, { format: 'text/turtle' });
  const run = (text: string) => (store.query(text) as Array<{ toString(): string }>).map(String).sort();
  const queries = [
    'PREFIX ex: <https://example.org/> CONSTRUCT { ?x ex:reaches ?y } WHERE { ?x ex:knows+ ?y }',
    'PREFIX ex: <https://example.org/> CONSTRUCT { ?x ex:pair ?y } WHERE { ?x ex:knows/ex:knows ?y FILTER(?x != ?y) }',
    'PREFIX ex: <https://example.org/> CONSTRUCT { ?x ex:older true } WHERE { ?x ex:age ?a FILTER(?a > 35 && !(?a = 45)) }',
    'PREFIX ex: <https://example.org/> CONSTRUCT { ex:stats ex:total ?n } WHERE { { SELECT (COUNT(*) AS ?n) WHERE { ?s ex:age ?a } } }',
    'PREFIX ex: <https://example.org/> CONSTRUCT { ?x ex:next ?y } WHERE { ?x ex:knows ?y } VALUES ?x { ex:a ex:b }',
    'PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> CONSTRUCT { ?x rdfs:label ?l } WHERE { ?x rdfs:label ?l FILTER(LANGMATCHES(LANG(?l), "en")) }',
    'PREFIX ex: <https://example.org/> CONSTRUCT { ?x ex:label ?u } WHERE { ?x ex:age ?a BIND(CONCAT(STR(?a), " \\"years\\"\\n") AS ?u) }',
    'PREFIX ex: <https://example.org/> CONSTRUCT { ?x ex:hasTag [ ex:named ?n ] } WHERE { ?x ex:tag [ ex:name ?n ] }',
    'PREFIX ex: <https://example.org/> CONSTRUCT { ?x a ex:Known } WHERE { ?x ^ex:knows ?y OPTIONAL { ?y ex:age ?a } MINUS { ?x ex:age 40 } }',
    'PREFIX ex: <https://example.org/> DESCRIBE ?x WHERE { ?x ex:age 30 }',
    'PREFIX ex: <https://example.org/> CONSTRUCT { ?x ex:knows ?y } WHERE { ?x ex:knows ?y } ORDER BY DESC(?x) OFFSET 1',
  ];
  for (const text of queries) {
    it(text.replace(/^PREFIX [^>]*> /, '').slice(0, 70), () => {
      const limited = limitedText(parseReadQuery(text), 1000);
      expect(limited).to.match(/LIMIT 1000/);
      // Blank node labels differ between runs; compare with them blanked out.
      const blank = (xs: string[]) => xs.map((x) => x.replace(/_:[\w-]+/g, '_:b')).sort();
      expect(blank(run(limited))).to.deep.equal(blank(run(text)));
      expect(run(text).length).to.be.greaterThan(0);
    });
  }
});
