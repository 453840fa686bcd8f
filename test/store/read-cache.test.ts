import { expect } from 'chai';
import { OxigraphStore } from '../../src/store/embedded/oxigraph-store.js';
import { openDurableStore } from '../../src/store/embedded/durable.js';
import { GraphCache } from '../../src/store/graph-cache.js';
import { tempDir } from './helpers.js';
import { sparql, iri, literal, raw } from '../../src/rdf/sparql.js';

/** The store keeps SELECT and ASK answers between writes; every write, even a failed one, empties them. */
describe('store: answers kept between writes', () => {
  const names = async (store: OxigraphStore) => (await store.select(sparql`SELECT ?o WHERE { GRAPH <urn:g> { <urn:s> <urn:p> ?o } } ORDER BY ?o`)).map((b) => b.o!.value);
  const has = async (store: OxigraphStore, o: string) => await store.ask(sparql`ASK { GRAPH <urn:g> { <urn:s> <urn:p> "${raw(o)}" } }`);

  it('answers what the store holds after each kind of write', async () => {
    const store = new OxigraphStore();
    expect(await names(store)).to.deep.equal([]);
    expect(await has(store, 'a')).to.equal(false);
    await store.update(sparql`INSERT DATA { GRAPH <urn:g> { <urn:s> <urn:p> "a" } }`, ['urn:g']);
    expect(await names(store)).to.deep.equal(['a']);
    expect(await has(store, 'a')).to.equal(true);
    await store.write([{ kind: 'load', graph: 'urn:g', format: 'application/n-triples', data: '<urn:s> <urn:p> "b" .\n' }]);
    expect(await names(store)).to.deep.equal(['a', 'b']);
    await store.update(sparql`DELETE DATA { GRAPH <urn:g> { <urn:s> <urn:p> "a" } }`, ['urn:g']);
    expect(await names(store)).to.deep.equal(['b']);
    expect(await has(store, 'a')).to.equal(false);
  });

  it('forgets its answers on a write whose later op fails after an earlier one applied', async () => {
    const store = new OxigraphStore();
    expect(await names(store)).to.deep.equal([]);
    let failed = false;
    try {
      await store.write([
        { kind: 'update', sparql: sparql`INSERT DATA { GRAPH <urn:g> { <urn:s> <urn:p> "c" } }`, graphs: ['urn:g'] },
        { kind: 'load', graph: 'urn:g', format: 'text/turtle', data: 'this is not turtle' },
      ]);
    } catch {
      failed = true;
    }
    expect(failed).to.equal(true);
    // Whatever the store holds now, the answer says it (the update had applied).
    const direct = store.raw.query('SELECT ?o WHERE { GRAPH <urn:g> { <urn:s> <urn:p> ?o } }') as Array<Map<string, { value: string }>>;
    expect(await names(store)).to.deep.equal(direct.map((m) => m.get('o')!.value).sort());
  });

  it('keeps answers apart by scope, and a caller changing its answer cannot change the next one', async () => {
    const { dir, cleanup } = await tempDir();
    const store = await openDurableStore(dir);
    try {
      await store.update(sparql`INSERT DATA { GRAPH <urn:g1> { <urn:s> <urn:p> "one" } GRAPH <urn:g2> { <urn:s> <urn:p> "two" } }`, ['urn:g1', 'urn:g2']);
      const q = sparql`SELECT ?o WHERE { <urn:s> <urn:p> ?o }`;
      expect((await store.select(q, { defaultGraphs: ['urn:g1'] })).map((b) => b.o!.value)).to.deep.equal(['one']);
      expect((await store.select(q, { defaultGraphs: ['urn:g2'] })).map((b) => b.o!.value)).to.deep.equal(['two']);
      const first = await store.select(q, { defaultGraphs: ['urn:g1'] });
      first.push({ o: { type: 'literal', value: 'added' } });
      expect(() => { first[0]!.o = { type: 'literal', value: 'changed' }; }).to.throw(TypeError);
      expect((await store.select(q, { defaultGraphs: ['urn:g1'] })).map((b) => b.o!.value)).to.deep.equal(['one']);
    } finally {
      await store.close();
      await cleanup();
    }
  });
});

/** The one read cache (GraphCache): an answer is kept while the revisions of the graphs it read do not move. */
describe('read cache keyed on graph revisions', () => {
  const insert = (graph: string, value: string) => sparql`INSERT DATA { GRAPH ${iri(graph)} { <urn:s> <urn:p> ${literal(value)} } }`;
  const valuesOf = async (store: OxigraphStore, graph: string) =>
    (await store.select(sparql`SELECT ?o WHERE { GRAPH ${iri(graph)} { <urn:s> <urn:p> ?o } } ORDER BY ?o`)).map((b) => b.o!.value);

  /** A cache and a counted read of one graph through it. */
  function setup() {
    const store = new OxigraphStore();
    const cache = new GraphCache<string[]>(store, 100);
    const reads = { a: 0, b: 0 };
    const read = (graph: 'a' | 'b') => cache.get(graph, [`urn:g:${graph}`], async () => { reads[graph]++; return valuesOf(store, `urn:g:${graph}`); });
    return { store, cache, reads, read };
  }

  it('keeps an answer that read only graph B across a write to graph A, and reads B again after a write to B', async () => {
    const { store, reads, read } = setup();
    await store.update(insert('urn:g:a', 'a1'), ['urn:g:a']);
    await store.update(insert('urn:g:b', 'b1'), ['urn:g:b']);
    expect(await read('b')).to.deep.equal(['b1']);
    expect(await read('a')).to.deep.equal(['a1']);
    expect(reads).to.deep.equal({ a: 1, b: 1 });

    await store.update(insert('urn:g:a', 'a2'), ['urn:g:a']);
    expect(await read('b')).to.deep.equal(['b1']);
    expect(reads.b, 'a write to A leaves the answer about B').to.equal(1);
    expect(await read('a')).to.deep.equal(['a1', 'a2']);
    expect(reads.a).to.equal(2);

    await store.write([{ kind: 'load', graph: 'urn:g:b', format: 'application/n-triples', data: '<urn:s> <urn:p> "b2" .\n' }]);
    expect(await read('b')).to.deep.equal(['b1', 'b2']);
    expect(reads.b, 'a write to B is seen by the next read of B').to.equal(2);
  });

  it('does not keep an answer read while a write to its graph happened', async () => {
    const { store, cache, reads } = setup();
    await store.update(insert('urn:g:b', 'b1'), ['urn:g:b']);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    let answered!: () => void;
    const read = new Promise<void>((resolve) => { answered = resolve; });
    const slow = cache.get('b', ['urn:g:b'], async () => {
      reads.b++;
      const answer = await valuesOf(store, 'urn:g:b');
      answered();
      await gate; // a write lands before this read's answer is handed over
      return answer;
    });
    await read;
    await store.update(insert('urn:g:b', 'b2'), ['urn:g:b']);
    release();
    expect(await slow).to.deep.equal(['b1']); // its caller gets what it read ...
    expect(await cache.get('b', ['urn:g:b'], async () => { reads.b++; return valuesOf(store, 'urn:g:b'); })).to.deep.equal(['b1', 'b2']); // ... nobody else
    expect(reads.b).to.equal(2);
  });

  it('moves a graph revision only for writes that declared it, even refused ones never lower it', async () => {
    const store = new OxigraphStore();
    const a0 = store.revision('urn:g:a');
    const b0 = store.revision('urn:g:b');
    await store.update(insert('urn:g:a', 'x'), ['urn:g:a']);
    expect(store.revision('urn:g:a')).to.be.greaterThan(a0);
    expect(store.revision('urn:g:b')).to.equal(b0);
    const a1 = store.revision('urn:g:a');
    await store.write([{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH <urn:g:a> { <urn:s> <urn:p> } }`, graphs: ['urn:g:a'] }]).catch(() => {});
    expect(store.revision('urn:g:a')).to.be.at.least(a1);
    expect(store.revision('urn:g:b')).to.equal(b0);
  });

  it('holds at most its bound, dropping the least recently used, and freezes what it shares', async () => {
    const store = new OxigraphStore();
    const cache = new GraphCache<{ n: number }>(store, 2);
    let reads = 0;
    const get = (key: string) => cache.get(key, ['urn:g:a'], async () => { reads++; return { n: reads }; });
    await get('one');
    await get('two');
    await get('one'); // most recently used now
    await get('three'); // drops 'two'
    expect(reads).to.equal(3);
    await get('one');
    expect(reads).to.equal(3);
    await get('two');
    expect(reads).to.equal(4);
    const shared = await get('two');
    expect(() => { (shared as { n: number }).n = 99; }).to.throw(TypeError);
  });
  it('keeps an entry used now and then while many others come and go, and drops the unused ones', async () => {
    const store = new OxigraphStore();
    const cache = new GraphCache<string>(store, 100);
    const reads: string[] = [];
    const get = (key: string) => cache.get(key, ['urn:g:a'], async () => { reads.push(key); return key; });
    await get('hot');
    await get('cold');
    for (let i = 0; i < 1000; i++) {
      await get(`k${i}`);
      if (i % 30 === 0) await get('hot');
    }
    reads.length = 0;
    await get('hot');
    await get('k999');
    await get('k950');
    expect(reads).to.deep.equal([]);
    await get('cold');
    await get('k0');
    expect(reads).to.deep.equal(['cold', 'k0']);
  });
});
