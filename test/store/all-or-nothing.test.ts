import { expect } from 'chai';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { WriteRefusedError, type WriteOp } from '../../src/store/store.js';
import { openDurableStore } from '../../src/store/embedded/durable.js';
import { LARGE_WRITE_CHARS } from '../../src/store/embedded/oxigraph-store.js';
import { tempDir, content } from './helpers.js';
import { sparql } from '../../src/rdf/sparql.js';

/** A write is all or nothing: an op the engine refuses leaves store, journal and caches as they were. */
describe('store: all-or-nothing writes', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => ({ dir, cleanup } = await tempDir()));
  afterEach(async () => cleanup());

  const journalBytes = async () => {
    const { readdir } = await import('node:fs/promises');
    const files = (await readdir(dir)).filter((f) => f.startsWith('journal-')).sort();
    return Buffer.concat(await Promise.all(files.map((f) => readFile(join(dir, f)))));
  };

  it('refuses a multi-op write whose last op the engine refuses, changing nothing', async () => {
    const store = await openDurableStore(dir);
    await store.update(sparql`INSERT DATA { GRAPH <urn:g> { <urn:s> <urn:p> "kept" } }`, ['urn:g']);
    const ask = sparql`ASK { GRAPH <urn:g> { <urn:s> <urn:p> "kept" } }`;
    const select = sparql`SELECT ?o WHERE { GRAPH <urn:g> { <urn:s> <urn:p> ?o } } ORDER BY ?o`;
    // Read once so the store's answer cache holds these answers.
    expect(await store.ask(ask)).to.equal(true);
    expect((await store.select(select)).map((b) => b.o!.value)).to.deep.equal(['kept']);
    const before = { quads: content(store), journal: await journalBytes(), version: store.version, size: await store.size() };
    const writes: string[][] = [];
    const off = store.onWrite((graphs) => writes.push([...graphs]));
    const ops: WriteOp[] = [
      { kind: 'update', sparql: sparql`DELETE DATA { GRAPH <urn:g> { <urn:s> <urn:p> "kept" } }`, graphs: ['urn:g'] },
      { kind: 'load', graph: 'urn:g', format: 'application/n-triples', data: '<urn:s> <urn:p> "added" .\n' },
      { kind: 'update', sparql: sparql`INSERT DATA { GRAPH <urn:g> { <urn:s> <urn:p> "more" } }`, graphs: ['urn:g'] },
      { kind: 'load', graph: 'urn:g', format: 'application/n-triples', data: '<urn:s> <urn:p> "x" .\n<http://example.org/a%zz> <urn:p> "refused" .\n' },
    ];
    let refused: unknown;
    try {
      await store.write(ops);
    } catch (err) {
      refused = err;
    }
    off();
    expect(refused).to.be.instanceOf(WriteRefusedError);
    expect((refused as Error).message).to.contain('%zz');
    expect(content(store)).to.deep.equal(before.quads);
    expect(await journalBytes()).to.deep.equal(before.journal);
    expect(store.version).to.equal(before.version);
    expect(writes).to.deep.equal([]);
    // The cached answers are still the store's answers.
    expect(await store.ask(ask)).to.equal(true);
    expect((await store.select(select)).map((b) => b.o!.value)).to.deep.equal(['kept']);
    expect(await store.size()).to.equal(before.size);
    await store.close();
    const reopened = await openDurableStore(dir);
    expect(content(reopened)).to.deep.equal(before.quads);
    await reopened.close();
  });

  it('refuses a large write (checked off the event loop) whose last load holds a refused IRI, changing nothing', async function () {
    this.timeout(60_000);
    const store = await openDurableStore(dir);
    await store.update(sparql`INSERT DATA { GRAPH <urn:g> { <urn:s> <urn:p> "kept" } }`, ['urn:g']);
    const ask = sparql`ASK { GRAPH <urn:g> { <urn:s> <urn:p> "kept" } }`;
    expect(await store.ask(ask)).to.equal(true);
    const before = { quads: content(store), journal: await journalBytes(), version: store.version, revision: store.revision('urn:g') };
    const writes: string[][] = [];
    const off = store.onWrite((graphs) => writes.push([...graphs]));
    let big = '';
    for (let i = 0; big.length <= LARGE_WRITE_CHARS; i++) big += `<urn:s:${i}> <urn:p> "a large load, line ${i}" .\n`;
    const ops: WriteOp[] = [
      { kind: 'update', sparql: sparql`DROP SILENT GRAPH <urn:g>`, graphs: ['urn:g'] },
      { kind: 'load', graph: 'urn:g', format: 'application/n-triples', data: big },
      { kind: 'load', graph: 'urn:h', format: 'application/n-triples', data: `${big}<http://example.org/a%zz> <urn:p> "refused" .\n` },
    ];
    // A small write made while the large one is checked is journaled and applied after it (here: alone).
    const [refused, later] = await Promise.allSettled([
      store.write(ops),
      store.update(sparql`INSERT DATA { GRAPH <urn:g> { <urn:s> <urn:p> "later" } }`, ['urn:g']),
    ]);
    off();
    expect(refused.status).to.equal('rejected');
    const error = (refused as PromiseRejectedResult).reason as WriteRefusedError;
    expect(error).to.be.instanceOf(WriteRefusedError);
    expect(error.opIndex).to.equal(2);
    expect(error.message).to.contain('%zz');
    expect(later.status).to.equal('fulfilled');
    expect(writes).to.deep.equal([['urn:g']]);
    expect(store.version).to.equal(before.version + 1);
    expect(await store.ask(ask)).to.equal(true);
    const after = content(store);
    expect(after.filter((q) => !before.quads.includes(q))).to.have.length(1);
    expect(after.filter((q) => !before.quads.includes(q))[0]).to.contain('"later"');
    await store.close();
    const reopened = await openDurableStore(dir);
    expect(content(reopened)).to.deep.equal(after);
    await reopened.close();
  });

  it('answers the first refused load in text order when a large check is split between workers, changing nothing', async function () {
    this.timeout(60_000);
    const store = await openDurableStore(dir);
    await store.update(sparql`INSERT DATA { GRAPH <urn:g> { <urn:s> <urn:p> "kept" } }`, ['urn:g']);
    const before = { quads: content(store), journal: await journalBytes(), version: store.version };
    let text = '';
    for (let i = 0; text.length <= 600_000; i++) text += `<urn:s:${i}> <urn:p> "one of ten loads, line ${i}" .\n`;
    // Ten loads of about 600 KB: twenty pieces of the check, cut into a run per checker (one per core, at most two).
    const ops = (refusedAt: number[]): WriteOp[] => Array.from({ length: 10 }, (_, i) => ({
      kind: 'load', graph: `urn:g:${i}`, format: 'application/n-triples',
      data: refusedAt.includes(i) ? `${text}<http://example.org/refused%zz> <urn:p> "refused" .\n` : text,
    }));
    for (const refusedAt of [[2, 8], [8], [0, 1, 9]]) {
      const error = await store.write(ops(refusedAt)).then(() => null, (err: unknown) => err as WriteRefusedError);
      expect(error, `refused at ${refusedAt.join(', ')}`).to.be.instanceOf(WriteRefusedError);
      expect(error!.opIndex).to.equal(refusedAt[0]);
      expect(error!.message).to.contain("'%zz'");
    }
    await store.write(ops([]));
    expect(store.version).to.equal(before.version + 1);
    expect((await journalBytes()).subarray(0, before.journal.length).equals(before.journal)).to.equal(true);
    expect(content(store).length).to.equal(before.quads.length + 10 * text.split('\n').filter(Boolean).length);
    await store.close();
  });

  it('refuses a write whose first op the engine refuses, changing nothing', async () => {
    const store = await openDurableStore(dir);
    const before = content(store);
    let refused: unknown;
    try {
      await store.write([{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH <urn:g> { <http://example.org/a%zz> <urn:p> 1 } }`, graphs: ['urn:g'] },
        { kind: 'load', graph: 'urn:g', format: 'application/n-triples', data: '<urn:s> <urn:p> "fine" .\n' }]);
    } catch (err) {
      refused = err;
    }
    expect(refused).to.be.instanceOf(WriteRefusedError);
    expect(content(store)).to.deep.equal(before);
    await store.close();
  });
});
