import { expect } from 'chai';
import type { QuadStore, WriteCondition, WriteOp } from '../../src/store/store.js';
import { integer, iri, literal, sparql } from '../../src/rdf/sparql.js';
import { forEachBackend } from './contract/backends.js';
import { listen, state } from './contract/helpers.js';

/**
 * Store contract: `writeIf` asks its condition on the very state its ops
 * apply to, with no other write between the two, and answers whether it
 * applied (docs/store.md, "Invariant sites"). Every invariant site of the
 * service (a unique alias, the last administrator, one active command per
 * package) rests on this.
 */
forEachBackend('conditional writes', (t) => {
  const aliasFree = (graph: string, alias: string): WriteCondition =>
    ({ ask: sparql`ASK { GRAPH ${iri(graph)} { ?c <urn:p:alias> ${literal(alias)} } }`, expect: false });
  const claim = (graph: string, alias: string, n: number): WriteOp[] =>
    [{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH ${iri(graph)} { ${iri(`urn:c:${n}`)} <urn:p:alias> ${literal(alias)} } }`, graphs: [graph] }];
  const holders = async (store: QuadStore, graph: string, alias: string) =>
    (await store.select(sparql`SELECT ?c WHERE { GRAPH ${iri(graph)} { ?c <urn:p:alias> ${literal(alias)} } }`)).map((r) => r.c!.value);

  it('applies when the condition holds and answers true; otherwise applies nothing, tells no listener and answers false', async () => {
    const g = t.graph('conditional');
    const { heard, stop } = listen(t.store);
    expect(await t.store.writeIf(aliasFree(g, 'a'), claim(g, 'a', 1))).to.equal(true);
    expect(heard).to.deep.equal([[g]]);
    const before = { data: await state(t.store, [g]), version: t.store.version };
    expect(await t.store.writeIf(aliasFree(g, 'a'), claim(g, 'a', 2))).to.equal(false);
    stop();
    expect(await state(t.store, [g])).to.deep.equal(before.data);
    expect(t.store.version).to.equal(before.version);
    expect(heard).to.have.length(1);
    // expect: true applies only while the ASK answers true.
    const held = { ask: sparql`ASK { GRAPH ${iri(g)} { <urn:c:1> <urn:p:alias> "a" } }`, expect: true };
    expect(await t.store.writeIf(held, [{ kind: 'update', sparql: sparql`DELETE DATA { GRAPH ${iri(g)} { <urn:c:1> <urn:p:alias> "a" } }`, graphs: [g] }])).to.equal(true);
    expect(await t.store.writeIf(held, [{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH ${iri(g)} { <urn:c:1> <urn:p:gone> true } }`, graphs: [g] }])).to.equal(false);
    expect(await holders(t.store, g, 'a')).to.deep.equal([]);
    expect(await state(t.store, [g])).to.deep.equal([]);
  });

  it('of 20 racing claims of one alias, exactly one applies, and its answer is the one that says so', async () => {
    const g = t.graph('race');
    const answers = await Promise.all(Array.from({ length: 20 }, (_, n) => t.store.writeIf(aliasFree(g, 'taken'), claim(g, 'taken', n))));
    const winners = answers.flatMap((applied, n) => (applied ? [`urn:c:${n}`] : []));
    expect(winners).to.have.length(1);
    expect(await holders(t.store, g, 'taken')).to.deep.equal(winners);
  });

  it('loses no update of a counter that 12 writers move by compare-and-set, each trying again when its condition failed', async () => {
    const g = t.graph('counter');
    const counter = iri('urn:s:counter');
    await t.store.write([{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH ${iri(g)} { ${counter} <urn:p:value> 0 } }`, graphs: [g] }]);
    const read = async () => Number((await t.store.select(sparql`SELECT ?v WHERE { GRAPH ${iri(g)} { ${counter} <urn:p:value> ?v } }`))[0]!.v!.value);
    const increment = async () => {
      for (;;) {
        const seen = await read();
        const applied = await t.store.writeIf(
          { ask: sparql`ASK { GRAPH ${iri(g)} { ${counter} <urn:p:value> ${integer(seen)} } }`, expect: true },
          [{ kind: 'update', sparql: sparql`DELETE DATA { GRAPH ${iri(g)} { ${counter} <urn:p:value> ${integer(seen)} } } ; INSERT DATA { GRAPH ${iri(g)} { ${counter} <urn:p:value> ${integer(seen + 1)} } }`, graphs: [g] }],
        );
        if (applied) return;
      }
    };
    await Promise.all(Array.from({ length: 12 }, increment));
    expect(await read()).to.equal(12);
    // One value at a time: a lost race never left two values behind.
    expect(await state(t.store, [g])).to.have.length(1);
  });

  it('applies all of a conditional write of several ops, or none of it', async () => {
    const [a, b] = [t.graph('conditional/a'), t.graph('conditional/b')];
    const both = (n: number): WriteOp[] => [
      { kind: 'update', sparql: sparql`INSERT DATA { GRAPH ${iri(a)} { <urn:s:x> <urn:p:n> ${integer(n)} } }`, graphs: [a] },
      { kind: 'load', graph: b, format: 'application/n-triples', data: `<urn:s:x> <urn:p:n> "${n}" .\n` },
    ];
    const empty = { ask: sparql`ASK { GRAPH ${iri(a)} { ?s ?p ?o } }`, expect: false };
    const answers = await Promise.all([1, 2, 3, 4, 5].map((n) => t.store.writeIf(empty, both(n))));
    expect(answers.filter(Boolean)).to.have.length(1);
    const n = answers.indexOf(true) + 1;
    expect(await state(t.store, [a, b])).to.deep.equal([
      `${a} <urn:s:x> <urn:p:n> "${n}"^^<http://www.w3.org/2001/XMLSchema#integer> .`,
      `${b} <urn:s:x> <urn:p:n> "${n}" .`,
    ]);
  });
});
