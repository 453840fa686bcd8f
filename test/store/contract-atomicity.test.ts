import { expect } from 'chai';
import { WriteRefusedError, type WriteOp } from '../../src/store/store.js';
import { iri, sparql } from '../../src/rdf/sparql.js';
import { forEachBackend } from './contract/backends.js';
import { count, insert, listen, state, thrown } from './contract/helpers.js';

/**
 * Store contract: a write of several ops applies all of them or none
 * (docs/store.md, "The store contract"). A refused op leaves the data,
 * the version and the listeners as they were.
 */
forEachBackend('a write is all or nothing', (t) => {
  it('applies every op of a write over several graphs, updates and loads mixed', async () => {
    const [a, b] = [t.graph('atomic/a'), t.graph('atomic/b')];
    await t.store.write([
      insert(a, 'one', 1),
      { kind: 'load', graph: b, format: 'application/n-triples', data: '<urn:s:two> <urn:p:value> "2" .\n<urn:s:three> <urn:p:value> "3" .\n' },
      { kind: 'update', sparql: sparql`DELETE DATA { GRAPH ${iri(a)} { <urn:s:one> <urn:p:value> 1 } } ; INSERT DATA { GRAPH ${iri(a)} { <urn:s:one> <urn:p:value> 11 } }`, graphs: [a] },
      { kind: 'load', graph: a, format: 'text/turtle', data: '<urn:s:four> <urn:p:value> 4 .', replace: true },
    ]);
    // The replacing load came last: graph a holds exactly its data.
    expect(await state(t.store, [a, b])).to.deep.equal([
      `${a} <urn:s:four> <urn:p:value> "4"^^<http://www.w3.org/2001/XMLSchema#integer> .`,
      `${b} <urn:s:three> <urn:p:value> "3" .`,
      `${b} <urn:s:two> <urn:p:value> "2" .`,
    ]);
  });

  it('refuses a write whose last op the engine refuses, leaving data, version and listeners as they were', async () => {
    const [a, b] = [t.graph('refused/a'), t.graph('refused/b')];
    await t.store.write([insert(a, 'kept', 'kept')]);
    // Read once, so a backend keeping answers holds this one: it must stay the store's answer.
    expect(await count(t.store, a)).to.equal(1);
    const before = { data: await state(t.store, [a, b]), version: t.store.version, a: t.store.revision(a), b: t.store.revision(b) };
    const { heard, stop } = listen(t.store);
    const ops: WriteOp[] = [
      { kind: 'update', sparql: sparql`DELETE DATA { GRAPH ${iri(a)} { <urn:s:kept> <urn:p:value> "kept" } }`, graphs: [a] },
      insert(b, 'added', 'added'),
      { kind: 'load', graph: b, format: 'application/n-triples', data: '<urn:s:loaded> <urn:p:value> "loaded" .\n' },
      { kind: 'load', graph: a, format: 'text/turtle', data: '<urn:s:x> <urn:p:value> "unterminated .' },
    ];
    const refused = await thrown(() => t.store.write(ops));
    stop();
    expect(refused).to.be.instanceOf(WriteRefusedError);
    expect(await state(t.store, [a, b])).to.deep.equal(before.data);
    expect(await count(t.store, a)).to.equal(1);
    expect(t.store.version).to.equal(before.version);
    // A revision never moves backwards; the threaded store moves those of a settled write's graphs even when it
    // was refused, which only makes caches read again.
    expect(t.store.revision(a)).to.be.at.least(before.a);
    expect(t.store.revision(b)).to.be.at.least(before.b);
    expect(heard).to.deep.equal([]);
  });

  it('refuses a write whose first op the engine refuses, applying none of the ops after it', async () => {
    const a = t.graph('refused-first');
    const refused = await thrown(() => t.store.write([
      { kind: 'load', graph: a, format: 'text/turtle', data: '<urn:s:x> <urn:p:value> .' },
      insert(a, 'after', 'after'),
    ]));
    expect(refused).to.be.instanceOf(WriteRefusedError);
    expect(await count(t.store, a)).to.equal(0);
  });

  it('keeps the writes around a refused one: those before and after it apply whole', async () => {
    const a = t.graph('around');
    const writes = [
      t.store.write([insert(a, 'before-1', 1), insert(a, 'before-2', 2)]),
      t.store.write([insert(a, 'refused', 3), { kind: 'load', graph: a, format: 'text/turtle', data: '<urn:s:y> <urn:p:value> "unterminated .' }]),
      t.store.write([insert(a, 'after-1', 4), insert(a, 'after-2', 5)]),
    ];
    const outcomes = await Promise.allSettled(writes);
    expect(outcomes.map((o) => o.status)).to.deep.equal(['fulfilled', 'rejected', 'fulfilled']);
    const keys = (await t.store.select(sparql`SELECT ?s WHERE { GRAPH ${iri(a)} { ?s ?p ?o } } ORDER BY ?s`)).map((r) => r.s!.value);
    expect(keys).to.deep.equal(['urn:s:after-1', 'urn:s:after-2', 'urn:s:before-1', 'urn:s:before-2']);
  });
});
