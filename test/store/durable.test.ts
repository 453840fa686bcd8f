import { spawn } from 'node:child_process';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'chai';
import oxigraph from 'oxigraph';
import { openDurableStore } from '../../src/store/embedded/durable.js';
import { content, insertPair, numbers, openCollecting, tempDir } from './helpers.js';
import { sparql } from '../../src/rdf/sparql.js';

describe('durable store', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => ({ dir, cleanup } = await tempDir()));
  afterEach(async () => cleanup());

  it('keeps writes across close and reopen', async () => {
    const first = await openDurableStore(dir);
    for (let i = 0; i < 5; i++) await first.update(insertPair(i), ['urn:g:test']);
    await first.write([
      { kind: 'load', graph: 'urn:g:loaded', format: 'text/turtle', data: '<urn:x> <urn:y> "z" .' },
      { kind: 'update', sparql: sparql`DELETE DATA { GRAPH <urn:g:test> { <urn:n:0> <urn:p:a> 0 } }`, graphs: ['urn:g:test'] },
    ]);
    const before = content(first);
    await first.close();

    const { store, warnings } = await openCollecting(dir);
    expect(content(store)).to.deep.equal(before);
    expect((await store.graphNames()).sort()).to.deep.equal(['urn:g:loaded', 'urn:g:test']);
    expect(store.replayInfo.recordsReplayed).to.equal(6);
    expect(warnings).to.deep.equal([]);
    await store.close();
  });

  it('gives the same state after snapshot, more writes and reopen', async () => {
    const first = await openDurableStore(dir);
    for (let i = 0; i < 10; i++) await first.update(insertPair(i), ['urn:g:test']);
    await first.snapshot();
    for (let i = 10; i < 15; i++) await first.update(insertPair(i), ['urn:g:test']);
    await first.update(sparql`DELETE DATA { GRAPH <urn:g:test> { <urn:n:3> <urn:p:a> 3 } }`, ['urn:g:test']);
    const before = content(first);
    expect(first.stats().snapshots).to.equal(1);
    await first.close();

    // The journal from the start stays: it is what a corrupt snapshot would fall back to.
    const files = (await readdir(dir)).sort();
    expect(files.filter((f) => f.startsWith('journal-'))).to.deep.equal(['journal-0000000000000001.log', 'journal-0000000000000011.log']);
    expect(files.filter((f) => f.startsWith('snapshot-'))).to.deep.equal(['snapshot-0000000000000010.trig']);

    const { store, warnings } = await openCollecting(dir);
    expect(content(store)).to.deep.equal(before);
    expect(store.replayInfo).to.include({ snapshotSeq: 10, recordsReplayed: 6, lastSeq: 16 });
    expect(warnings).to.deep.equal([]);
    // A second snapshot after reopening supersedes the first.
    await store.snapshot();
    await store.close();
    // Two snapshots now: the older one and the journal after it are kept, the journal before it goes.
    const after = (await readdir(dir)).sort();
    expect(after.filter((f) => f.startsWith('snapshot-'))).to.deep.equal(['snapshot-0000000000000010.trig', 'snapshot-0000000000000016.trig']);
    expect(after.filter((f) => f.startsWith('journal-'))).to.deep.equal(['journal-0000000000000011.log', 'journal-0000000000000017.log']);
    const again = await openDurableStore(dir);
    expect(content(again)).to.deep.equal(before);
    expect(again.replayInfo).to.include({ snapshotSeq: 16, recordsReplayed: 0, journalFiles: 1 });
    await again.close();
  });

  it('keeps writes racing a snapshot', async () => {
    const store = await openDurableStore(dir);
    const writes: Promise<void>[] = [];
    for (let i = 0; i < 50; i++) writes.push(store.update(insertPair(i), ['urn:g:test'])); // not yet fsynced
    const snap = store.snapshot();
    for (let i = 50; i < 100; i++) writes.push(store.update(insertPair(i), ['urn:g:test'])); // same tick as the snapshot call
    await Promise.resolve();
    for (let i = 100; i < 150; i++) writes.push(store.update(insertPair(i), ['urn:g:test'])); // while it runs
    await Promise.all([snap, ...writes]);
    for (let i = 150; i < 160; i++) await store.update(insertPair(i), ['urn:g:test']);
    await store.close();

    const reopened = await openDurableStore(dir);
    const { a, b } = await numbers(reopened);
    expect(a.size).to.equal(160);
    expect(b.size).to.equal(160);
    expect(reopened.replayInfo.snapshotSeq).to.be.greaterThan(0);
    await reopened.close();
  });

  it('writes a snapshot in a worker thread from the previous snapshot and the journal, while writes go on', async () => {
    const store = await openDurableStore(dir);
    for (let i = 0; i < 20; i++) await store.update(insertPair(i), ['urn:g:test']);
    await store.write([{ kind: 'load', graph: 'urn:g:blank', format: 'text/turtle', data: '<urn:s> <urn:p> [ <urn:q> "inner" ] .' }]);
    await store.update(sparql`INSERT { GRAPH <urn:g:copy> { ?s <urn:p:copied> ?o } } WHERE { GRAPH <urn:g:test> { ?s <urn:p:a> ?o } }`, ['urn:g:copy']);
    const claimed = await store.writeIf({ ask: sparql`ASK { GRAPH <urn:g:test> { <urn:n:1> <urn:p:a> 1 } }`, expect: false }, [
      { kind: 'update', sparql: sparql`INSERT DATA { GRAPH <urn:g:never> { <urn:x> <urn:y> 1 } }`, graphs: ['urn:g:never'] },
    ]);
    expect(claimed, 'a conditional write whose condition fails').to.equal(false);
    const held = await store.writeIf({ ask: sparql`ASK { GRAPH <urn:g:test> { <urn:n:1> <urn:p:a> 1 } }`, expect: true }, [
      { kind: 'update', sparql: sparql`INSERT DATA { GRAPH <urn:g:held> { <urn:x> <urn:y> 2 } }`, graphs: ['urn:g:held'] },
    ]);
    expect(held, 'a conditional write whose condition holds').to.equal(true);
    await store.snapshot();
    expect(store.stats()).to.include({ snapshots: 1, snapshotsByWorker: 1, snapshotSeq: 24 });
    // The second starts from the first, and writes made while it runs are kept, after it.
    for (let i = 20; i < 30; i++) await store.update(insertPair(i), ['urn:g:test']);
    const writes: Promise<void>[] = [];
    const taking = store.snapshot();
    for (let i = 30; i < 40; i++) writes.push(store.update(insertPair(i), ['urn:g:test']));
    await Promise.all([taking, ...writes]);
    expect(store.stats().snapshotsByWorker).to.equal(2);
    // Blank node labels are the engine's own: compared by shape.
    const shape = (lines: string[]) => lines.map((l) => l.replace(/_:\w+/g, '_:b')).sort();
    const before = shape(content(store));
    await store.close();
    const reopened = await openDurableStore(dir);
    expect(shape(content(reopened))).to.deep.equal(before);
    expect(before.filter((l) => l.includes('"inner"'))).to.have.length(1);
    expect(reopened.replayInfo.snapshotSeq).to.be.at.least(34);
    expect(before.filter((l) => l.includes('urn:g:held'))).to.have.length(1);
    expect(before.filter((l) => l.includes('urn:g:never'))).to.have.length(0);
    await reopened.close();
  });

  it('has the main thread take the snapshot when the worker\'s rebuilt store does not match the live one, or when told so', async () => {
    const infos: string[] = [];
    const store = await openDurableStore(dir, { onInfo: (m) => infos.push(m) });
    for (let i = 0; i < 5; i++) await store.update(insertPair(i), ['urn:g:test']);
    // Quads put in the engine behind the journal's back (as bench fixtures do): the journal cannot rebuild them.
    store.raw.load('<urn:behind> <urn:the> <urn:back> .', { format: 'application/n-triples', to_graph_name: oxigraph.namedNode('urn:g:raw') });
    await store.snapshot();
    expect(store.stats()).to.include({ snapshots: 1, snapshotsByWorker: 0 });
    expect(infos.some((m) => /snapshot in a worker thread failed \(.*holds 10 quads, the live store held 11/.test(m)), infos.join('\n')).to.equal(true);
    const before = content(store);
    await store.close();
    const reopened = await openDurableStore(dir, { snapshotInWorkerMaxBytes: 0 });
    expect(content(reopened)).to.deep.equal(before);
    await reopened.update(insertPair(5), ['urn:g:test']);
    await reopened.snapshot();
    expect(reopened.stats()).to.include({ snapshots: 1, snapshotsByWorker: 0 });
    await reopened.close();
  });

  it('snapshots automatically past snapshotAfterBytes without losing writes', async () => {
    const store = await openDurableStore(dir, { snapshotAfterBytes: 4000 });
    const writes: Promise<void>[] = [];
    for (let i = 0; i < 300; i++) {
      writes.push(store.update(insertPair(i), ['urn:g:test']));
      if (i % 7 === 0) await new Promise((r) => setImmediate(r));
    }
    await Promise.all(writes);
    // Taken in the background once the journal passed the threshold; it may finish after the writes do.
    for (const deadline = Date.now() + 20_000; store.stats().snapshots < 1 && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 20));
    expect(store.stats().snapshots).to.be.at.least(1);
    const before = content(store);
    await store.close();
    const reopened = await openDurableStore(dir);
    expect(content(reopened)).to.deep.equal(before);
    expect((await numbers(reopened)).a.size).to.equal(300);
    await reopened.close();
  });

  it('group commit: 200 concurrent writes share few fsyncs', async () => {
    const store = await openDurableStore(dir);
    const writes: Promise<void>[] = [];
    for (let i = 0; i < 200; i++) writes.push(store.update(insertPair(i), ['urn:g:test']));
    await Promise.all(writes);
    const { fsyncs, appends } = store.stats();
    expect(appends).to.equal(200);
    expect(fsyncs).to.be.at.most(5);

    // Staggered writers (a new write every few microtasks) still batch.
    const staggered: Promise<void>[] = [];
    for (let i = 200; i < 400; i++) {
      staggered.push(store.update(insertPair(i), ['urn:g:test']));
      if (i % 20 === 0) await new Promise((r) => setImmediate(r));
    }
    await Promise.all(staggered);
    expect(store.stats().fsyncs - fsyncs).to.be.below(50);
    await store.close();

    const reopened = await openDurableStore(dir);
    const { a, b } = await numbers(reopened);
    expect([a.size, b.size]).to.deep.equal([400, 400]);
    await reopened.close();
  });

  it('rejects writes after close', async () => {
    const store = await openDurableStore(dir);
    await store.close();
    let error: Error | undefined;
    await store.update(insertPair(1), ['urn:g:test']).catch((e: Error) => (error = e));
    expect(error?.message).to.match(/closed/);
  });

  describe('lock', () => {
    it('refuses a second open of the same directory with a clear message', async () => {
      const store = await openDurableStore(dir);
      let error: Error | undefined;
      await openDurableStore(dir).catch((e: Error) => (error = e));
      expect(error?.message).to.contain(`another process (pid ${process.pid}) is using the data directory`);
      await store.close();
      // Released at close: opening works again.
      const again = await openDurableStore(dir);
      await again.close();
    });

    it('takes over a lock left by a process that no longer runs', async () => {
      const child = spawn(process.execPath, ['-e', '']);
      const deadPid = child.pid!;
      await new Promise((resolve) => child.on('exit', resolve));
      await writeFile(join(dir, 'lock'), `${deadPid}\n`);
      const infos: string[] = [];
      const store = await openDurableStore(dir, { onInfo: (m) => infos.push(m) });
      expect(infos.join('\n')).to.contain(`pid ${deadPid} no longer runs`);
      expect((await readFile(join(dir, 'lock'), 'utf8')).trim()).to.equal(String(process.pid));
      await store.update(insertPair(1), ['urn:g:test']);
      await store.close();
    });
  });
});

describe('durable store: multi-update writes', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => ({ dir, cleanup } = await tempDir()));
  afterEach(async () => cleanup());

  it('applies several updates that each declare prefixes as one write, and keeps them after reopen', async () => {
    const store = await openDurableStore(dir);
    expect(await store.isEmpty()).to.equal(true);
    await store.write([
      { kind: 'update', sparql: sparql`PREFIX ex: <urn:ex:> INSERT DATA { GRAPH <urn:g:a> { ex:s ex:p 1 } }`, graphs: ['urn:g:a'] },
      { kind: 'update', sparql: sparql`PREFIX ex: <urn:ex:>\nPREFIX other: <urn:other:> INSERT DATA { GRAPH <urn:g:a> { ex:s other:p 2 } }`, graphs: ['urn:g:a'] },
      { kind: 'update', sparql: sparql`PREFIX ex: <urn:different:> INSERT DATA { GRAPH <urn:g:a> { ex:s ex:p 3 } }`, graphs: ['urn:g:a'] },
    ]);
    const count = async () => Number((await store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH <urn:g:a> { ?s ?p ?o } }`))[0]!.n!.value);
    expect(await count()).to.equal(3);
    expect(await store.size()).to.equal(3);
    expect(await store.isEmpty()).to.equal(false);
    await store.update(sparql`INSERT DATA { GRAPH <urn:g:b> { <urn:x> <urn:y> <urn:z> } }`, ['urn:g:b']);
    expect(await store.size(), 'the count follows every write').to.equal(4);
    // Graph management uses the SILENT forms (store contract): every write is checked on an empty scratch store.
    await store.update(sparql`DROP SILENT GRAPH <urn:g:b>`, ['urn:g:b']);
    expect(await store.ask(sparql`ASK { GRAPH <urn:g:a> { <urn:different:s> <urn:different:p> 3 } }`)).to.equal(true);
    await store.close();
    const reopened = await openDurableStore(dir);
    expect(Number((await reopened.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH <urn:g:a> { ?s ?p ?o } }`))[0]!.n!.value)).to.equal(3);
    await reopened.close();
  });

  it('refuses a write whose later update is malformed, leaving the earlier ones unapplied', async () => {
    const store = await openDurableStore(dir);
    let error: unknown = null;
    try {
      await store.write([
        { kind: 'update', sparql: sparql`PREFIX ex: <urn:ex:> INSERT DATA { GRAPH <urn:g:a> { ex:s ex:p 1 } }`, graphs: ['urn:g:a'] },
        { kind: 'update', sparql: sparql`PREFIX ex: <urn:ex:> INSERT DATA { GRAPH <urn:g:a> { ex:s ex:p `, graphs: ['urn:g:a'] },
      ]);
    } catch (err) { error = err; }
    expect(error).to.be.instanceOf(Error);
    expect(await store.size()).to.equal(0);
    await store.close();
  });
});
