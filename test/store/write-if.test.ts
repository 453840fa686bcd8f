import { expect } from 'chai';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { OxigraphStore } from '../../src/store/embedded/oxigraph-store.js';
import { openDurableStore } from '../../src/store/embedded/durable.js';
import { WriteRefusedError, type QuadStore, type WriteOp } from '../../src/store/store.js';
import { tempDir, content } from './helpers.js';
import { sparql, raw, literal } from '../../src/rdf/sparql.js';

/**
 * Conditional writes (`QuadStore.writeIf`, docs/store.md "Invariant
 * sites"): the condition is evaluated on the very state the write applies
 * to, and the store says whether it applied.
 */
describe('store: conditional writes (writeIf)', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => ({ dir, cleanup } = await tempDir()));
  afterEach(async () => cleanup());

  const journalBytes = async () => {
    const files = (await readdir(dir)).filter((f) => f.startsWith('journal-')).sort();
    return Buffer.concat(await Promise.all(files.map((f) => readFile(join(dir, f)))));
  };
  const aliasFree = (alias: string) => ({ ask: sparql`ASK { GRAPH <urn:g> { ?c <urn:alias> ${literal(alias)} } }`, expect: false });
  const claim = (alias: string, n: number): WriteOp[] => [{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH <urn:g> { <urn:c:${raw(String(n))}> <urn:alias> ${literal(alias)} } }`, graphs: ['urn:g'] }];
  const holders = async (store: QuadStore, alias: string) =>
    (await store.select(sparql`SELECT ?c WHERE { GRAPH <urn:g> { ?c <urn:alias> ${literal(alias)} } }`)).map((b) => b.c!.value);

  it('applies when the condition holds and answers true; otherwise applies nothing, tells no listener and answers false', async () => {
    const store = await openDurableStore(dir);
    const seen: string[][] = [];
    store.onWrite((graphs) => seen.push([...graphs]));
    expect(await store.writeIf(aliasFree('a'), claim('a', 1))).to.equal(true);
    expect(seen).to.have.length(1);
    const before = { quads: content(store), journal: await journalBytes(), version: store.version };
    // Read once so the answer cache holds it: a refused condition must leave it true.
    expect(await holders(store, 'a')).to.deep.equal(['urn:c:1']);
    expect(await store.writeIf(aliasFree('a'), claim('a', 2))).to.equal(false);
    expect(content(store)).to.deep.equal(before.quads);
    expect(store.version).to.equal(before.version);
    expect(seen).to.have.length(1);
    expect(await holders(store, 'a')).to.deep.equal(['urn:c:1']);
    // expect: true — applies only while the ASK answers true.
    expect(await store.writeIf({ ask: sparql`ASK { GRAPH <urn:g> { <urn:c:1> <urn:alias> "a" } }`, expect: true },
      [{ kind: 'update', sparql: sparql`DELETE DATA { GRAPH <urn:g> { <urn:c:1> <urn:alias> "a" } }`, graphs: ['urn:g'] }])).to.equal(true);
    expect(await holders(store, 'a')).to.deep.equal([]);
    expect(await store.writeIf({ ask: sparql`ASK { GRAPH <urn:g> { <urn:c:1> <urn:alias> "a" } }`, expect: true },
      [{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH <urn:g> { <urn:c:1> <urn:gone> true } }`, graphs: ['urn:g'] }])).to.equal(false);
    expect(await store.ask(sparql`ASK { GRAPH <urn:g> { <urn:c:1> <urn:gone> true } }`)).to.equal(false);
    await store.close();
    // What applied is durable; what did not stays unapplied after a restart (its record is skipped on replay).
    const reopened = await openDurableStore(dir);
    expect(await holders(reopened, 'a')).to.deep.equal([]);
    expect(reopened.raw.size).to.equal(0);
    await reopened.close();
  });

  it('journals conditional writes in one group commit with the writes around them, not one fsync each', async () => {
    const store = await openDurableStore(dir);
    const before = store.stats().fsyncs;
    const answers = await Promise.all(Array.from({ length: 20 }, (_, n) => store.writeIf(aliasFree(`alias-${n}`), claim(`alias-${n}`, n))));
    expect(answers.every(Boolean)).to.equal(true);
    const fsyncs = store.stats().fsyncs - before;
    // Asked one after another (each after the fsync of the one before), these took 20 fsyncs.
    expect(fsyncs).to.be.lessThan(10);
    expect((await store.select(sparql`SELECT ?c WHERE { GRAPH <urn:g> { ?c <urn:alias> ?a } }`)).length).to.equal(20);
    await store.close();
  });

  it('a conditional record replays to the outcome it had: 10 racing claims journaled together, one applied, the same one after a restart', async () => {
    const store = await openDurableStore(dir);
    const answers = await Promise.all(Array.from({ length: 10 }, (_, n) => store.writeIf(aliasFree('same'), claim('same', n))));
    expect(answers.filter(Boolean)).to.have.length(1);
    const winner = await holders(store, 'same');
    expect(winner).to.have.length(1);
    const quads = content(store);
    // Every claim is in the journal, each with its condition: replay asks them again in order.
    expect((await journalBytes()).toString('utf8').match(/"kind":"condition"/g)).to.have.length(10);
    // Readers outside the store's thread (query workers) are told which records did not apply.
    const sources = await store.graphSources(['urn:g']);
    expect(sources?.journal.skipped).to.have.length(9);
    await store.close();
    const reopened = await openDurableStore(dir);
    expect(await holders(reopened, 'same')).to.deep.equal(winner);
    expect(content(reopened)).to.deep.equal(quads);
    expect((await reopened.graphSources(['urn:g']))?.journal.skipped).to.have.length(9);
    await reopened.close();
  });

  it('20 racing claims of one alias, with every read delayed: exactly one applies', async () => {
    const store = new OxigraphStore(undefined, undefined, { readDelay: true });
    // Each claimant checks with a (delayed) read first, as a service would, then writes conditionally.
    const results = await Promise.all(Array.from({ length: 20 }, async (_, n) => {
      if ((await holders(store, 'x')).length > 0) return false;
      return store.writeIf(aliasFree('x'), claim('x', n));
    }));
    expect(results.filter(Boolean)).to.have.length(1);
    expect(await holders(store, 'x')).to.have.length(1);
  });

  it('evaluates the condition after the writes queued before it: behind a sliced write', async () => {
    const store = new OxigraphStore();
    // A load large enough to be applied in slices (several event-loop turns).
    let data = '';
    for (let i = 0; i < 20_000; i++) data += `<urn:big:${i}> <urn:p> "${i}" .\n`;
    const big = store.write([
      { kind: 'load', graph: 'urn:big', format: 'application/n-triples', data },
      { kind: 'update', sparql: sparql`INSERT DATA { GRAPH <urn:g> { <urn:c:big> <urn:alias> "y" } }`, graphs: ['urn:g'] },
    ]);
    // Made while the sliced write is under way: it must see the sliced write's alias.
    const raced = store.writeIf(aliasFree('y'), claim('y', 1));
    await big;
    expect(await raced).to.equal(false);
    expect(await holders(store, 'y')).to.deep.equal(['urn:c:big']);
  });

  it('evaluates the condition after the writes queued before it: behind a snapshot', async () => {
    const store = await openDurableStore(dir);
    let data = '';
    for (let i = 0; i < 20_000; i++) data += `<urn:big:${i}> <urn:p> "${i}" .\n`;
    await store.write([{ kind: 'load', graph: 'urn:big', format: 'application/n-triples', data }]);
    const snapshot = store.snapshot();
    await new Promise((resolve) => setImmediate(resolve));
    // Both wait for the snapshot; the first is applied first, so the second sees it.
    const first = store.writeIf(aliasFree('z'), claim('z', 1));
    const second = store.writeIf(aliasFree('z'), claim('z', 2));
    await snapshot;
    expect([await first, await second]).to.deep.equal([true, false]);
    expect(await holders(store, 'z')).to.deep.equal(['urn:c:1']);
    await store.close();
  });

  it('an op the engine refuses rejects a conditional write whose condition holds, changing nothing', async () => {
    const store = await openDurableStore(dir);
    const before = content(store);
    let refused: unknown;
    try {
      await store.writeIf(aliasFree('r'), [...claim('r', 1),
        { kind: 'load', graph: 'urn:g', format: 'application/n-triples', data: '<http://example.org/a%zz> <urn:p> "refused" .\n' }]);
    } catch (err) {
      refused = err;
    }
    expect(refused).to.be.instanceOf(WriteRefusedError);
    expect(content(store)).to.deep.equal(before);
    await store.close();
  });
});
