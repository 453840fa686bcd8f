import { createHash } from 'node:crypto';
import { mkdir, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'chai';
import { JournalCorruptError, LostHistoryError, openDurableStore } from '../../src/store/embedded/durable.js';
import { runWsm } from '../helpers/cli.js';
import { startTestServer } from '../helpers/server.js';
import { content, insertPair, openCollecting, shape, tempDir } from './helpers.js';
import { sparql } from '../../src/rdf/sparql.js';

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

async function numbersIn(store: Awaited<ReturnType<typeof openDurableStore>>): Promise<number[]> {
  const rows = await store.select(sparql`SELECT DISTINCT ?n WHERE { GRAPH <urn:g:test> { ?s <urn:p:a> ?n } }`);
  return rows.map((r) => Number(r!.n!.value)).sort((a, b) => a - b);
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** Flips one bit of a file at `position`. */
async function flipBit(file: string, position: number): Promise<void> {
  const bytes = await readFile(file);
  bytes[position] = bytes[position]! ^ 0x04;
  await writeFile(file, bytes);
}

async function openError(dir: string): Promise<Error> {
  let error: Error | undefined;
  await openDurableStore(dir).then((s) => s.close(), (e: Error) => (error = e));
  expect(error, 'the store opened').to.be.instanceOf(Error);
  return error!;
}

describe('recovery: damage in the middle of the journal', function () {
  this.timeout(60_000);
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => ({ dir, cleanup } = await tempDir()));
  afterEach(async () => cleanup());

  /** 40 writes, one record each; returns the journal file and the byte where record `n` starts. */
  async function fortyRecords(): Promise<{ file: string; starts: number[] }> {
    const store = await openDurableStore(dir);
    const file = store.stats().currentFile;
    const starts: number[] = [];
    for (let i = 1; i <= 40; i++) {
      starts.push(store.stats().currentFileBytes);
      await store.update(insertPair(i), ['urn:g:test']);
    }
    await store.close();
    return { file, starts };
  }

  it('refuses to start on one flipped bit in the middle, naming the file and offset, and leaves the file as it was', async () => {
    const { file, starts } = await fortyRecords();
    // Record 20's payload (past its 20-byte header).
    await flipBit(file, starts[19]! + 30);
    const before = await readFile(file);

    const error = await openError(dir);
    expect(error).to.be.instanceOf(JournalCorruptError);
    expect(error.message).to.contain(file);
    expect(error.message).to.contain(`byte ${starts[19]}`);
    expect(error.message).to.match(/20 valid record\(s\) \(seq 21-40/);
    expect(error.message).to.contain('npm run wsm -- journal accept-loss');
    expect((error as JournalCorruptError).offset).to.equal(starts[19]);
    expect(sha(await readFile(file)), 'the journal was changed').to.equal(sha(before));
    // Still refused on the next try: nothing was "repaired" behind the operator's back.
    expect((await openError(dir)).message).to.contain(`byte ${starts[19]}`);
    expect(sha(await readFile(file))).to.equal(sha(before));
  });

  it('wsm journal accept-loss cuts at the damage, keeps the cut bytes, says what was dropped; the store then opens', async () => {
    const { file, starts } = await fortyRecords();
    await flipBit(file, starts[24]! + 8); // record 25's checksum
    const before = await readFile(file);

    const res = await runWsm(['journal', 'accept-loss'], { WSM_DATA_DIR: dir });
    expect(res.code, res.stderr).to.equal(0);
    expect(res.stdout).to.contain(`cut at byte ${starts[24]}`);
    expect(res.stdout).to.match(/holding 15 valid record\(s\) \(seq 26-40\)/);
    expect(res.stdout).to.contain('the store now ends at record 24');
    expect((await stat(file)).size).to.equal(starts[24]);
    const kept = await readFile(`${file}.dropped-at-${starts[24]}`);
    expect(kept.equals(before.subarray(starts[24]!))).to.equal(true);

    const { store, warnings } = await openCollecting(dir);
    expect(warnings).to.deep.equal([]);
    expect(await numbersIn(store)).to.deep.equal(range(1, 24));
    expect(store.replayInfo.lastSeq).to.equal(24);
    await store.update(insertPair(100), ['urn:g:test']);
    await store.close();
    const again = await openDurableStore(dir);
    expect(await numbersIn(again)).to.deep.equal([...range(1, 24), 100]);
    await again.close();

    // On a sound journal the command changes nothing and says so.
    const sound = await runWsm(['journal', 'accept-loss'], { WSM_DATA_DIR: dir });
    expect(sound.code).to.equal(0);
    expect(sound.stdout).to.match(/Nothing to accept/);
  });

  it('refuses damage at the end of an older journal file when a later file holds records', async () => {
    const store = await openDurableStore(dir, { snapshotAfterBytes: 1 << 30 });
    for (let i = 1; i <= 5; i++) await store.update(insertPair(i), ['urn:g:test']);
    const older = store.stats().currentFile;
    await store.snapshot();
    for (let i = 6; i <= 8; i++) await store.update(insertPair(i), ['urn:g:test']);
    await store.close();
    // The snapshot is corrupt too, so the older file is needed; its last record is damaged.
    const snapshot = join(dir, (await readdir(dir)).find((f) => f.startsWith('snapshot-'))!);
    await flipBit(snapshot, 60);
    const size = (await stat(older)).size;
    await flipBit(older, size - 2);
    const error = await openError(dir);
    expect(error).to.be.instanceOf(JournalCorruptError);
    expect(error.message).to.match(/1 later journal file\(s\)/);
  });

  it('still cuts a torn tail at start (no valid record after it)', async () => {
    const { file, starts } = await fortyRecords();
    const bytes = await readFile(file);
    await writeFile(file, bytes.subarray(0, starts[39]! + 7));
    const { store, warnings } = await openCollecting(dir);
    expect(warnings.join('\n')).to.match(/cutting 7 bytes/);
    expect(await numbersIn(store)).to.deep.equal(range(1, 39));
    await store.close();
  });
});

describe('recovery: snapshots', function () {
  this.timeout(60_000);
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => ({ dir, cleanup } = await tempDir()));
  afterEach(async () => cleanup());

  /** Writes 1-10, snapshot, 11-16, snapshot, 17-20; returns the content and the snapshot files, newest first. */
  async function twoSnapshots(): Promise<{ before: string[]; snapshots: string[] }> {
    const store = await openDurableStore(dir);
    for (let i = 1; i <= 10; i++) await store.update(insertPair(i), ['urn:g:test']);
    await store.write([{ kind: 'load', graph: 'urn:g:blank', format: 'text/turtle', data: '<urn:x> <urn:y> [ <urn:z> "inner" ; <urn:w> [ <urn:v> 1 ] ] .' }]);
    await store.snapshot();
    for (let i = 11; i <= 16; i++) await store.update(insertPair(i), ['urn:g:test']);
    await store.snapshot();
    for (let i = 17; i <= 20; i++) await store.update(insertPair(i), ['urn:g:test']);
    const before = content(store);
    await store.close();
    const snapshots = (await readdir(dir)).filter((f) => f.startsWith('snapshot-')).sort().reverse().map((f) => join(dir, f));
    expect(snapshots).to.have.length(2);
    return { before, snapshots };
  }

  it('falls back to the previous snapshot and the journal after it when one bit of the newest flips', async () => {
    const { before, snapshots } = await twoSnapshots();
    const size = (await stat(snapshots[0]!)).size;
    await flipBit(snapshots[0]!, Math.floor(size / 2));
    const { store, warnings } = await openCollecting(dir);
    expect(warnings.join('\n')).to.contain(`snapshot ${snapshots[0]}: checksum mismatch; falling back to ${snapshots[1]}`);
    expect(store.replayInfo.snapshotSeq).to.equal(11);
    expect(shape(content(store))).to.deep.equal(shape(before));
    expect(await numbersIn(store)).to.deep.equal(range(1, 20));
    // Blank nodes kept their structure through the snapshot.
    expect(await store.ask(sparql`ASK { GRAPH <urn:g:blank> { <urn:x> <urn:y> ?b . ?b <urn:z> "inner" ; <urn:w> ?c . ?c <urn:v> 1 } }`)).to.equal(true);

    // The next snapshot replaces the corrupt one; the sound one it fell back to stays as the previous.
    await store.update(insertPair(21), ['urn:g:test']);
    await store.snapshot();
    await store.close();
    const names = (await readdir(dir)).filter((f) => f.startsWith('snapshot-')).sort();
    expect(names).to.deep.equal(['snapshot-0000000000000011.trig', 'snapshot-0000000000000022.trig']);
    const { store: again, warnings: none } = await openCollecting(dir);
    expect(none).to.deep.equal([]);
    expect(await numbersIn(again)).to.deep.equal(range(1, 21));
    await again.close();
  });

  it('checks a snapshot\'s checksum in a worker thread while it loads: one flipped bit still falls back, a sound one opens', async () => {
    const { before, snapshots } = await twoSnapshots();
    const aside = { snapshotCheckAsideMinBytes: 0 };
    const sound = await openCollecting(dir, aside);
    expect(sound.warnings).to.deep.equal([]);
    expect(sound.store.replayInfo.snapshotSeq).to.equal(17);
    expect(shape(content(sound.store))).to.deep.equal(shape(before));
    await sound.store.close();

    // A bit flipped inside a literal: the file still parses, only its checksum tells.
    const text = (await readFile(snapshots[0]!)).toString('latin1');
    await flipBit(snapshots[0]!, text.indexOf('"inner"') + 2);
    const { store, warnings } = await openCollecting(dir, aside);
    expect(warnings.join('\n')).to.contain(`snapshot ${snapshots[0]}: checksum mismatch; falling back to ${snapshots[1]}`);
    expect(store.replayInfo.snapshotSeq).to.equal(11);
    expect(shape(content(store))).to.deep.equal(shape(before));
    await store.close();

    // A bit that breaks the parse is reported as what it is, a changed byte.
    await flipBit(snapshots[0]!, text.indexOf('"inner"') + 2);
    await flipBit(snapshots[0]!, text.indexOf('<urn:x>'));
    const broken = await openCollecting(dir, aside);
    expect(broken.warnings.join('\n')).to.contain(`snapshot ${snapshots[0]}: checksum mismatch; falling back`);
    expect(shape(content(broken.store))).to.deep.equal(shape(before));
    await broken.store.close();
  });

  it('falls back when the newest snapshot is cut short, and to the whole journal when the only snapshot is bad', async () => {
    const { before, snapshots } = await twoSnapshots();
    const bytes = await readFile(snapshots[0]!);
    await writeFile(snapshots[0]!, bytes.subarray(0, bytes.length - 30));
    const first = await openCollecting(dir);
    expect(shape(content(first.store))).to.deep.equal(shape(before));
    expect(first.warnings.join('\n')).to.match(/cut short or corrupt/);
    await first.store.close();

    // Only one snapshot written: the journal from record 1 is kept for it.
    const { dir: other, cleanup: cleanOther } = await tempDir();
    try {
      const store = await openDurableStore(other);
      for (let i = 1; i <= 5; i++) await store.update(insertPair(i), ['urn:g:test']);
      await store.snapshot();
      await store.update(insertPair(6), ['urn:g:test']);
      await store.close();
      const only = join(other, (await readdir(other)).find((f) => f.startsWith('snapshot-'))!);
      await flipBit(only, 40);
      const { store: reopened, warnings } = await openCollecting(other);
      expect(warnings.join('\n')).to.match(/no older snapshot to fall back to/);
      expect(reopened.replayInfo).to.include({ snapshotSeq: 0, recordsReplayed: 6 });
      expect(await numbersIn(reopened)).to.deep.equal(range(1, 6));
      await reopened.close();
    } finally {
      await cleanOther();
    }
  });
});

describe('recovery: a data directory that lost its history', function () {
  this.timeout(60_000);

  it('refuses to start a new service in place of one whose journal and snapshots are gone, and says how to start fresh', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const first = await startTestServer({}, dir);
      const root = await first.token('root', { systemAdmin: true });
      const created = await first.http.post('/api/v1/workspaces').set({ Authorization: `Bearer ${root}` }).send({ slug: 'kept', owner: 'olive' });
      expect(created.status).to.equal(201);
      await first.close();
      expect((await readdir(dir))).to.include('issuer-key.json');
      for (const name of await readdir(dir)) {
        if (/^(journal-|snapshot-)/.test(name)) await rm(join(dir, name));
      }

      let error: Error | undefined;
      await startTestServer({}, dir).then((t) => t.close(), (e: Error) => (error = e));
      expect(error).to.be.instanceOf(LostHistoryError);
      expect(error!.message).to.contain(`Data directory ${dir}`);
      expect(error!.message).to.match(/history is lost/);
      expect(error!.message).to.match(/point WSM_DATA_DIR at a new, empty directory/);
      // Nothing was created in its place.
      expect((await readdir(dir)).filter((f) => /^(journal-|snapshot-)/.test(f))).to.deep.equal([]);

      // Through the command line too: exit code 1 and the message.
      const res = await runWsm(['serve'], { WSM_DATA_DIR: dir, WSM_REGISTRY: join(dir, 'registry'), PORT: '0', WSM_DEMO: 'false' });
      expect(res.code).to.equal(1);
      expect(res.stderr).to.match(/history is lost/);

      // Starting fresh deliberately: a new directory.
      await rename(dir, `${dir}-aside`);
      const fresh = await startTestServer({}, dir);
      await fresh.close();
      await rm(`${dir}-aside`, { recursive: true, force: true });
    } finally {
      await cleanup();
    }
  });
});

describe('recovery: a snapshot that fails', function () {
  this.timeout(60_000);

  it('is retried with backoff, not on every write, and writes stay durable meanwhile', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const retryMs = 1500;
      const warnings: string[] = [];
      const store = await openDurableStore(dir, { snapshotAfterBytes: 1500, snapshotRetryMs: retryMs, onWarning: (m) => warnings.push(m) });
      // A directory where each snapshot's temporary file would go: every attempt fails on the disk.
      const blockers = range(1, 200).map((n) => join(dir, `snapshot-${String(n).padStart(16, '0')}.trig.tmp`));
      for (const b of blockers) await mkdir(b);
      const started = performance.now();
      for (let i = 1; i <= 60; i++) await store.update(insertPair(i), ['urn:g:test']);
      // The first attempt (a worker thread, then the main thread) may still be under way.
      for (let i = 0; i < 200 && store.stats().snapshotFailures === 0; i++) await new Promise((r) => setTimeout(r, 50));
      const elapsed = performance.now() - started;
      const { snapshotFailures, snapshots, lastSnapshotError } = store.stats();
      expect(snapshots).to.equal(0);
      expect(snapshotFailures).to.be.at.least(1);
      // Doubling waits from 1.5 s: at most this many attempts fit in the time the writes took.
      expect(snapshotFailures).to.be.at.most(1 + Math.floor(Math.log2(1 + elapsed / retryMs)));
      expect(lastSnapshotError).to.match(/EISDIR/);
      expect(warnings.filter((w) => /automatic snapshot failed/.test(w))).to.have.length(snapshotFailures);
      expect(warnings.at(-1)).to.match(/next attempt in \d+ s/);

      // The disk is fine again: after the wait the next write's snapshot works.
      for (const b of blockers) await rm(b, { recursive: true });
      await new Promise((r) => setTimeout(r, retryMs * 2 ** (snapshotFailures - 1) + 100));
      // Past the threshold again (each failed attempt switched to a new journal file).
      for (let i = 61; i <= 80; i++) await store.update(insertPair(i), ['urn:g:test']);
      for (let i = 0; i < 200 && store.stats().snapshots === 0; i++) await new Promise((r) => setTimeout(r, 50));
      expect(store.stats().snapshots).to.be.at.least(1);
      expect(store.stats().snapshotFailures).to.equal(0);
      expect(store.stats().lastSnapshotError).to.equal(undefined);
      await store.close();
      const reopened = await openDurableStore(dir);
      expect(reopened.replayInfo.snapshotSeq).to.be.greaterThan(0);
      expect(await numbersIn(reopened)).to.deep.equal(range(1, 80));
      await reopened.close();
    } finally {
      await cleanup();
    }
  });
});

describe('recovery: snapshots of the first format', () => {
  it('still loads a v1 snapshot (N-Quads with the checksum in its header) and replays the journal after it', async () => {
    const { dir, cleanup } = await tempDir();
    try {
      const body = Buffer.from('<urn:n:1> <urn:p:a> "1"^^<http://www.w3.org/2001/XMLSchema#integer> <urn:g:test> .\n', 'utf8');
      await writeFile(join(dir, 'snapshot-0000000000000003.nq'), Buffer.concat([Buffer.from(`# wsm-snapshot v1 seq=3 sha256=${sha(body)}\n`), body]));
      await writeFile(join(dir, 'store.json'), '{"format":1}\n');
      const first = await openDurableStore(dir);
      expect(first.replayInfo).to.include({ snapshotSeq: 3, lastSeq: 3 });
      await first.update(insertPair(2), ['urn:g:test']);
      await first.close();
      const { store, warnings } = await openCollecting(dir);
      expect(warnings).to.deep.equal([]);
      expect(await numbersIn(store)).to.deep.equal([1, 2]);
      await store.close();
    } finally {
      await cleanup();
    }
  });
});
