import { expect } from 'chai';
import type { WriteOp } from '../../src/store/store.js';
import { iri, integer, sparql } from '../../src/rdf/sparql.js';
import { forEachBackend, type Harness } from './contract/backends.js';
import { count, insert, state, triples } from './contract/helpers.js';

/**
 * Store contract, where a backend promises durability: every write that
 * was acknowledged is there after the store is opened again, whole; a
 * conditional write that did not apply stays unapplied; nothing of a
 * refused write appears (docs/store.md, "Durability").
 */
forEachBackend('durability across a restart', (t) => {
  const durableIt = (title: string, fn: (this: Mocha.Context) => Promise<void>) =>
    it(title, async function () {
      if (!t.backend.durable) {
        console.log(`      skipped: ${t.backend.name} promises no durability`);
        this.skip();
      }
      await fn.call(this);
    });

  /** Small, multi-op, conditional (applied and not), refused and large writes; answers the graphs they touch. */
  const history = async (h: Harness) => {
    const [a, b, c, big] = ['d/a', 'd/b', 'd/c', 'd/big'].map((name) => h.graph(name)) as [string, string, string, string];
    await h.store.write([insert(a, 'one', 1)]);
    await h.store.write([insert(a, 'two', 2), { kind: 'load', graph: b, format: 'text/turtle', data: '<urn:s:t> <urn:p:value> "turtle"@en .' }]);
    expect(await h.store.writeIf({ ask: sparql`ASK { GRAPH ${iri(a)} { <urn:s:one> ?p ?o } }`, expect: true }, [insert(c, 'applied', 1)])).to.equal(true);
    expect(await h.store.writeIf({ ask: sparql`ASK { GRAPH ${iri(a)} { <urn:s:none> ?p ?o } }`, expect: true }, [insert(c, 'skipped', 1)])).to.equal(false);
    await h.store.write([{ kind: 'load', graph: c, format: 'text/turtle', data: '<urn:s:r> <urn:p:value> "unterminated .' }]).catch(() => undefined);
    await h.store.write([{ kind: 'load', graph: big, format: 'application/n-triples', data: triples(4_000, 'big'), replace: true }]);
    await h.store.write([{ kind: 'update', sparql: sparql`DELETE DATA { GRAPH ${iri(a)} { <urn:s:one> <urn:p:value> ${integer(1)} } }`, graphs: [a] }]);
    return [a, b, c, big];
  };

  durableIt('keeps every acknowledged write, and nothing else, when the store is closed and opened again', async () => {
    const graphs = await history(t);
    const before = await state(t.store, graphs);
    expect(before.filter((l) => l.includes('urn:s:skipped') || l.includes('urn:s:r>'))).to.deep.equal([]);
    const reopened = await t.place.restart();
    expect(await state(reopened, graphs)).to.deep.equal(before);
    expect(await count(reopened, graphs[3]!)).to.equal(4_000);
    // And it goes on taking writes after the restart.
    await reopened.write([insert(graphs[0]!, 'three', 3)]);
    expect(await count(reopened, graphs[0]!)).to.equal(2);
  });

  durableIt('keeps each of many concurrent multi-op writes whole after a restart', async () => {
    const [a, b] = [t.graph('pairs/a'), t.graph('pairs/b')];
    const pair = (n: number): WriteOp[] => [insert(a, `n${n}`, n), insert(b, `n${n}`, n)];
    await Promise.all(Array.from({ length: 40 }, (_, n) => t.store.write(pair(n))));
    const reopened = await t.place.restart();
    expect(await count(reopened, a)).to.equal(40);
    expect(await count(reopened, b)).to.equal(40);
  });

  durableIt('keeps every acknowledged write after a crash, where the test can crash the store', async function () {
    if (!t.place.crash) {
      console.log(`      skipped: ${t.backend.name} cannot be crashed inside the test process (see its own crash tests)`);
      this.skip();
    }
    const graphs = await history(t);
    const before = await state(t.store, graphs);
    const recovered = await t.place.crash!();
    expect(await state(recovered, graphs)).to.deep.equal(before);
  });
});
