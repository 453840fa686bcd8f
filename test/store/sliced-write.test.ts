import { expect } from 'chai';
import { openDurableStore } from '../../src/store/embedded/durable.js';
import { SLICE_BYTES } from '../../src/store/embedded/oxigraph-store.js';
import { nTriplesSlices } from '../../src/store/ntriples-slices.js';
import { ENCODE_SLICE_CHARS, encodeRecord, encodeRecordInSlices, scanJournal } from '../../src/store/journal.js';
import type { Binding, WriteOp } from '../../src/store/store.js';
import { GraphCache } from '../../src/store/graph-cache.js';
import { content, tempDir } from './helpers.js';
import { sparql, iri, type Sparql } from '../../src/rdf/sparql.js';

/** N-Triples of `n` triples, about 90 bytes each. */
function triples(n: number, tag = 's'): string {
  let out = '';
  for (let i = 0; i < n; i++) out += `<urn:${tag}:${i}> <urn:p:label> "Thing number ${i} of a large load, for slicing" .\n`;
  return out;
}

describe('store: large writes are applied in slices', function () {
  this.timeout(120_000);
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => ({ dir, cleanup } = await tempDir()));
  afterEach(async () => cleanup());

  it('cuts N-Triples only at line ends, keeping every line', () => {
    const data = triples(5000);
    const pieces = [...nTriplesSlices(data, 10_000)];
    expect(pieces.length).to.be.greaterThan(10);
    expect(pieces.join('')).to.equal(data);
    for (const p of pieces) expect(p.endsWith('\n')).to.equal(true);
  });

  it('keeps every blank node one node across slices, as the write read in one piece (and after a restart)', async () => {
    // A report node linked to every result, results with blank-node paths, an RDF list, a `_:` inside a literal and
    // an IRI, and lines without blank nodes between them: far more than one slice.
    let data = '_:report <urn:p:type> <urn:c:Report> .\n';
    for (let i = 0; i < 3000; i++) {
      data += `_:report <urn:p:result> _:r${i} .\n<urn:s:${i}> <urn:p:label> "plain line ${i}, the text _:not-a-node inside" .\n`;
      data += `_:r${i}\t<urn:p:path>  _:path${i % 7}.\n_:r${i} <urn:p:focus> <urn:f:_:${i}> .\n`;
    }
    for (let i = 0; i < 7; i++) data += `_:path${i} <urn:p:inverse> <urn:p:n${i}> .\n`;
    for (let i = 0; i < 2000; i++) data += `_:l${i} <urn:p:first> "${i}" .\n_:l${i} <urn:p:rest> ${i === 1999 ? '<urn:nil>' : `_:l${i + 1}`} .\n`;
    data += '<urn:s:list> <urn:p:items> _:l0 .\n';
    expect(data.length).to.be.greaterThan(SLICE_BYTES * 5);
    const shape = async (store: { select(q: Sparql): Promise<Binding[]> }) => {
      const n = async (q: Sparql) => Number((await store.select(q))[0]!.n!.value);
      return {
        reports: await n(sparql`SELECT (COUNT(DISTINCT ?r) AS ?n) WHERE { GRAPH <urn:g> { ?r <urn:p:result> ?x } }`),
        linked: await n(sparql`SELECT (COUNT(?x) AS ?n) WHERE { GRAPH <urn:g> { ?r <urn:p:type> <urn:c:Report> ; <urn:p:result> ?x . ?x <urn:p:focus> ?f ; <urn:p:path> ?p . ?p <urn:p:inverse> ?i } }`),
        paths: await n(sparql`SELECT (COUNT(DISTINCT ?p) AS ?n) WHERE { GRAPH <urn:g> { ?x <urn:p:path> ?p } }`),
        list: await n(sparql`SELECT (COUNT(?v) AS ?n) WHERE { GRAPH <urn:g> { <urn:s:list> <urn:p:items>/<urn:p:rest>* ?node . ?node <urn:p:first> ?v } }`),
        plain: await n(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH <urn:g> { ?s <urn:p:label> ?l } }`),
        all: await n(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH <urn:g> { ?s ?p ?o } }`),
      };
    };
    const whole = { reports: 1, linked: 3000, paths: 7, list: 2000, plain: 3000, all: data.split('\n').filter(Boolean).length };
    const store = await openDurableStore(dir);
    await store.write([{ kind: 'load', graph: 'urn:g', format: 'application/n-triples', data }]);
    expect(await shape(store)).to.deep.equal(whole);
    await store.close();
    const reopened = await openDurableStore(dir);
    expect(await shape(reopened)).to.deep.equal(whole);
    await reopened.close();
  });

  it('lets the event loop turn while it applies, orders later writes after it, and journals it whole', async () => {
    const store = await openDurableStore(dir);
    await store.update(sparql`INSERT DATA { GRAPH <urn:g:big> { <urn:old> <urn:p:label> "old" } }`, ['urn:g:big']);
    const data = triples(20_000);
    expect(data.length).to.be.greaterThan(SLICE_BYTES * 8);
    const version = store.version;

    let turns = 0;
    const ticker = setInterval(() => { turns++; }, 0);
    const big = store.write([
      { kind: 'update', sparql: sparql`DROP SILENT GRAPH <urn:g:big>`, graphs: ['urn:g:big'] },
      { kind: 'load', graph: 'urn:g:big', format: 'application/n-triples', data },
    ]);
    // Issued while the big write is being applied: must apply after all of it (else slices would follow the DROP).
    const later = store.write([{ kind: 'update', sparql: sparql`DROP SILENT GRAPH <urn:g:big> ; INSERT DATA { GRAPH <urn:g:big> { <urn:after> <urn:p:label> "after" } }`, graphs: ['urn:g:big'] }]);
    await Promise.all([big, later]);
    clearInterval(ticker);

    expect(turns, 'timers ran between slices').to.be.greaterThan(5);
    expect(store.version).to.equal(version + 2);
    const rows = await store.select(sparql`SELECT ?s WHERE { GRAPH <urn:g:big> { ?s ?p ?o } }`);
    expect(rows.map((b) => b.s!.value)).to.deep.equal(['urn:after']);

    // Without the later write, the journal replays the big one whole.
    await store.write([
      { kind: 'update', sparql: sparql`DROP SILENT GRAPH <urn:g:big>`, graphs: ['urn:g:big'] },
      { kind: 'load', graph: 'urn:g:big', format: 'application/n-triples', data },
    ]);
    expect(await store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH <urn:g:big> { ?s ?p ?o } }`)).to.have.nested.property('[0].n.value', '20000');
    const before = content(store);
    await store.close();
    const reopened = await openDurableStore(dir);
    expect(content(reopened)).to.deep.equal(before);
    await reopened.close();
  });
});

describe('store: a large write becomes visible all at once', function () {
  this.timeout(120_000);
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => ({ dir, cleanup } = await tempDir()));
  afterEach(async () => cleanup());

  it('never shows a reader polling during a sliced write a part of it, and the write survives a restart whole', async () => {
    const store = await openDurableStore(dir);
    const graph = 'https://workspaces.local/workspaces/w1/matrices/m1';
    const records = 'https://workspaces.local/workspaces/w1/packages';
    await store.write([
      { kind: 'load', graph, format: 'application/n-triples', data: triples(3, 'old') },
      { kind: 'update', sparql: sparql`INSERT DATA { GRAPH ${iri(records)} { <urn:record> <urn:p:version> "1" } }`, graphs: [records] },
    ]);
    const graphsBefore = await store.graphNames();
    const data = triples(20_000);
    expect(data.length).to.be.greaterThan(SLICE_BYTES * 8);

    // What a reader sees, polled on every event-loop turn while the write is under way; by
    // queryRaw, which no answer cache serves (a cached SELECT answer could hide a partial state).
    const ask = async (query: Sparql) => (JSON.parse(await store.queryRaw(query, 'application/sparql-results+json') as string) as { results: { bindings: Binding[] } }).results.bindings;
    const seen = new Set<string>();
    const strays = new Set<string>();
    let polls = 0;
    let writing = true;
    const poll = async () => {
      while (writing) {
        // One query, so one state: two reads could straddle the publication (the count before it, the version after).
        const [row] = await ask(sparql`SELECT ?n ?v WHERE {
          { SELECT (COUNT(*) AS ?n) WHERE { GRAPH ${iri(graph)} { ?s ?p ?o } } }
          { SELECT (GROUP_CONCAT(?x; separator="+") AS ?v) WHERE { GRAPH ${iri(records)} { <urn:record> <urn:p:version> ?x } } }
        }`);
        seen.add(`${row!.n!.value} triples, version ${row!.v!.value}`);
        for (const g of await store.graphNames()) if (!graphsBefore.includes(g) && g !== graph) strays.add(g);
        polls++;
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    const reader = poll();
    await store.write([
      { kind: 'update', sparql: sparql`DROP SILENT GRAPH ${iri(graph)}`, graphs: [graph] },
      { kind: 'load', graph, format: 'application/n-triples', data },
      { kind: 'update', sparql: sparql`DELETE WHERE { GRAPH ${iri(records)} { <urn:record> <urn:p:version> ?v } } ; INSERT DATA { GRAPH ${iri(records)} { <urn:record> <urn:p:version> "2" } }`, graphs: [records] },
    ]);
    writing = false;
    await reader;

    // Several polls while the write was applied (a few only in the read-delay mode, where each read waits for timers).
    expect(polls, 'the reader ran while the write was applied').to.be.greaterThan(1);
    expect([...seen].sort()).to.deep.equal(['20000 triples, version 2', '3 triples, version 1'].filter((s) => seen.has(s)).sort());
    expect(seen.has('3 triples, version 1'), 'the reader saw the state before').to.equal(true);
    expect([...strays], 'no graph but those of the store and the write is ever listed').to.deep.equal([]);
    expect(await store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH ${iri(graph)} { ?s ?p ?o } }`)).to.have.nested.property('[0].n.value', '20000');
    expect(store.raw.size, 'nothing but the write was added').to.equal(20_001);
    const before = content(store);
    await store.close();
    const reopened = await openDurableStore(dir);
    expect(content(reopened)).to.deep.equal(before);
    await reopened.close();
  });
});

describe('store: the read cache during a large write', function () {
  this.timeout(120_000);
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => ({ dir, cleanup } = await tempDir()));
  afterEach(async () => cleanup());

  it('keeps answering a cached read while a large write to its graph is published, and drops it once the write is visible', async () => {
    const store = await openDurableStore(dir);
    const graph = 'urn:g:cached';
    await store.update(sparql`INSERT DATA { GRAPH ${iri(graph)} { <urn:record> <urn:p:version> "1" } }`, [graph]);
    const cache = new GraphCache<string>(store);
    const read = async () => (await store.select(sparql`SELECT ?v WHERE { GRAPH ${iri(graph)} { <urn:record> <urn:p:version> ?v } }`))[0]!.v!.value;
    expect(await cache.get('version', [graph], read)).to.equal('1');

    // Polled on every event-loop turn while the write is checked, journaled and published.
    const answers = new Set<string>();
    let writing = true;
    let polls = 0;
    const poll = (async () => {
      while (writing) {
        const hit = cache.peek('version');
        answers.add(hit.found ? `cached ${hit.value}` : 'not cached');
        polls++;
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    await store.write([
      { kind: 'update', sparql: sparql`DELETE WHERE { GRAPH ${iri(graph)} { <urn:record> <urn:p:version> ?v } } ; INSERT DATA { GRAPH ${iri(graph)} { <urn:record> <urn:p:version> "2" } }`, graphs: [graph] },
      { kind: 'load', graph, format: 'application/n-triples', data: triples(20_000) },
    ]);
    writing = false;
    await poll;
    expect(polls).to.be.greaterThan(5);
    // Until the write was whole, the kept answer was the store's answer (nothing of the write was visible).
    expect([...answers]).to.deep.equal(['cached 1']);
    expect(cache.peek('version').found, 'dropped once the write is visible').to.equal(false);
    expect(await cache.get('version', [graph], read)).to.equal('2');
    await store.close();
  });
});

describe('journal: a large record is encoded in slices', () => {
  it('gives the bytes of the one-piece encoding, escapes and surrogate pairs across slice ends included', async () => {
    // Escapes, a quote, a backslash, control characters and astral characters (surrogate pairs) at
    // every offset mod 7, so some pair straddles a slice end.
    const unit = 'a"b\\c\nd\te\u0001f\u{1F600}g';
    let data = '';
    while (data.length < ENCODE_SLICE_CHARS * 2 + 5) data += unit;
    const ops: WriteOp[] = [
      { kind: 'update', sparql: sparql`DROP SILENT GRAPH <urn:g:big>`, graphs: ['urn:g:big'] },
      { kind: 'load', graph: 'urn:g:big', format: 'application/n-triples', data },
      { kind: 'load', graph: 'urn:g:small', format: 'application/n-triples', data: '<urn:a> <urn:b> "c" .\n' },
    ];
    const at = Date.UTC(2026, 11, 6, 12, 0, 0, 250);
    const sliced = Buffer.concat(await encodeRecordInSlices(42, ops, at));
    expect(sliced.equals(encodeRecord(42, ops, at))).to.equal(true);
    const scan = scanJournal(sliced);
    expect(scan.records).to.have.length(1);
    expect(scan.records[0]!.seq).to.equal(42);
    expect(scan.records[0]!.at).to.equal(at);
    expect(scan.records[0]!.ops).to.deep.equal(ops);
  });
});
