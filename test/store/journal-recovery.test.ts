import { createHash } from 'node:crypto';
import { appendFile, copyFile, open, readFile, readdir, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { expect } from 'chai';
import { JournalCorruptError, openDurableStore } from '../../src/store/embedded/durable.js';
import { runWsm } from '../helpers/cli.js';
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

/** Reopens after a torn last record: records 1-4 there, 5 gone, a warning; then a further write survives a clean reopen. */
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

/** Opening refuses with `JournalCorruptError` at `offset` of `file`, and changes nothing; so does the next try. */
async function expectRefused(file: string, offset: number, problem: RegExp): Promise<void> {
  const before = await readFile(file);
  for (let i = 0; i < 2; i++) {
    let error: Error | undefined;
    await openDurableStore(dirname(file)).then((s) => s.close(), (e: Error) => (error = e));
    expect(error, 'the store opened').to.be.instanceOf(JournalCorruptError);
    expect(error!.message).to.contain(`journal ${file} is damaged at byte ${offset}`);
    expect(error!.message).to.match(problem);
    expect(error!.message).to.contain('journal accept-loss');
    expect((error as JournalCorruptError).offset).to.equal(offset);
    expect((await readFile(file)).equals(before), 'the journal was changed').to.equal(true);
  }
}

describe('journal recovery', function () {
  this.timeout(60_000);
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

  it('refuses to open on a whole last record that fails its checksum, naming the file and offset, and leaves the file as it is', async () => {
    const { file, lastStart, end } = original;
    // Its checksum, its sequence number, its payload: every byte the header announces is there.
    for (const position of [lastStart + 5, lastStart + 14, lastStart + 25, end - 3]) {
      await copyFile(pristine, file);
      const bytes = await readFile(file);
      bytes[position] = bytes[position]! ^ 0x01;
      await writeFile(file, bytes);
      await expectRefused(file, lastStart, /bad checksum\).*record there is whole/);
      expect((await readFile(file)).equals(bytes), 'the journal was changed').to.equal(true);
    }
  });

  it('refuses to open on a whole last record with a valid checksum but bad JSON, or out of sequence', async () => {
    const { file, lastStart } = original;
    // A well-formed record (right length and checksum) whose payload is cut-off JSON.
    const payload = Buffer.from('[{"kind":"update"', 'utf8');
    const lengthAndSeq = Buffer.alloc(12);
    lengthAndSeq.writeUInt32LE(payload.length, 0);
    lengthAndSeq.writeBigUInt64LE(5n, 4);
    const sum = createHash('sha256').update(lengthAndSeq).update(payload).digest().subarray(0, 8);
    const badJson = Buffer.concat([lengthAndSeq.subarray(0, 4), sum, lengthAndSeq.subarray(4), payload]);

    const outOfSequence = encodeRecord(9, [{ kind: 'update', sparql: sparql`INSERT DATA { <urn:x> <urn:y> <urn:z> }`, graphs: [''] }]);
    for (const [tail, problem] of [[badJson, /not JSON/], [outOfSequence, /sequence 9 does not follow 4/]] as const) {
      await copyFile(pristine, file);
      await truncate(file, lastStart);
      await appendFile(file, tail);
      await expectRefused(file, lastStart, problem);
    }
  });

  it('wsm journal accept-loss cuts a whole corrupt last record, keeping its bytes; the store then opens without it', async () => {
    const { file, lastStart, end } = original;
    const bytes = await readFile(file);
    bytes[end - 3] = bytes[end - 3]! ^ 0x01;
    await writeFile(file, bytes);
    const res = await runWsm(['journal', 'accept-loss'], { WSM_DATA_DIR: dir });
    expect(res.code, res.stderr).to.equal(0);
    expect(res.stdout).to.contain(`cut at byte ${lastStart}`);
    expect(res.stdout).to.contain('the store now ends at record 4');
    expect((await readFile(`${file}.dropped-at-${lastStart}`)).equals(bytes.subarray(lastStart))).to.equal(true);
    const { store, warnings } = await openCollecting(dir);
    expect(warnings).to.deep.equal([]);
    expect([...(await numbers(store)).a].sort()).to.deep.equal([1, 2, 3, 4]);
    await store.close();
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
