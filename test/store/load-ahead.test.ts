import { expect } from 'chai';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { openDurableStore, type DurableStore } from '../../src/store/embedded/durable.js';
import { LARGE_WRITE_CHARS } from '../../src/store/embedded/oxigraph-store.js';
import { StoreUnavailableError, WriteRefusedError, type Binding, type WriteOp } from '../../src/store/store.js';
import { JournalFaults } from '../helpers/journal-faults.js';
import { content, tempDir } from './helpers.js';
import { iri, literal, sparql } from '../../src/rdf/sparql.js';

/*
 * A large write that begins with replacing loads of graphs that are empty
 * (a first install) is checked by loading those graphs into the store
 * itself, ahead of its journal record, hidden from reads. These tests pin
 * what that must not change: a refused load, a journal that cannot be
 * written or a condition that fails leaves the store, the journal, the
 * revisions and every listener as they were, and no read made meanwhile
 * ever sees a triple of it.
 */

const MATRIX = 'https://workspaces.local/workspaces/w1/matrices/m1';
const DERIVED = `${MATRIX}/derived`;
const RECORDS = 'https://workspaces.local/workspaces/w1/packages';

/** N-Triples of more than a large write's size, in many slices. */
function triples(tag: string, refusedNear?: 'end'): string {
  let out = '';
  for (let i = 0; out.length <= LARGE_WRITE_CHARS * 2; i++) out += `<urn:${tag}:${i}> <urn:p:label> "line ${i} of a large load" .\n`;
  return refusedNear ? `${out}<http://example.org/a%zz> <urn:p:label> "refused" .\n` : out;
}

/** An install-like write: the two graphs' replacing loads, then the record of it. */
function install(matrix: string, derived: string, version: string): WriteOp[] {
  return [
    { kind: 'load', replace: true, graph: MATRIX, format: 'application/n-triples', data: matrix },
    { kind: 'load', replace: true, graph: DERIVED, format: 'application/n-triples', data: derived },
    { kind: 'update', sparql: sparql`DELETE WHERE { GRAPH ${iri(RECORDS)} { <urn:record> <urn:p:version> ?v } } ; INSERT DATA { GRAPH ${iri(RECORDS)} { <urn:record> <urn:p:version> ${literal(version)} } }`, graphs: [RECORDS] },
  ];
}

async function journalBytes(dir: string): Promise<Buffer> {
  const files = (await readdir(dir)).filter((f) => f.startsWith('journal-')).sort();
  return Buffer.concat(await Promise.all(files.map((f) => readFile(join(dir, f)))));
}

/**
 * Polls, on every event-loop turn until `stop` resolves, the triples of
 * the write's graphs and the record's version, in one query (one state);
 * by queryRaw, which no answer cache serves. Answers what it saw.
 */
async function watch(store: DurableStore, stop: Promise<unknown>): Promise<{ seen: Set<string>; polls: number }> {
  let writing = true;
  void stop.finally(() => { writing = false; }).catch(() => {});
  const seen = new Set<string>();
  let polls = 0;
  while (writing) {
    const answer = JSON.parse(await store.queryRaw(sparql`SELECT ?n ?v WHERE {
      { SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } VALUES ?g { ${iri(MATRIX)} ${iri(DERIVED)} } } }
      OPTIONAL { GRAPH ${iri(RECORDS)} { <urn:record> <urn:p:version> ?v } }
    }`, 'application/sparql-results+json') as string) as { results: { bindings: Binding[] } };
    const row = answer.results.bindings[0]!;
    seen.add(`${row.n!.value} triples, version ${row.v?.value ?? 'none'}`);
    polls++;
    await new Promise((resolve) => setImmediate(resolve));
  }
  return { seen, polls };
}

/** Closes the store, opens its directory again and checks it holds `quads`. */
async function expectAfterRestart(store: DurableStore, dir: string, quads: string[]): Promise<void> {
  await store.close();
  const reopened = await openDurableStore(dir);
  try {
    expect(content(reopened), 'after a restart').to.deep.equal(quads);
  } finally {
    await reopened.close();
  }
}

describe('store: a large write checked by loading its new graphs ahead', function () {
  this.timeout(120_000);
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => ({ dir, cleanup } = await tempDir()));
  afterEach(async () => cleanup());

  it('applies the write whole: readers see the state before or after it, never a part, and a restart gives the same', async () => {
    const store = await openDurableStore(dir);
    await store.update(sparql`INSERT DATA { GRAPH ${iri(RECORDS)} { <urn:record> <urn:p:version> "0" } }`, [RECORDS]);
    const matrix = triples('m');
    const derived = triples('d');
    const lines = (text: string) => text.split('\n').filter(Boolean).length;
    const write = store.write(install(matrix, derived, '1'));
    const { seen, polls } = await watch(store, write);
    await write;
    // One poll at least (in the test read-delay mode each read waits for timers, so there may be only one).
    expect(polls).to.be.greaterThan(0);
    const after = `${lines(matrix) + lines(derived)} triples, version 1`;
    expect([...seen].filter((s) => s !== '0 triples, version 0' && s !== after), 'no reader saw a part of the write').to.deep.equal([]);
    expect((await watch(store, Promise.resolve())).seen, 'the write is whole once it resolved').to.deep.equal(new Set([after]));
    const whole = content(store);
    await expectAfterRestart(store, dir, whole);
  });

  it('refuses a write whose second graph holds an IRI the engine refuses near its end: nothing of it is kept, seen or heard', async () => {
    const store = await openDurableStore(dir);
    await store.update(sparql`INSERT DATA { GRAPH ${iri(RECORDS)} { <urn:record> <urn:p:version> "0" } }`, [RECORDS]);
    const select = sparql`SELECT ?v WHERE { GRAPH ${iri(RECORDS)} { <urn:record> <urn:p:version> ?v } }`;
    expect((await store.select(select))[0]!.v!.value).to.equal('0');
    const before = { quads: content(store), journal: await journalBytes(dir), version: store.version, revisions: [MATRIX, DERIVED, RECORDS].map((g) => store.revision(g)) };
    const heard: string[][] = [];
    store.onWrite((graphs) => heard.push([...graphs]));

    const write = store.write(install(triples('m'), triples('d', 'end'), '1'));
    // Made while the big write is checked: journaled and applied after it (here: alone).
    const later = store.update(sparql`INSERT DATA { GRAPH <urn:g:other> { <urn:s> <urn:p> "later" } }`, ['urn:g:other']);
    const { seen } = await watch(store, write);
    const error = await write.then(() => null, (err: unknown) => err);
    expect(error).to.be.instanceOf(WriteRefusedError);
    expect((error as WriteRefusedError).opIndex, 'the refused op, counted in the ops given').to.equal(1);
    expect((error as Error).message).to.contain('%zz');
    expect([...seen], 'no reader saw a triple of the refused write').to.deep.equal(['0 triples, version 0']);
    await later;

    expect(content(store).filter((q) => !before.quads.includes(q))).to.have.length(1);
    expect(content(store).filter((q) => !before.quads.includes(q))[0]).to.contain('"later"');
    expect(await store.ask(sparql`ASK { GRAPH ?g { ?s ?p ?o } VALUES ?g { ${iri(MATRIX)} ${iri(DERIVED)} } }`)).to.equal(false);
    expect([MATRIX, DERIVED, RECORDS].map((g) => store.revision(g)), 'no revision moved').to.deep.equal(before.revisions);
    expect(heard).to.deep.equal([['urn:g:other']]);
    expect(store.version).to.equal(before.version + 1);
    expect((await store.select(select))[0]!.v!.value).to.equal('0');
    const journal = await journalBytes(dir);
    expect(journal.subarray(0, before.journal.length).equals(before.journal)).to.equal(true);
    expect(journal.includes(Buffer.from('%zz')), 'the refused write was not journaled').to.equal(false);
    const kept = content(store);
    await expectAfterRestart(store, dir, kept);
  });

  it('drops the graphs it loaded ahead when the journal cannot be written, and writes them once it can', async () => {
    const faults = new JournalFaults();
    const store = await openDurableStore(dir, { journalFileOps: faults.ops });
    await store.update(sparql`INSERT DATA { GRAPH ${iri(RECORDS)} { <urn:record> <urn:p:version> "0" } }`, [RECORDS]);
    const before = { quads: content(store), version: store.version };
    const heard: string[][] = [];
    store.onWrite((graphs) => heard.push([...graphs]));
    faults.start('datasync');
    const write = store.write(install(triples('m'), triples('d'), '1'));
    const { seen } = await watch(store, write);
    expect(await write.then(() => null, (err: unknown) => err)).to.be.instanceOf(StoreUnavailableError);
    expect([...seen], 'no reader saw a triple of the write that was not made durable').to.deep.equal(['0 triples, version 0']);
    expect(content(store)).to.deep.equal(before.quads);
    expect(store.version).to.equal(before.version);
    expect(heard).to.deep.equal([]);

    faults.clear();
    await store.write(install(triples('m'), triples('d'), '1'));
    const after = content(store);
    expect(after.length).to.be.greaterThan(before.quads.length + 1000);
    await expectAfterRestart(store, dir, after);
  });

  it('applies nothing when its condition does not hold, before a restart and after it', async () => {
    const store = await openDurableStore(dir);
    await store.update(sparql`INSERT DATA { GRAPH ${iri(RECORDS)} { <urn:record> <urn:p:version> "0" } }`, [RECORDS]);
    const before = content(store);
    const held = { ask: sparql`ASK { GRAPH ${iri(RECORDS)} { <urn:record> <urn:p:version> "9" } }`, expect: true };
    expect(await store.writeIf(held, install(triples('m'), triples('d'), '1'))).to.equal(false);
    expect(content(store)).to.deep.equal(before);
    // The same write whose condition holds applies whole.
    expect(await store.writeIf({ ...held, expect: false }, install(triples('m'), triples('d'), '1'))).to.equal(true);
    const after = content(store);
    expect(after.some((q) => q.includes('"1"'))).to.equal(true);
    await expectAfterRestart(store, dir, after);
  });

  it('replaces graphs that already hold triples (an upgrade) with exactly the new triples', async () => {
    const store = await openDurableStore(dir);
    await store.write(install(triples('old-m'), triples('old-d'), '1'));
    const refused = await store.write(install(triples('m'), triples('d', 'end'), '2')).then(() => null, (err: unknown) => err);
    expect(refused).to.be.instanceOf(WriteRefusedError);
    expect(await store.ask(sparql`ASK { GRAPH ${iri(MATRIX)} { <urn:old-m:0> ?p ?o } }`), 'a refused upgrade keeps the old graphs').to.equal(true);
    await store.write(install(triples('m'), triples('d'), '2'));
    const graphs = await store.select(sparql`SELECT ?g (COUNT(*) AS ?n) (SAMPLE(?s) AS ?one) WHERE { GRAPH ?g { ?s ?p ?o } VALUES ?g { ${iri(MATRIX)} ${iri(DERIVED)} } } GROUP BY ?g ORDER BY ?g`);
    const lines = triples('m').split('\n').filter(Boolean).length;
    expect(graphs.map((b) => [b.g!.value, Number(b.n!.value)])).to.deep.equal([[MATRIX, lines], [DERIVED, lines]]);
    expect(await store.ask(sparql`ASK { GRAPH ?g { ?s ?p ?o } VALUES ?g { ${iri(MATRIX)} ${iri(DERIVED)} } FILTER (STRSTARTS(STR(?s), "urn:old-")) }`)).to.equal(false);
    const after = content(store);
    await expectAfterRestart(store, dir, after);
  });
});
