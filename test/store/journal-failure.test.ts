import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'chai';
import { openDurableStore, type DurableStore } from '../../src/store/embedded/durable.js';
import { readJournalFile } from '../../src/store/journal.js';
import { StoreUnavailableError } from '../../src/store/store.js';
import { JournalFaults } from '../helpers/journal-faults.js';
import { insertPair, numbers, openCollecting, tempDir } from './helpers.js';
import { sparql } from '../../src/rdf/sparql.js';

/** The write's rejection (fails the test if it resolved). */
async function rejection(write: Promise<void>): Promise<unknown> {
  try {
    await write;
  } catch (err) {
    return err;
  }
  expect.fail('the write was acknowledged although the journal could not be written');
}

async function sorted(store: DurableStore): Promise<{ a: number[]; b: number[] }> {
  const { a, b } = await numbers(store);
  return { a: [...a].sort((x, y) => x - y), b: [...b].sort((x, y) => x - y) };
}

/** Every record of every journal file in the directory, in file order, and whether any file has bytes past its last whole record. */
async function journalRecords(dir: string): Promise<{ seqs: number[]; numbersWritten: number[]; damaged: string[] }> {
  const files = (await readdir(dir)).filter((f) => /^journal-\d{16}\.log$/.test(f)).sort();
  const seqs: number[] = [];
  const numbersWritten: number[] = [];
  const damaged: string[] = [];
  for (const f of files) {
    const contents = await readJournalFile(join(dir, f));
    if (contents.validBytes !== contents.size) damaged.push(`${f}: ${contents.problem}`);
    for (const r of contents.records) {
      seqs.push(r.seq);
      for (const op of r.ops) {
        const m = op.kind === 'update' ? /<urn:n:(\d+)>/.exec(op.sparql) : null;
        if (m) numbersWritten.push(Number(m[1]));
      }
    }
  }
  return { seqs, numbersWritten, damaged };
}

describe('store: a journal that cannot be written (ENOSPC)', function () {
  this.timeout(60_000);
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => ({ dir, cleanup } = await tempDir()));
  afterEach(async () => cleanup());

  it('a failed journal write: the write rejects, no read sees it, the partial record is cut, and the journal works again once there is room', async () => {
    const faults = new JournalFaults();
    const { store, warnings } = await openCollecting(dir, { journalFileOps: faults.ops });
    await store.update(insertPair(1), ['urn:g:test']);
    await store.update(insertPair(2), ['urn:g:test']);
    const version = store.version;
    const heard: unknown[] = [];
    store.onWrite((ops) => heard.push(ops));

    // The disk fills up part-way through the record: 7 bytes of it reach the file.
    faults.start('write', 7);
    const err = await rejection(store.update(insertPair(3), ['urn:g:test']));
    expect(err).to.be.instanceOf(StoreUnavailableError);
    expect((err as StoreUnavailableError).errno).to.equal('ENOSPC');
    expect(await sorted(store)).to.deep.equal({ a: [1, 2], b: [1, 2] });
    expect(await store.ask(sparql`ASK { GRAPH <urn:g:test> { <urn:n:3> ?p ?o } }`)).to.equal(false);
    expect(store.version, 'caches were not told of a write that did not happen').to.equal(version);
    expect(heard).to.deep.equal([]);
    expect(store.health()).to.include({ writable: false });
    expect(store.health().reason).to.match(/ENOSPC/);
    expect(warnings.join('\n')).to.match(/ENOSPC/);
    // The partly written record is gone from the file already.
    expect((await journalRecords(dir)).damaged).to.deep.equal([]);

    // Every write tries again, and fails while the disk is full.
    expect(await rejection(store.update(insertPair(4), ['urn:g:test']))).to.be.instanceOf(StoreUnavailableError);

    faults.clear();
    await store.update(insertPair(5), ['urn:g:test']);
    expect(store.health()).to.deep.equal({ writable: true });
    expect(await sorted(store)).to.deep.equal({ a: [1, 2, 5], b: [1, 2, 5] });
    await store.close();

    const journal = await journalRecords(dir);
    expect(journal).to.deep.equal({ seqs: [1, 2, 3], numbersWritten: [1, 2, 5], damaged: [] });
    const { store: reopened, warnings: atStart } = await openCollecting(dir);
    expect(atStart, 'no torn tail to cut, no damage to refuse').to.deep.equal([]);
    expect(await sorted(reopened)).to.deep.equal({ a: [1, 2, 5], b: [1, 2, 5] });
    expect(reopened.replayInfo.lastSeq).to.equal(3);
    await reopened.close();
  });

  it('a failed fsync fails the whole group-commit batch, the file is cut and not written again, and writes go on in a new file', async () => {
    const faults = new JournalFaults();
    const { store } = await openCollecting(dir, { journalFileOps: faults.ops });
    for (let i = 1; i <= 3; i++) await store.update(insertPair(i), ['urn:g:test']);
    const firstFile = store.stats().currentFile;
    const fsyncsBefore = store.stats().fsyncs;

    faults.start('datasync');
    // Issued in one tick: one batch, one (failing) fsync.
    const batch = [10, 11, 12, 13, 14].map((n) => store.update(insertPair(n), ['urn:g:test']));
    const outcomes = await Promise.allSettled(batch);
    expect(outcomes.map((o) => o.status)).to.deep.equal(['rejected', 'rejected', 'rejected', 'rejected', 'rejected']);
    for (const o of outcomes) expect((o as PromiseRejectedResult).reason).to.be.instanceOf(StoreUnavailableError);
    expect(store.stats().fsyncs, 'no fsync per write: the batch had one').to.equal(fsyncsBefore);
    expect(await sorted(store)).to.deep.equal({ a: [1, 2, 3], b: [1, 2, 3] });
    expect(store.health().writable).to.equal(false);
    // Still failing: cutting the file needs an fsync too, so nothing is written after it.
    expect(await rejection(store.update(insertPair(15), ['urn:g:test']))).to.be.instanceOf(StoreUnavailableError);

    faults.clear();
    const concurrent = [20, 21, 22].map((n) => store.update(insertPair(n), ['urn:g:test']));
    await Promise.all(concurrent);
    expect(store.health().writable).to.equal(true);
    expect(store.stats().currentFile, 'a new journal file after a failed fsync').to.not.equal(firstFile);
    expect(store.stats().currentFile).to.match(/journal-0000000000000004\.log$/);
    expect((await stat(firstFile)).size, 'the old file holds exactly the three records before the failure')
      .to.equal((await readJournalFile(firstFile)).validBytes);
    await store.close();

    const journal = await journalRecords(dir);
    expect(journal).to.deep.equal({ seqs: [1, 2, 3, 4, 5, 6], numbersWritten: [1, 2, 3, 20, 21, 22], damaged: [] });
    const { store: reopened, warnings } = await openCollecting(dir);
    expect(warnings).to.deep.equal([]);
    expect(await sorted(reopened)).to.deep.equal({ a: [1, 2, 3, 20, 21, 22], b: [1, 2, 3, 20, 21, 22] });
    await reopened.update(insertPair(23), ['urn:g:test']);
    await reopened.close();
    const again = await openDurableStore(dir);
    expect((await sorted(again)).a).to.deep.equal([1, 2, 3, 20, 21, 22, 23]);
    await again.close();
  });

  it('a failed fsync of the very first batch of a file replaces that file', async () => {
    const faults = new JournalFaults();
    const { store } = await openCollecting(dir, { journalFileOps: faults.ops });
    faults.start('datasync');
    expect(await rejection(store.update(insertPair(1), ['urn:g:test']))).to.be.instanceOf(StoreUnavailableError);
    faults.clear();
    await store.update(insertPair(2), ['urn:g:test']);
    await store.close();
    expect((await readdir(dir)).filter((f) => f.startsWith('journal-'))).to.deep.equal(['journal-0000000000000001.log']);
    expect(await journalRecords(dir)).to.deep.equal({ seqs: [1], numbersWritten: [2], damaged: [] });
    const reopened = await openDurableStore(dir);
    expect((await sorted(reopened)).a).to.deep.equal([2]);
    await reopened.close();
  });

  it('becomes writable again by itself (a probe) once there is room, without a client write', async () => {
    const faults = new JournalFaults();
    const { store } = await openCollecting(dir, { journalFileOps: faults.ops, journalProbeMs: 50, journalProbeMaxMs: 200 });
    await store.update(insertPair(1), ['urn:g:test']);
    faults.start('write');
    expect(await rejection(store.update(insertPair(2), ['urn:g:test']))).to.be.instanceOf(StoreUnavailableError);
    // While the disk stays full the probes fail too.
    for (const until = Date.now() + 10_000; faults.failed < 3 && Date.now() < until;) await new Promise((r) => setTimeout(r, 20));
    expect(faults.failed, 'the write and at least two probes failed').to.be.at.least(3);
    expect(store.health().writable).to.equal(false);
    faults.clear();
    const deadline = Date.now() + 10_000;
    while (!store.health().writable && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(store.health()).to.deep.equal({ writable: true });
    await store.update(insertPair(3), ['urn:g:test']);
    await store.close();
    const reopened = await openDurableStore(dir);
    expect(await sorted(reopened)).to.deep.equal({ a: [1, 3], b: [1, 3] });
    await reopened.close();
  });

  it('a snapshot taken after an outage covers exactly the writes that were acknowledged', async () => {
    const faults = new JournalFaults();
    const { store } = await openCollecting(dir, { journalFileOps: faults.ops });
    await store.update(insertPair(1), ['urn:g:test']);
    faults.start('datasync');
    await Promise.allSettled([store.update(insertPair(2), ['urn:g:test']), store.update(insertPair(3), ['urn:g:test'])]);
    faults.clear();
    await store.update(insertPair(4), ['urn:g:test']);
    await store.snapshot();
    await store.update(insertPair(5), ['urn:g:test']);
    await store.close();
    const { store: reopened, warnings } = await openCollecting(dir);
    expect(warnings).to.deep.equal([]);
    expect(reopened.replayInfo).to.include({ snapshotSeq: 2, recordsReplayed: 1, lastSeq: 3 });
    expect((await sorted(reopened)).a).to.deep.equal([1, 4, 5]);
    await reopened.close();
  });
});
