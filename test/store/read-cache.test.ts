import { expect } from 'chai';
import { OxigraphStore } from '../../src/store/oxigraph-store.js';
import { openDurableStore } from '../../src/store/durable.js';
import { tempDir } from './helpers.js';

/** The store keeps SELECT and ASK answers between writes; every write, even a failed one, empties them. */
describe('store: answers kept between writes', () => {
  const names = async (store: OxigraphStore) => (await store.select('SELECT ?o WHERE { GRAPH <urn:g> { <urn:s> <urn:p> ?o } } ORDER BY ?o')).map((b) => b.o!.value);
  const has = async (store: OxigraphStore, o: string) => await store.ask(`ASK { GRAPH <urn:g> { <urn:s> <urn:p> "${o}" } }`);

  it('answers what the store holds after each kind of write', async () => {
    const store = new OxigraphStore();
    expect(await names(store)).to.deep.equal([]);
    expect(await has(store, 'a')).to.equal(false);
    await store.update('INSERT DATA { GRAPH <urn:g> { <urn:s> <urn:p> "a" } }');
    expect(await names(store)).to.deep.equal(['a']);
    expect(await has(store, 'a')).to.equal(true);
    await store.write([{ kind: 'load', graph: 'urn:g', format: 'application/n-triples', data: '<urn:s> <urn:p> "b" .\n' }]);
    expect(await names(store)).to.deep.equal(['a', 'b']);
    await store.update('DELETE DATA { GRAPH <urn:g> { <urn:s> <urn:p> "a" } }');
    expect(await names(store)).to.deep.equal(['b']);
    expect(await has(store, 'a')).to.equal(false);
  });

  it('forgets its answers on a write whose later op fails after an earlier one applied', async () => {
    const store = new OxigraphStore();
    expect(await names(store)).to.deep.equal([]);
    let failed = false;
    try {
      await store.write([
        { kind: 'update', sparql: 'INSERT DATA { GRAPH <urn:g> { <urn:s> <urn:p> "c" } }' },
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
      await store.update('INSERT DATA { GRAPH <urn:g1> { <urn:s> <urn:p> "one" } GRAPH <urn:g2> { <urn:s> <urn:p> "two" } }');
      const q = 'SELECT ?o WHERE { <urn:s> <urn:p> ?o }';
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
