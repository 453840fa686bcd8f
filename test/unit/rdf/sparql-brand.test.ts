import { expect } from 'chai';
import { OxigraphStore } from '../../../src/store/embedded/oxigraph-store.js';
import { updateOp, type QuadStore, type WriteCondition, type WriteOp } from '../../../src/store/store.js';
import { sparql, iri, literal, sequence, fragmentOf, type Sparql } from '../../../src/rdf/sparql.js';
import { PREFIXES, prefixes } from '../../../src/rdf/vocab.js';

/**
 * The store accepts only SPARQL built by the `sparql` tag (`Sparql`, a
 * branded string): pasted or concatenated text is a type error. `npm test`
 * compiles this file with tsc first: each `@ts-expect-error` line below must
 * be an error, or tsc fails ("unused @ts-expect-error"), so the type-level
 * half of this test fails as soon as a store method takes a plain string
 * again. The calls sit in a function that is never run.
 */
function pastedTextIsRefusedByTheTypeChecker(store: QuadStore, userText: string): void {
  const pasted = `SELECT * WHERE { ?s ?p "${userText}" }`;
  // @ts-expect-error a plain string is not Sparql
  void store.select(pasted);
  // @ts-expect-error a plain string is not Sparql
  void store.ask('ASK { ?s ?p ?o }');
  // @ts-expect-error a plain string is not Sparql
  void store.construct(pasted);
  // @ts-expect-error a plain string is not Sparql
  void store.queryRaw(pasted, 'application/sparql-results+json');
  // @ts-expect-error a plain string is not Sparql
  void store.update(`INSERT DATA { GRAPH <urn:g> { <urn:s> <urn:p> "${userText}" } }`, ['urn:g']);
  // @ts-expect-error concatenating built SPARQL with text gives a plain string again
  void store.update(PREFIXES + sparql`INSERT DATA { GRAPH <urn:g> { <urn:s> <urn:p> 1 } }`, ['urn:g']);
  // @ts-expect-error the text of a write op
  const op: WriteOp = { kind: 'update', sparql: pasted, graphs: ['urn:g'] };
  // @ts-expect-error the text of an update op
  void updateOp(pasted, ['urn:g']);
  // @ts-expect-error the condition of a conditional write
  const condition: WriteCondition = { ask: 'ASK {}', expect: true };
  void store.writeIf(condition, [op]);
  // A string cast to the brand still needs a cast: the only sanctioned one is `trustedSparql`.
  const built: Sparql = sparql`ASK { ?s ?p ${literal(userText)} }`;
  void store.ask(built);
}

describe('rdf/sparql: the store takes only SPARQL built by the tag', () => {
  it('type-checks only built SPARQL (see pastedTextIsRefusedByTheTypeChecker) and runs what the tag builds, values escaped', async () => {
    expect(pastedTextIsRefusedByTheTypeChecker).to.be.a('function');
    const store = new OxigraphStore();
    const hostile = '" } } ; DROP ALL ; #';
    await store.update(sparql`${prefixes}${sequence([
      sparql`INSERT DATA { GRAPH ${iri('urn:g')} { ${iri('urn:s')} wsm:label ${literal(hostile)} } }`,
      sparql`INSERT DATA { GRAPH ${iri('urn:g')} { ${iri('urn:s')} wsm:label "second" } }`,
    ])}`, ['urn:g']);
    const where = sparql`GRAPH ${iri('urn:g')} { ?s wsm:label ?l }`;
    const rows = await store.select(sparql`${prefixes}SELECT ?l WHERE { ${fragmentOf(where)} } ORDER BY ?l`);
    expect(rows.map((b) => b.l!.value)).to.deep.equal([hostile, 'second']);
    expect(await store.graphNames()).to.deep.equal(['urn:g']);
  });
});
