import { createHash } from 'node:crypto';
import { appendFile, copyFile, open, readFile, readdir, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'chai';
import { openDurableStore } from '../../src/store/durable.js';
import { encodeRecord } from '../../src/store/journal.js';
import { insertPair, numbers, openCollecting, tempDir } from './helpers.js';
import { sparql } from '../../src/rdf/sparql.js';

/**
 * Four writes, close, a fifth write, close: the fifth record is exactly the
 * bytes [lastStart, end) of the journal file.
 */
async function journalWithFiveRecords(dir: string): Promise<{ file: string; lastStart: number; end: number }> {
  const store = await openDurableStore(dir);
  for (let i = 1; i <= 4; i++) await store.update(insertPair(i), ['urn:g:test']);
  const file = store.stats().currentFile;
  await store.close();
  const lastStart = (await stat(file)).size;
  const again = await openDurableStore(dir);
  await again.update(insertPair(5), ['urn:g:test']);
  await again.close();
  return { file, lastStart, end: (await stat(file)).size };
}

/** Reopens after damage: records 1-4 there, 5 gone, a warning; then a further write survives a clean reopen. */
async function expectLastRecordCut(dir: string, expectedLeft: number): Promise<void> {
  const { store, warnings } = await openCollecting(dir);
  const { a, b } = await numbers(store);
  expect([...a].sort()).to.deep.equal([1, 2, 3, 4]);
  expect([...b].sort()).to.deep.equal([1, 2, 3, 4]);
  expect(warnings).to.have.length(1);
  expect(warnings[0]).to.match(/journal .*cutting/);
  expect(store.replayInfo.cutBytes).to.be.greaterThan(0);
  expect(store.replayInfo.lastSeq).to.equal(4);
  expect((await stat(store.stats().currentFile)).size).to.equal(expectedLeft);
  await store.update(insertPair(6), ['urn:g:test']);
  await store.close();

  const { store: clean, warnings: none } = await openCollecting(dir);
  expect([...(await numbers(clean)).a].sort()).to.deep.equal([1, 2, 3, 4, 6]);
  expect(none).to.deep.equal([]);
  expect(clean.replayInfo).to.include({ cutBytes: 0, lastSeq: 5 });
  await clean.close();
}

describe('journal recovery', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let original: { file: string; lastStart: number; end: number };
  let pristine: string;

  beforeEach(async () => {
    ({ dir, cleanup } = await tempDir());
    original = await journalWithFiveRecords(dir);
    pristine = join(dir, 'pristine.copy');
    await copyFile(original.file, pristine);
  });
  afterEach(async () => cleanup());

  it('cuts a torn last record at several offsets', async () => {
    const { file, lastStart, end } = original;
    const offsets = [lastStart + 1, lastStart + 4, lastStart + 11, lastStart + 19, lastStart + 20, lastStart + 40, end - 1];
    for (const offset of offsets) {
      await copyFile(pristine, file);
      await truncate(file, offset);
      await expectLastRecordCut(dir, lastStart);
    }
  });

  it('cuts a last record whose checksum or payload is corrupt', async () => {
    const { file, lastStart, end } = original;
    for (const position of [lastStart + 5, lastStart + 14, end - 3]) {
      await copyFile(pristine, file);
      const bytes = await readFile(file);
      bytes[position] = bytes[position]! ^ 0xff;
      await writeFile(file, bytes);
      await expectLastRecordCut(dir, lastStart);
    }
  });

  it('cuts a record with a valid checksum but bad JSON, or out of sequence', async () => {
    const { file, lastStart } = original;
    // A well-formed record (right length and checksum) whose payload is cut-off JSON.
    const payload = Buffer.from('[{"kind":"update"', 'utf8');
    const lengthAndSeq = Buffer.alloc(12);
    lengthAndSeq.writeUInt32LE(payload.length, 0);
    lengthAndSeq.writeBigUInt64LE(5n, 4);
    const sum = createHash('sha256').update(lengthAndSeq).update(payload).digest().subarray(0, 8);
    const badJson = Buffer.concat([lengthAndSeq.subarray(0, 4), sum, lengthAndSeq.subarray(4), payload]);

    const outOfSequence = encodeRecord(9, [{ kind: 'update', sparql: sparql`INSERT DATA { <urn:x> <urn:y> <urn:z> }`, graphs: [''] }]);
    for (const tail of [badJson, outOfSequence]) {
      await copyFile(pristine, file);
      await truncate(file, lastStart);
      await appendFile(file, tail);
      await expectLastRecordCut(dir, lastStart);
    }
  });

  it('refuses to open when records are missing between journal files', async () => {
    // A later journal file whose first record does not follow the history.
    await copyFile(pristine, original.file);
    const name = (await readdir(dir)).find((f) => f.startsWith('journal-'))!;
    expect(name).to.equal('journal-0000000000000001.log');
    const later = join(dir, 'journal-0000000000000008.log');
    const handle = await open(later, 'w');
    await handle.write(encodeRecord(8, [{ kind: 'update', sparql: sparql`INSERT DATA { <urn:x> <urn:y> <urn:z> }`, graphs: [''] }]));
    await handle.close();
    let error: Error | undefined;
    await openDurableStore(dir).catch((e: Error) => (error = e));
    expect(error?.message).to.match(/record 8 follows 5/);
    // The lock was released: after repair the directory opens.
    await rm(later);
    const store = await openDurableStore(dir);
    expect(store.replayInfo.lastSeq).to.equal(5);
    await store.close();
  });
});
