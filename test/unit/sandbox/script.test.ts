import { expect } from 'chai';
import oxigraph from 'oxigraph';
import { Graphs } from '../../../src/rdf/graphs.js';
import { reaches } from '../../../src/sandbox/sandbox.js';
import { limitedText, parseReadQuery } from '../../../src/sandbox/script.js';

describe('sandbox: which writes touch which workspace (from the graphs a write declares)', () => {
  const graphs = new Graphs('https://ws.example/');
  const declared = (...names: string[]) => graphs.placesOf(names);

  it('places the graphs by workspace', () => {
    const hit = declared(graphs.matrix('w1', 'm1'), graphs.packages('w2'));
    expect([...hit.workspaces.keys()].sort()).to.deep.equal(['w1', 'w2']);
    expect([...hit.workspaces.get('w1')!]).to.deep.equal(['matrices/m1']);
    expect(hit.system).to.equal(false);
  });

  it('re-syncs a knowledge view only for its matrices, extensions and the records choosing them', () => {
    const touches = (graph: string) => reaches(declared(graph), 'w1', 'knowledge');
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
    const all = (graph: string) => reaches(declared(graph), 'w1', 'all');
    expect(all(graphs.slashCommands('w1'))).to.equal(true);
    expect(all(graphs.system)).to.equal(true);
    expect(all(graphs.iam('w2'))).to.equal(false);
    expect(all(graphs.registry)).to.equal(false);
  });

  it('marks system graph writes, which concern the administrators\' views, and places nothing outside the base', () => {
    const hit = declared(graphs.system, 'urn:x-wsm-staging:1', 'https://ws.example/workspaces/');
    expect(hit.system).to.equal(true);
    expect(hit.workspaces.size).to.equal(0);
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
