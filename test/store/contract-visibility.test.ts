import { expect } from 'chai';
import type { QuadStore, WriteOp } from '../../src/store/store.js';
import { integer, iri, sparql } from '../../src/rdf/sparql.js';
import { forEachBackend } from './contract/backends.js';
import { count, insert, triples } from './contract/helpers.js';

/**
 * Store contract: a read sees at least every write whose promise resolved
 * before the read was made, and a write is seen whole or not at all, a
 * large one too (an install's graphs, loaded in bounded steps by the
 * embedded store and staged by the remote one) (docs/store.md, "The store
 * contract").
 */
forEachBackend('what a read may see', (t) => {
  it('sees every write that resolved before the read was made, answers kept by the store included', async () => {
    const a = t.graph('visible');
    const has = (n: number) => t.store.ask(sparql`ASK { GRAPH ${iri(a)} { ${iri(`urn:s:k${n}`)} ?p ?o } }`);
    for (let n = 0; n < 20; n++) {
      // Asked before the write, so a store that keeps small answers holds "false".
      expect(await has(n)).to.equal(false);
      await t.store.write([insert(a, `k${n}`, n)]);
      expect(await has(n)).to.equal(true);
      expect(await count(t.store, a)).to.equal(n + 1);
    }
  });

  /**
   * Counts of the three graphs of a large write, read in one query: one state of the store. Each poll's query
   * text differs (`poll`), so no store answers it from answers it kept: it reaches the engine.
   */
  const observe = async (store: QuadStore, graphs: { a: string; b: string; marker: string }, poll: number) => {
    const rows = await store.select(sparql`SELECT
      (SUM(IF(?g = ${iri(graphs.a)}, 1, 0)) AS ?a) (SUM(IF(?g = ${iri(graphs.b)}, 1, 0)) AS ?b) (SUM(IF(?g = ${iri(graphs.marker)}, 1, 0)) AS ?m)
      WHERE { VALUES ?poll { ${integer(poll)} } VALUES ?g { ${iri(graphs.a)} ${iri(graphs.b)} ${iri(graphs.marker)} } GRAPH ?g { ?s ?p ?o } }`);
    const n = (v: string) => Number(rows[0]?.[v]?.value ?? 0);
    return `${n('a')}/${n('b')}/${n('m')}`;
  };

  /** Reads the three graphs over and over while `write` is under way; answers every distinct state seen. */
  const pollDuring = async (graphs: { a: string; b: string; marker: string }, write: () => Promise<void>) => {
    const seen = new Set<string>();
    let done = false;
    const writing = write().finally(() => { done = true; });
    let poll = 0;
    while (!done) {
      seen.add(await observe(t.store, graphs, poll++));
      // As requests do, each read comes in a turn of the event loop of its own (a store may answer without one).
      await new Promise((resolve) => setImmediate(resolve));
    }
    await writing;
    seen.add(await observe(t.store, graphs, poll));
    return seen;
  };

  const large = 4_000;
  const graphsOf = (name: string) => ({ a: t.graph(`${name}/a`), b: t.graph(`${name}/b`), marker: t.graph(`${name}/marker`) });
  const largeWrite = (graphs: { a: string; b: string; marker: string }, replace: boolean): WriteOp[] => [
    { kind: 'load', graph: graphs.a, format: 'application/n-triples', data: triples(large, 'a'), ...(replace ? { replace } : {}) },
    { kind: 'load', graph: graphs.b, format: 'application/n-triples', data: triples(large, 'b'), ...(replace ? { replace } : {}) },
    insert(graphs.marker, 'done', 1),
  ];

  it('never shows a part of a large write into empty graphs (a first install): before it or after it, whole', async () => {
    const graphs = graphsOf('first-install');
    const seen = await pollDuring(graphs, () => t.store.write(largeWrite(graphs, true)));
    expect([...seen].every((s) => s === '0/0/0' || s === `${large}/${large}/1`), [...seen].join(', ')).to.equal(true);
    expect(seen.has(`${large}/${large}/1`)).to.equal(true);
  });

  it('never shows a part of a large write replacing graphs that hold data (an upgrade)', async () => {
    const graphs = graphsOf('upgrade');
    await t.store.write([
      { kind: 'load', graph: graphs.a, format: 'application/n-triples', data: triples(10, 'old-a') },
      { kind: 'load', graph: graphs.b, format: 'application/n-triples', data: triples(20, 'old-b') },
    ]);
    const seen = await pollDuring(graphs, () => t.store.write(largeWrite(graphs, true)));
    expect([...seen].every((s) => s === '10/20/0' || s === `${large}/${large}/1`), [...seen].join(', ')).to.equal(true);
    expect(seen.has(`${large}/${large}/1`)).to.equal(true);
  });

  it('orders a write made while a large write is under way after it', async () => {
    const graphs = graphsOf('order');
    const big = t.store.write(largeWrite(graphs, false));
    const after = t.store.write([{ kind: 'update', sparql: sparql`DROP SILENT GRAPH ${iri(graphs.a)}`, graphs: [graphs.a] }]);
    await Promise.all([big, after]);
    // Applied in call order on the embedded store; a remote engine may commit concurrent requests in either order,
    // but each whole: graph a is empty (the drop came last) or whole (the drop came first).
    expect([0, large]).to.include(await count(t.store, graphs.a));
    if (t.backend.name.startsWith('embedded')) expect(await count(t.store, graphs.a)).to.equal(0);
    expect(await count(t.store, graphs.b)).to.equal(large);
  });
});
