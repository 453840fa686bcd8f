import { expect } from 'chai';
import { GraphCache } from '../../src/store/graph-cache.js';
import { UndeclaredGraphError } from '../../src/store/declared-graphs.js';
import { iri, sparql } from '../../src/rdf/sparql.js';
import { forEachBackend } from './contract/backends.js';
import { count, insert, listen, thrown } from './contract/helpers.js';

/**
 * Store contract: every write declares the graphs it may change; the store
 * keeps a revision per graph that moves for the graphs a write declared and
 * for no other, and tells its listeners those graphs. The one read cache
 * (`GraphCache`) rests on it (docs/store.md, "The cache rule").
 */
forEachBackend('declared graphs and revisions', (t) => {
  it('moves the revisions of the graphs a write declared by the time it resolves, and of no other', async () => {
    const [a, b, c] = [t.graph('rev/a'), t.graph('rev/b'), t.graph('rev/c')];
    const before = { a: t.store.revision(a), b: t.store.revision(b), c: t.store.revision(c), version: t.store.version };
    const { heard, stop } = listen(t.store);
    await t.store.write([insert(a, 'x', 1), { kind: 'load', graph: b, format: 'application/n-triples', data: '<urn:s:y> <urn:p:value> "y" .\n' }]);
    stop();
    expect(t.store.revision(a)).to.be.greaterThan(before.a);
    expect(t.store.revision(b)).to.be.greaterThan(before.b);
    expect(t.store.revision(c)).to.equal(before.c);
    expect(t.store.version).to.be.greaterThan(before.version);
    expect(heard).to.deep.equal([[a, b].sort()]);
  });

  it('moves nothing and tells no listener for a conditional write whose condition did not hold', async () => {
    const a = t.graph('rev/conditional');
    const before = t.store.revision(a);
    const { heard, stop } = listen(t.store);
    const applied = await t.store.writeIf({ ask: sparql`ASK { GRAPH ${iri(a)} { ?s ?p ?o } }`, expect: true }, [insert(a, 'x', 1)]);
    stop();
    expect(applied).to.equal(false);
    expect(heard).to.deep.equal([]);
    expect(t.store.revision(a)).to.be.at.least(before);
    expect(await count(t.store, a)).to.equal(0);
  });

  it('refuses, before applying anything, a write that changes a graph it did not declare (the suite checks declarations)', async () => {
    const [a, b] = [t.graph('rev/declared'), t.graph('rev/undeclared')];
    const refused = await thrown(() => t.store.write([
      insert(a, 'x', 1),
      { kind: 'update', sparql: sparql`INSERT DATA { GRAPH ${iri(b)} { <urn:s:x> <urn:p:value> 1 } }`, graphs: [a] },
    ]));
    expect(refused).to.be.instanceOf(Error);
    expect((refused as Error).name).to.equal(UndeclaredGraphError.name);
    expect(await count(t.store, a)).to.equal(0);
    expect(await count(t.store, b)).to.equal(0);
  });

  it('lets a cache keyed on revisions answer until a write to its graphs, and keep answers about other graphs', async () => {
    const [a, b] = [t.graph('cache/a'), t.graph('cache/b')];
    await t.store.write([insert(a, 'x', 1), insert(b, 'y', 1)]);
    const cache = new GraphCache<number>(t.store);
    let reads = 0;
    const countOf = (g: string) => cache.get(g, [g], async () => { reads++; return count(t.store, g); });
    expect([await countOf(a), await countOf(b)]).to.deep.equal([1, 1]);
    expect([await countOf(a), await countOf(b)]).to.deep.equal([1, 1]);
    expect(reads).to.equal(2);
    await t.store.write([insert(a, 'z', 2)]);
    expect(await countOf(a)).to.equal(2);
    expect(await countOf(b)).to.equal(1);
    expect(reads).to.equal(3);
  });

  it('never lets a cache keep an answer read while a write to its graph was under way', async () => {
    const a = t.graph('cache/overlap');
    const cache = new GraphCache<number>(t.store);
    const countOf = () => cache.get(a, [a], () => count(t.store, a));
    // Reads and writes interleaved: after each write resolves, the cache must answer what the store holds.
    for (let n = 1; n <= 15; n++) {
      const reading = Promise.all([countOf(), countOf()]);
      const writing = t.store.write([insert(a, `k${n}`, n)]);
      await Promise.all([reading, writing]);
      expect(await countOf()).to.equal(n);
    }
  });
});
