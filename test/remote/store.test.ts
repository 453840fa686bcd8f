import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { Parser } from 'n3';
import { GATE_UNTIL, SparqlStore } from '../../src/store/remote/sparql-store.js';
import { SparqlClient } from '../../src/store/remote/sparql-client.js';
import { WriteRefusedError, type WriteOp } from '../../src/store/store.js';
import { GraphCache } from '../../src/store/graph-cache.js';
import { requireRemote } from '../helpers/remote.js';
import { sparql, iri, raw, integer } from '../../src/rdf/sparql.js';

const XSD = 'http://www.w3.org/2001/XMLSchema#';

/**
 * The remote store (WSM_STORE=sparql) through its QuadStore interface, on a
 * real engine (Virtuoso from `npm run virtuoso`). Each run works under its
 * own base IRI and drops its graphs afterwards.
 */
describe('store: remote SPARQL engine (WSM_STORE=sparql)', function () {
  this.timeout(600_000);
  let store: SparqlStore;
  let client: SparqlClient;
  let base: string;
  let settings: ReturnType<typeof requireRemote>;
  const g = (name: string) => `${base}${name}`;

  before(function () {
    settings = requireRemote(this);
    base = `https://remote-test.example/${randomUUID()}/`;
    store = new SparqlStore(settings, base);
    client = new SparqlClient(settings);
  });

  after(async () => {
    if (!store) return;
    const graphs = [...await store.graphNames(), store.generationsGraph];
    if (graphs.length) await store.write(graphs.map((graph) => ({ kind: 'update', sparql: sparql`DROP SILENT GRAPH ${iri(graph)}`, graphs: [graph] })));
  });

  const count = async (graph: string) =>
    Number((await store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH ${iri(graph)} { ?s ?p ?o } }`))[0]!.n!.value);

  it('round-trips typed literals, language tags and awkward strings through select, ask, construct and dumpGraph', async () => {
    const graph = g('literals');
    await store.write([{
      kind: 'load', graph, format: 'text/turtle',
      data: `@prefix xsd: <${XSD}> .
<urn:s> <urn:int> 42 ; <urn:dec> 1.5 ; <urn:bool> true ;
  <urn:date> "2026-11-24T04:00:00Z"^^xsd:dateTime ;
  <urn:label> "Arbeitsbereich"@de, "workspace"@en-GB ;
  <urn:text> "line one\\nline \\"two\\" \\\\ end" .`,
    }]);
    const rows = await store.select(sparql`SELECT ?p ?o WHERE { GRAPH ${iri(graph)} { <urn:s> ?p ?o } } ORDER BY ?p ?o`);
    const by = (p: string) => rows.filter((r) => r.p!.value === p).map((r) => r.o!);
    expect(by('urn:int')).to.deep.equal([{ type: 'literal', value: '42', datatype: `${XSD}integer` }]);
    expect(by('urn:dec')[0]).to.include({ type: 'literal', datatype: `${XSD}decimal` });
    expect(Number(by('urn:dec')[0]!.value)).to.equal(1.5);
    expect(by('urn:bool')[0]).to.include({ type: 'literal', datatype: `${XSD}boolean` });
    expect(by('urn:date')[0]).to.include({ type: 'literal', datatype: `${XSD}dateTime` });
    expect(by('urn:label').map((o) => `${o.value}@${o['xml:lang']!.toLowerCase()}`).sort()).to.deep.equal(['Arbeitsbereich@de', 'workspace@en-gb']);
    expect(by('urn:text')).to.deep.equal([{ type: 'literal', value: 'line one\nline "two" \\ end' }]);

    expect(await store.ask(sparql`ASK { GRAPH ${iri(graph)} { <urn:s> <urn:int> 42 } }`)).to.equal(true);
    expect(await store.ask(sparql`ASK { GRAPH ${iri(graph)} { <urn:s> <urn:label> "workspace"@en-GB } }`)).to.equal(true);
    expect(await store.ask(sparql`ASK { GRAPH ${iri(graph)} { <urn:s> <urn:int> 43 } }`)).to.equal(false);

    const constructed = new Parser({ format: 'N-Triples' }).parse(await store.construct(sparql`CONSTRUCT { ?s ?p ?o } WHERE { GRAPH ${iri(graph)} { ?s ?p ?o } }`));
    expect(constructed).to.have.length(7);
    const text = constructed.find((q) => q.predicate.value === 'urn:text')!;
    expect(text.object.value).to.equal('line one\nline "two" \\ end');
    const int = constructed.find((q) => q.predicate.value === 'urn:int')!;
    expect((int.object as { datatype: { value: string } }).datatype.value).to.equal(`${XSD}integer`);
    const dumped = new Parser({ format: 'N-Triples' }).parse(await store.dumpGraph(graph));
    expect(dumped).to.have.length(7);
  });

  it('selectIris answers the IRIs of one variable in row order, as select does, skipping literals and unbound rows', async () => {
    const graph = g('iris');
    await store.write([{ kind: 'load', graph, format: 'application/n-triples', data: '<urn:s:1> <urn:p> <http://example.org/a,b> .\n<urn:s:2> <urn:p> "literal" .\n<urn:s:3> <urn:q> <urn:x> .\n<urn:s:4> <urn:p> <http://example.org/c%C3%A9> .\n' }]);
    const query = sparql`SELECT ?s ?o WHERE { GRAPH ${iri(graph)} { ?s ?any ?x OPTIONAL { ?s <urn:p> ?o } } } ORDER BY ?s`;
    expect(await store.selectIris(query, 'o')).to.deep.equal(['http://example.org/a,b', 'http://example.org/c%C3%A9']);
    expect(await store.selectIris(query, 's')).to.deep.equal(['urn:s:1', 'urn:s:2', 'urn:s:3', 'urn:s:4']);
  });

  it('answers an empty graph as empty text from dumpGraph and construct, as the embedded store (the engine says "# Empty NT")', async () => {
    expect(await store.dumpGraph(g('never-written'))).to.equal('');
    expect(await store.construct(sparql`CONSTRUCT { ?s ?p ?o } WHERE { GRAPH ${iri(g('never-written'))} { ?s ?p ?o } }`)).to.equal('');
  });

  it('keeps text beyond ASCII intact through updates, loads and queries', async () => {
    const graph = g('unicode');
    await store.update(sparql`INSERT DATA { GRAPH ${iri(graph)} { <urn:a> <urn:name> "émile 😀" } }`, [graph]);
    await store.write([{ kind: 'load', graph, format: 'text/turtle', data: '<urn:b> <urn:name> "zoë"@fr .' }]);
    const rows = await store.select(sparql`SELECT ?o WHERE { GRAPH ${iri(graph)} { ?s <urn:name> ?o } } ORDER BY ?s`);
    expect(rows.map((r) => r.o!.value)).to.deep.equal(['émile 😀', 'zoë']);
    expect(await store.ask(sparql`ASK { GRAPH ${iri(graph)} { <urn:a> <urn:name> "émile 😀" } }`)).to.equal(true);
  });

  // Writes once went as SPARQL codepoint escapes, which Virtuoso refuses inside an IRI (SQ074): every one of these failed.
  it('keeps IRIs beyond ASCII intact through updates, loads, large writes and conditions', async () => {
    const graph = g('unicode-iris');
    const name = 'http://example.org/name';
    await store.update(sparql`INSERT DATA { GRAPH ${iri(graph)} { <http://example.org/café> ${iri(name)} "1" } }`, [graph]);
    await store.write([{ kind: 'load', graph, format: 'text/turtle', data: `<http://example.org/日本> <${name}> <http://example.org/😀> .` }]);
    // A large write (over one call, so staged in chunks) whose IRIs are beyond ASCII.
    let data = '';
    for (let i = 0; i < 8_000; i++) data += `<http://example.org/zoë/${i}> <${name}> "ü${i}" .\n`;
    await store.write([{ kind: 'load', graph, format: 'application/n-triples', data }]);
    expect(await store.writeIf({ ask: sparql`ASK { GRAPH ${iri(graph)} { <http://example.org/café> ?p ?o } }`, expect: true },
      [{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH ${iri(graph)} { <http://example.org/naïve> ${iri(name)} "2" } }`, graphs: [graph] }])).to.equal(true);
    expect(await store.writeIf({ ask: sparql`ASK { GRAPH ${iri(graph)} { <http://example.org/cafe> ?p ?o } }`, expect: true },
      [{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH ${iri(graph)} { <urn:never> ${iri(name)} "3" } }`, graphs: [graph] }])).to.equal(false);
    const subjects = await store.selectIris(sparql`SELECT ?s WHERE { GRAPH ${iri(graph)} { ?s ${iri(name)} ?o } FILTER(!STRSTARTS(STR(?s), "http://example.org/zo")) } ORDER BY ?s`, 's');
    expect(subjects).to.deep.equal(['http://example.org/café', 'http://example.org/naïve', 'http://example.org/日本']);
    expect(await count(graph)).to.equal(8_003);
    expect(await store.ask(sparql`ASK { GRAPH ${iri(graph)} { <http://example.org/zoë/7999> ${iri(name)} "ü7999" } }`)).to.equal(true);
    // The dump a query worker's copy is made from.
    const dumped = new Parser().parse(await store.dumpGraph(graph));
    expect(dumped.filter((q) => q.object.value === 'http://example.org/😀').map((q) => q.subject.value)).to.deep.equal(['http://example.org/日本']);
  });

  it('a multi-op write whose later op the engine refuses leaves nothing applied', async () => {
    const graph = g('atomic');
    await store.update(sparql`INSERT DATA { GRAPH ${iri(graph)} { <urn:s> <urn:p> "kept" } }`, [graph]);
    const version = store.version;
    const seen: string[][] = [];
    const off = store.onWrite((graphs) => seen.push([...graphs]));
    const ops: WriteOp[] = [
      { kind: 'update', sparql: sparql`DELETE DATA { GRAPH ${iri(graph)} { <urn:s> <urn:p> "kept" } }`, graphs: [graph] },
      { kind: 'load', graph, format: 'application/n-triples', data: '<urn:s> <urn:p> "added" .\n' },
      { kind: 'update', sparql: sparql`INSERT DATA { GRAPH ${iri(graph)} { <urn:s> <urn:p> "more" } }`, graphs: [graph] },
      // Not SPARQL: the engine refuses it when it gets there, after the first three ran.
      { kind: 'update', sparql: sparql`INSERT DATA { GRAPH ${iri(graph)} { <urn:s> <urn:p> } }`, graphs: [graph] },
    ];
    let refused: unknown;
    try { await store.write(ops); } catch (err) { refused = err; }
    off();
    expect(refused).to.be.instanceOf(WriteRefusedError);
    expect((refused as WriteRefusedError).opIndex).to.equal(3);
    const values = (await store.select(sparql`SELECT ?o WHERE { GRAPH ${iri(graph)} { <urn:s> <urn:p> ?o } }`)).map((r) => r.o!.value);
    expect(values).to.deep.equal(['kept']);
    expect(store.version).to.equal(version);
    expect(seen).to.deep.equal([]);
  });

  it('a conditional write applies only while its condition holds, in one engine transaction', async () => {
    const graph = g('conditional');
    const free = { ask: sparql`ASK { GRAPH ${iri(graph)} { ?c <urn:alias> "a" } }`, expect: false };
    const claim = (n: number): WriteOp[] => [{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH ${iri(graph)} { <urn:c:${raw(String(n))}> <urn:alias> "a" } }`, graphs: [graph] }];
    expect(await store.writeIf(free, claim(1))).to.equal(true);
    const version = store.version;
    const seen: string[][] = [];
    const off = store.onWrite((graphs) => seen.push([...graphs]));
    expect(await store.writeIf(free, claim(2))).to.equal(false);
    off();
    expect(store.version).to.equal(version);
    expect(seen).to.deep.equal([]);
    const holders = async () => (await store.select(sparql`SELECT ?c WHERE { GRAPH ${iri(graph)} { ?c <urn:alias> "a" } }`)).map((r) => r.c!.value);
    expect(await holders()).to.deep.equal(['urn:c:1']);
    // expect: true, and text beyond ASCII in the condition.
    await store.update(sparql`INSERT DATA { GRAPH ${iri(graph)} { <urn:c:1> <urn:label> "émile" } }`, [graph]);
    expect(await store.writeIf({ ask: sparql`ASK { GRAPH ${iri(graph)} { <urn:c:1> <urn:label> "émile" } }`, expect: true },
      [{ kind: 'update', sparql: sparql`DELETE DATA { GRAPH ${iri(graph)} { <urn:c:1> <urn:alias> "a" } }`, graphs: [graph] }])).to.equal(true);
    expect(await holders()).to.deep.equal([]);
    expect(await store.writeIf({ ask: sparql`ASK { GRAPH ${iri(graph)} { <urn:c:1> <urn:label> "zoë" } }`, expect: true }, claim(3))).to.equal(false);
    expect(await holders()).to.deep.equal([]);
  });

  it('an insert-if-absent anchored with VALUES applies once; the engine ignores a WHERE of nothing but FILTERs', async () => {
    const graph = g('anchored');
    const insert = (value: number, anchor: string) => sparql`INSERT { GRAPH ${iri(graph)} { <urn:s> <urn:createdAt> ${integer(value)} } }
      WHERE { ${raw(anchor)} FILTER NOT EXISTS { GRAPH ${iri(graph)} { <urn:s> <urn:createdAt> ?any } } }`;
    const values = async () => (await store.select(sparql`SELECT ?o WHERE { GRAPH ${iri(graph)} { <urn:s> <urn:createdAt> ?o } }`)).map((r) => r.o!.value).sort();
    await store.update(insert(1, 'VALUES ?condition { true }'), [graph]);
    await store.update(insert(2, 'VALUES ?condition { true }'), [graph]);
    expect(await values()).to.deep.equal(['1']);
    // What the anchor is for (and why the suite's check refuses the unanchored form): this engine inserts anyway.
    const unchecked = new SparqlStore(settings, base, { checkGraphs: false });
    await unchecked.update(insert(3, ''), [graph]);
    expect(await values()).to.deep.equal(['1', '3']);
  });

  it('20 racing conditional claims of one alias from separate store clients: exactly one applies', async () => {
    const graph = g('conditional-race');
    // Separate SparqlStore objects: nothing is shared in this process but the engine, as with several instances.
    const stores = Array.from({ length: 20 }, () => new SparqlStore(settings, base));
    const results = await Promise.all(stores.map(async (one, n) => {
      if (await one.ask(sparql`ASK { GRAPH ${iri(graph)} { ?c <urn:alias> "x" } }`)) return false;
      return one.writeIf({ ask: sparql`ASK { GRAPH ${iri(graph)} { ?c <urn:alias> "x" } }`, expect: false },
        [{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH ${iri(graph)} { <urn:c:${raw(String(n))}> <urn:alias> "x" } }`, graphs: [graph] }]);
    }));
    expect(results.filter(Boolean)).to.have.length(1);
    expect(await count(graph)).to.equal(1);
  });

  it('a large conditional write whose condition fails leaves no staging graph behind', async () => {
    const graph = g('conditional-large');
    await store.update(sparql`INSERT DATA { GRAPH ${iri(g('conditional-marker'))} { <urn:m> <urn:p> 1 } }`, [g('conditional-marker')]);
    let data = '';
    for (let i = 0; i < 12_000; i++) data += `<urn:l:${i}> <urn:p:n> "${i}" .\n`;
    const applied = await store.writeIf({ ask: sparql`ASK { GRAPH ${iri(g('conditional-marker'))} { <urn:m> <urn:p> 1 } }`, expect: false },
      [{ kind: 'load', graph, format: 'application/n-triples', data }]);
    expect(applied).to.equal(false);
    expect(await count(graph)).to.equal(0);
    const staged = await store.select(sparql`SELECT ?g WHERE { GRAPH ?g { ?s ?p ?o } FILTER(STRSTARTS(STR(?g), ${raw(JSON.stringify(`${base}staging/`))})) } LIMIT 1`);
    expect(staged).to.deep.equal([]);
  });

  it('a load that does not parse is refused before anything is sent', async () => {
    const graph = g('unparsed');
    let refused: unknown;
    try {
      await store.write([
        { kind: 'update', sparql: sparql`INSERT DATA { GRAPH ${iri(graph)} { <urn:s> <urn:p> "first" } }`, graphs: [graph] },
        { kind: 'load', graph, format: 'text/turtle', data: '<urn:s> <urn:p> "unterminated .' },
      ]);
    } catch (err) { refused = err; }
    expect(refused).to.be.instanceOf(WriteRefusedError);
    expect((refused as WriteRefusedError).opIndex).to.equal(1);
    expect(await count(graph)).to.equal(0);
  });

  // A reader polls beside the write. It once hung past the client's 120 s timeout: not behind the move (it
  // started after the move had committed) but on the plan Virtuoso kept for the count's text from when the
  // graph was empty; reads now carry the plan epoch each large write sets (SparqlStore.read).
  it('loads 100,000 triples in bounded chunks, visible at once or not at all', async () => {
    const graph = g('big');
    const triples = 100_000;
    let data = '';
    for (let i = 0; i < triples; i++) data += `<urn:big:${i}> <urn:p:n> "${i}"^^<${XSD}integer> .\n`;
    // Watch the target graph and the staging area while the load runs.
    const targetCounts: number[] = [];
    const stagedCounts: number[] = [];
    let done = false;
    const watch = (async () => {
      while (!done) {
        targetCounts.push(await count(graph));
        const staged = await store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } FILTER(STRSTARTS(STR(?g), ${raw(JSON.stringify(`${base}staging/`))})) }`);
        stagedCounts.push(Number(staged[0]!.n!.value));
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    try {
      await store.write([
        { kind: 'update', sparql: sparql`INSERT DATA { GRAPH ${iri(g('big-marker'))} { <urn:big> <urn:p:loaded> true } }`, graphs: [g('big-marker')] },
        { kind: 'load', graph, format: 'application/n-triples', data },
      ]);
    } finally {
      done = true;
      await watch;
    }
    // Never a partial target: empty until the final transaction, then whole.
    expect(targetCounts.every((n) => n === 0 || n === triples), `target counts seen: ${[...new Set(targetCounts)].join(', ')}`).to.equal(true);
    // Chunked: the staging area was seen part-filled (neither empty nor whole).
    expect(stagedCounts.some((n) => n > 0 && n < triples), `staging counts seen: ${[...new Set(stagedCounts)].join(', ')}`).to.equal(true);
    expect(await count(graph)).to.equal(triples);
    expect(await store.ask(sparql`ASK { GRAPH ${iri(g('big-marker'))} { <urn:big> <urn:p:loaded> true } }`)).to.equal(true);
    expect(await store.ask(sparql`ASK { GRAPH ${iri(graph)} { <urn:big:99999> <urn:p:n> 99999 } }`)).to.equal(true);
    // The staging graphs are gone and never listed.
    const names = await store.graphNames();
    expect(names.filter((n) => n.includes('/staging/'))).to.deep.equal([]);
    const staged = await store.select(sparql`SELECT ?g WHERE { GRAPH ?g { ?s ?p ?o } FILTER(STRSTARTS(STR(?g), ${raw(JSON.stringify(`${base}staging/`))})) } LIMIT 1`);
    expect(staged).to.deep.equal([]);
    // Keep the following tests' scans small.
    await store.update(sparql`DROP SILENT GRAPH ${iri(graph)}`, [graph]);
  });

  it('keeps blank nodes whole: nested nodes, lists, and distinct nodes per load', async () => {
    const graph = g('bnodes');
    await store.write([{
      kind: 'load', graph, format: 'text/turtle',
      data: `<urn:doc> <urn:author> [ <urn:name> "Ada" ; <urn:address> [ <urn:city> "London" ] ] ;
  <urn:steps> ( "one" "two" "three" ) .`,
    }]);
    const city = await store.select(sparql`SELECT ?name ?city WHERE { GRAPH ${iri(graph)} { <urn:doc> <urn:author> ?a . ?a <urn:name> ?name ; <urn:address>/<urn:city> ?city } }`);
    expect(city.map((r) => [r.name!.value, r.city!.value])).to.deep.equal([['Ada', 'London']]);
    expect(city.length).to.equal(1);
    const steps = await store.select(sparql`PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
      SELECT ?item WHERE { GRAPH ${iri(graph)} { <urn:doc> <urn:steps> ?l . ?l rdf:rest* ?cell . ?cell rdf:first ?item } }`);
    expect(steps.map((r) => r.item!.value).sort()).to.deep.equal(['one', 'three', 'two']);
    const author = await store.select(sparql`SELECT ?a WHERE { GRAPH ${iri(graph)} { <urn:doc> <urn:author> ?a } }`);
    expect(author[0]!.a!.type).to.equal('bnode');

    // The same label in two writes names two different nodes.
    const other = g('bnodes-two');
    await store.write([{ kind: 'load', graph: other, format: 'application/n-triples', data: '_:x <urn:p> "1" .\n' }]);
    await store.write([{ kind: 'load', graph: other, format: 'application/n-triples', data: '_:x <urn:p> "2" .\n' }]);
    const subjects = await store.select(sparql`SELECT DISTINCT ?s WHERE { GRAPH ${iri(other)} { ?s <urn:p> ?o } }`);
    expect(subjects).to.have.length(2);
  });

  it('keeps a blank-node component larger than one operation whole (a report of 700 results hanging off one node)', async () => {
    const graph = g('big-component');
    let data = '_:report <urn:p:type> <urn:c:Report> .\n';
    for (let i = 0; i < 700; i++) data += `_:report <urn:p:result> _:r${i} .\n_:r${i} <urn:p:focus> <urn:focus:${i}> .\n_:r${i} <urn:p:path> _:path .\n`;
    data += '_:path <urn:p:inverse> <urn:p:hasRole> .\n';
    await store.write([{ kind: 'load', graph, format: 'application/n-triples', data }]);
    const quads = new Parser().parse(await store.dumpGraph(graph));
    expect(quads).to.have.length(2 + 700 * 3);
    const roots = new Set(quads.filter((q) => q.predicate.value === 'urn:p:result').map((q) => q.subject.value));
    expect(roots.size, 'one report node').to.equal(1);
    expect(new Set(quads.filter((q) => q.predicate.value === 'urn:p:path').map((q) => q.object.value)).size, 'one path node').to.equal(1);
    expect(new Set(quads.filter((q) => q.predicate.value === 'urn:p:focus').map((q) => q.subject.value)).size, 'a node per result').to.equal(700);
    expect(quads.some((q) => q.predicate.value.includes('bnode-key')), 'no key left').to.equal(false);
    await store.update(sparql`DROP SILENT GRAPH ${iri(graph)}`, [graph]);
  });

  it('graphNames and size cover the service graphs only, never the engine\'s own', async () => {
    await store.update(sparql`INSERT DATA { GRAPH ${iri(g('listed'))} { <urn:s> <urn:p> "x" } }`, [g('listed')]);
    // The engine holds graphs of its own (Virtuoso: its schema graphs) in the same store.
    const all = JSON.parse(await client.query('SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }', 'application/sparql-results+json')) as { results: { bindings: Array<{ g: { value: string } }> } };
    const foreign = all.results.bindings.map((b) => b.g.value).filter((name) => !name.startsWith(base));
    expect(foreign.length, 'the engine has graphs of its own').to.be.greaterThan(0);
    const names = await store.graphNames();
    expect(names).to.include(g('listed'));
    for (const name of foreign) expect(names).to.not.include(name);
    const size = await store.size();
    let expected = 0;
    for (const name of names) expected += await count(name);
    expect(size).to.equal(expected);
    // Empty means no quad of the service: the engine's own graphs do not count, nor the store's records.
    expect(await store.isEmpty()).to.equal(false);
    const fresh = new SparqlStore(settings, `${base}empty-${Date.now()}/`);
    expect(await fresh.isEmpty()).to.equal(true);
  });
  it('a value cached by one instance is not answered after another instance wrote its graph (engine generations)', async () => {
    const graph = g('fresh');
    const other = g('fresh-other');
    // Two store clients: nothing shared in this process but the engine, as with two service instances.
    const mine = new SparqlStore(settings, base);
    const theirs = new SparqlStore(settings, base);
    const cache = new GraphCache<string[]>(mine);
    let reads = 0;
    const read = (name: string) => () => {
      reads++;
      return mine.select(sparql`SELECT ?o WHERE { GRAPH ${iri(name)} { <urn:s> <urn:p> ?o } } ORDER BY ?o`).then((rows) => rows.map((r) => r.o!.value));
    };
    await theirs.update(sparql`INSERT DATA { GRAPH ${iri(graph)} { <urn:s> <urn:p> "one" } }`, [graph]);
    expect(await cache.get('k', [graph], read(graph))).to.deep.equal(['one']);
    expect(await cache.get('other', [other], read(other))).to.deep.equal([]);
    expect(await cache.get('k', [graph], read(graph))).to.deep.equal(['one']);
    expect(reads, 'the second get of k is answered from the cache').to.equal(2);
    // Another instance writes the graph: the next get on this one reads again and sees it.
    await theirs.update(sparql`INSERT DATA { GRAPH ${iri(graph)} { <urn:s> <urn:p> "two" } }`, [graph]);
    expect(await cache.get('k', [graph], read(graph))).to.deep.equal(['one', 'two']);
    expect(reads).to.equal(3);
    // A write to another graph leaves the kept value in place; a conditional write that did not apply too.
    await theirs.update(sparql`INSERT DATA { GRAPH ${iri(other)} { <urn:s> <urn:p> "x" } }`, [other]);
    expect(await theirs.writeIf({ ask: sparql`ASK { GRAPH ${iri(graph)} { <urn:s> <urn:p> "two" } }`, expect: false },
      [{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH ${iri(graph)} { <urn:s> <urn:p> "three" } }`, graphs: [graph] }])).to.equal(false);
    expect(await cache.get('k', [graph], read(graph))).to.deep.equal(['one', 'two']);
    expect(reads).to.equal(3);
    expect(await cache.get('other', [other], read(other))).to.deep.equal(['x']);
    expect(reads).to.equal(4);
    // Gets made together share one generation read; a large (staged) write moves the generation too.
    let data = '';
    for (let i = 0; i < 12_000; i++) data += `<urn:s> <urn:p> "n${i} of a load large enough to be staged" .\n`;
    await theirs.write([{ kind: 'load', graph, format: 'application/n-triples', data }]);
    const both = await Promise.all([cache.get('k', [graph], read(graph)), cache.get('other', [other], read(other))]);
    expect(both[0]).to.have.length(12_002);
    expect(reads).to.equal(5);
    // The generations graph is the store's own: never listed among the service's graphs.
    expect(await mine.graphNames()).to.not.include(mine.generationsGraph);
  });
  it('instance leases: a large write staged under a lease that ended applies nothing, and orphaned staging graphs are dropped', async () => {
    const graph = g('leased');
    const mine = new SparqlStore(settings, base);
    const theirs = new SparqlStore(settings, base);
    const lease = await mine.startLease(60_000);
    const other = await theirs.startLease(60_000);
    let data = '';
    for (let i = 0; i < 12_000; i++) data += `<urn:l:${i}> <urn:p:n> "value ${i} of a load large enough to be staged" .\n`;
    // Held: the staged write applies whole.
    await mine.write([{ kind: 'load', graph, format: 'application/n-triples', data }]);
    expect(await count(graph)).to.equal(12_000);
    // Another instance finds the lease over (as it would after 60 s without renewal) and removes it.
    expect(await other.expire(Date.now() + 120_000)).to.deep.equal([lease.id]);
    let failed: unknown;
    try {
      await mine.write([{ kind: 'update', sparql: sparql`DROP SILENT GRAPH ${iri(graph)}`, graphs: [graph] }, { kind: 'load', graph, format: 'application/n-triples', data: data.replaceAll('urn:l:', 'urn:m:') }]);
    } catch (err) { failed = err; }
    expect(String(failed)).to.match(/lease ended/);
    const subjects = await store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH ${iri(graph)} { ?s ?p ?o FILTER(STRSTARTS(STR(?s), "urn:m:")) } }`);
    expect(Number(subjects[0]!.n!.value)).to.equal(0);
    expect(await count(graph)).to.equal(12_000);
    // A staging graph left by an instance without a lease goes; one of a live instance stays.
    const orphan = `${lease.stagingPrefix('gone-instance')}x`;
    const live = `${other.stagingPrefix(other.id)}y`;
    // (as a large write leaves them: the graph and its record, found without listing the store's graphs)
    await client.applyAtomically([
      `INSERT DATA { GRAPH <${orphan}> { <urn:a> <urn:b> 1 } }`, `INSERT DATA { ${lease.stagingRecord(orphan, 'gone-instance')} }`,
      `INSERT DATA { GRAPH <${live}> { <urn:a> <urn:b> 1 } }`, `INSERT DATA { ${other.stagingRecord(live, other.id)} }`,
    ]);
    expect(await theirs.dropOrphanStaging()).to.be.greaterThanOrEqual(1);
    expect(await count(orphan)).to.equal(0);
    expect(await count(live)).to.equal(1);
    // The orphan's record went with it; the live one's stays.
    expect(await count(lease.stagingRecords)).to.equal(1);
    await client.applyAtomically([`DROP SILENT GRAPH <${live}>`, `DELETE DATA { ${other.stagingRecord(live, other.id)} }`]);
    // Renewing a removed lease registers again under a new id.
    const lost = lease.id;
    await lease.renew();
    expect(lease.id).to.not.equal(lost);
    expect((await other.registered()).has(lease.id)).to.equal(true);
    await lease.close();
    await other.close();
    expect((await other.registered()).has(lease.id)).to.equal(false);
    await store.write([{ kind: 'update', sparql: sparql`DROP SILENT GRAPH ${iri(lease.graph)}`, graphs: [lease.graph] }]);
  });
  it('instance leases: a renewal goes through while a transaction that holds the lease\'s condition runs, and neither is rolled back', async () => {
    // A large write's final transaction asks the lease's condition (the record's type) first and holds
    // that read until it commits. A renewal that wrote the type again waited for it, or deadlocked with it.
    const mine = new SparqlStore(settings, base);
    const lease = await mine.startLease(60_000);
    const expiry = async () => Number((await client.query(`SELECT ?e WHERE { GRAPH <${lease.graph}> { <${lease.iri(lease.id)}> <https://w3id.org/wsm/ns#leaseExpiresAt> ?e } }`, 'application/sparql-results+json')
      .then((text) => JSON.parse(text) as { results: { bindings: Array<{ e: { value: string } }> } })).results.bindings[0]!.e.value);
    const held = g('held-by-lease');
    try {
      const before = await expiry();
      const order: string[] = [];
      // The condition, then 3 s of work in the same transaction; sent once (a deadlock would reject it).
      const transaction = client.applyAtomically(
        [`INSERT { GRAPH <${held}> { <urn:held> <urn:p> ?x } } WHERE { BIND(bif:delay(3) AS ?x) }`],
        { ask: lease.liveAsk(lease.id), expect: true }, 0,
      ).then((applied) => { order.push('transaction'); return applied; });
      await new Promise((resolve) => setTimeout(resolve, 500));
      await lease.renew();
      order.push('renewal');
      expect(await transaction).to.equal(true);
      expect(order, 'the renewal did not wait for the transaction').to.deep.equal(['renewal', 'transaction']);
      expect(await expiry()).to.be.greaterThan(before);
      expect((await lease.registered()).has(lease.id)).to.equal(true);
      expect(await count(held)).to.equal(1);
    } finally {
      await lease.close();
      await store.write([{ kind: 'update', sparql: sparql`DROP SILENT GRAPH ${iri(lease.graph)}`, graphs: [lease.graph] }]);
    }
  });
  it('instance leases: a renewal waits while a large write of any instance is in its final transaction, at most a third of the lease', async () => {
    // Renewals sent during a large write's final transaction were rolled back as deadlocked with it, or
    // made the engine roll it back: three instances renewing every third of a 5 s lease made a
    // 300,000-triple install lose its final transaction 10 times in a row, and once all of its retries.
    const mine = new SparqlStore(settings, base);
    const lease = await mine.startLease(6000);
    const expiry = async () => Number((await client.query(`SELECT ?e WHERE { GRAPH <${lease.graph}> { <${lease.iri(lease.id)}> <https://w3id.org/wsm/ns#leaseExpiresAt> ?e } }`, 'application/sparql-results+json')
      .then((text) => JSON.parse(text) as { results: { bindings: Array<{ e: { value: string } }> } })).results.bindings[0]!.e.value);
    const closing = `INSERT DATA { GRAPH <${mine.gateGraph}> { <${mine.gateGraph}/test-closing> <${GATE_UNTIL}> ${Date.now() + 60_000} } }`;
    try {
      // Another instance closes the gate, as a large write does before its final transaction.
      await client.applyAtomically([closing]);
      const before = await expiry();
      let renewed = false;
      const renewal = lease.renew().then(() => { renewed = true; });
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(renewed, 'the renewal waited').to.equal(false);
      expect(await expiry()).to.equal(before);
      // The write commits, opening the gate: the renewal goes.
      await client.applyAtomically([closing.replace('INSERT DATA', 'DELETE DATA')]);
      await renewal;
      expect(await expiry()).to.be.greaterThan(before);
      // A gate that stays closed (a writer that died) holds a renewal back a third of the lease at most.
      await client.applyAtomically([closing]);
      const held = await expiry();
      await lease.renew();
      expect(await expiry()).to.be.greaterThan(held);
    } finally {
      await client.applyAtomically([closing.replace('INSERT DATA', 'DELETE DATA')]);
      await lease.close();
      await store.write([{ kind: 'update', sparql: sparql`DROP SILENT GRAPH ${iri(lease.graph)}`, graphs: [lease.graph] }]);
    }
  });
});
