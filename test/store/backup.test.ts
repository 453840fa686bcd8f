import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { insertPair, numbers, openCollecting, tempDir, untimedRecord } from './helpers.js';
import { updateOp } from '../../src/store/store.js';
import { scanJournal } from '../../src/store/journal.js';
import { runWsm } from '../helpers/cli.js';

const writerScript = fileURLToPath(new URL('../fixtures/crash-writer.ts', import.meta.url));

/** The crash writer on `dir` (eight writers, snapshots every few KiB); `acknowledged` grows as it prints. */
function startWriter(dir: string): { child: ChildProcess; acknowledged: () => number[]; killed: Promise<void> } {
  const child = spawn(process.execPath, ['--import', 'tsx', writerScript, dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const killed = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return { child, acknowledged: () => out.split('\n').slice(0, -1).map(Number), killed };
}

async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((r) => setTimeout(r, 20));
}

/**
 * A moment at or after every write acknowledged so far and before every
 * later one: now, once the clock has moved past it (records carry
 * milliseconds).
 */
async function momentBetween(): Promise<Date> {
  const now = Date.now();
  while (Date.now() <= now) await new Promise((r) => setTimeout(r, 1));
  return new Date(now);
}

/** The numbers written (`insertPair`) in the store of a data directory. */
async function numbersIn(dir: string): Promise<number[]> {
  const { store } = await openCollecting(dir);
  const { a, b } = await numbers(store);
  await store.close();
  expect([...b].sort()).to.deep.equal([...a].sort());
  return [...a].sort((x, y) => x - y);
}

describe('wsm backup and wsm restore', function () {
  this.timeout(120_000);
  const dirs: Array<() => Promise<void>> = [];
  const fresh = async () => {
    const { dir, cleanup } = await tempDir();
    dirs.push(cleanup);
    return dir;
  };
  after(async () => {
    for (const cleanup of dirs) await cleanup();
  });

  it('takes a backup while writes go on that restores every write acknowledged before it began, even after SIGKILL', async () => {
    const data = await fresh();
    const writer = startWriter(data);
    await until(() => writer.acknowledged().length > 300);
    const before = writer.acknowledged();
    const target = join(await fresh(), 'backup');
    const taken = await runWsm(['backup', target], { WSM_DATA_DIR: data }, 60_000);
    expect(taken.code, taken.stderr).to.equal(0);
    expect(taken.stdout).to.match(/at journal record \d+/);
    writer.child.kill('SIGKILL');
    await writer.killed;
    expect(writer.acknowledged().length, 'writes went on during the backup').to.be.greaterThan(before.length);

    const restored = await fresh();
    const put = await runWsm(['restore', target], { WSM_DATA_DIR: restored }, 60_000);
    expect(put.code, put.stderr).to.equal(0);
    const { store } = await openCollecting(restored);
    const { a, b } = await numbers(store);
    expect(before.filter((n) => !a.has(n) || !b.has(n)), 'acknowledged before the backup, missing after restore').to.deep.equal([]);
    // One consistent state: each write's two triples both or neither.
    expect([...a].filter((n) => !b.has(n))).to.deep.equal([]);
    await store.close();
  });

  it('restores to a journal record inside the backup with --to-seq, and refuses one outside', async () => {
    const data = await fresh();
    const writer = startWriter(data);
    await until(() => writer.acknowledged().length > 200);
    writer.child.kill('SIGKILL');
    await writer.killed;
    const target = join(await fresh(), 'backup');
    expect((await runWsm(['backup', target], { WSM_DATA_DIR: data })).code).to.equal(0);
    const manifest = JSON.parse(readFileSync(join(target, 'manifest.json'), 'utf8')) as { seq: number; snapshotSeq: number };
    expect(manifest.seq).to.be.greaterThan(manifest.snapshotSeq);
    const mid = manifest.seq - 1;
    const restored = await fresh();
    const put = await runWsm(['restore', target, '--to-seq', String(mid)], { WSM_DATA_DIR: restored });
    expect(put.code, put.stderr).to.equal(0);
    const { store } = await openCollecting(restored);
    const full = await fresh();
    expect((await runWsm(['restore', target], { WSM_DATA_DIR: full })).code).to.equal(0);
    const { store: whole } = await openCollecting(full);
    // One record (one write of two triples) fewer than the whole backup.
    expect((await numbers(whole)).a.size - (await numbers(store)).a.size).to.equal(1);
    await store.close();
    await whole.close();
    const outside = await runWsm(['restore', target, '--to-seq', String(manifest.seq + 1)], { WSM_DATA_DIR: await fresh() });
    expect(outside.code).to.equal(1);
    expect(outside.stderr).to.match(/outside this backup/);
  });

  it('restores with --to-time to the last write committed at or before it, and refuses a time before the snapshot or not ISO 8601', async () => {
    const data = await fresh();
    const { store } = await openCollecting(data);
    const write = (n: number) => store.update(insertPair(n), ['urn:g:test']);
    await write(1);
    const beforeSnapshot = await momentBetween();
    await write(2);
    await store.snapshot();
    await write(3);
    const afterThree = await momentBetween();
    await write(4);
    const afterFour = await momentBetween();
    await write(5);
    await store.close();
    const target = join(await fresh(), 'backup');
    const taken = await runWsm(['backup', target], { WSM_DATA_DIR: data });
    expect(taken.code, taken.stderr).to.equal(0);
    const manifest = JSON.parse(readFileSync(join(target, 'manifest.json'), 'utf8')) as { snapshotSeq: number; snapshotAt?: string };
    expect(manifest.snapshotSeq).to.be.greaterThan(0);

    const restoreTo = async (time: string) => {
      const dir = await fresh();
      return { dir, ...(await runWsm(['restore', target, '--to-time', time], { WSM_DATA_DIR: dir })) };
    };
    for (const [time, expected] of [[afterThree, [1, 2, 3]], [afterFour, [1, 2, 3, 4]]] as const) {
      // The same moment written in another zone names the same records.
      const shifted = new Date(time.getTime() + 90 * 60_000).toISOString().replace('Z', '+01:30');
      for (const text of [time.toISOString(), shifted]) {
        const put = await restoreTo(text);
        expect(put.code, put.stderr).to.equal(0);
        expect(put.stdout).to.match(/as of journal record \d+ \(committed at /);
        expect(await numbersIn(put.dir)).to.deep.equal(expected);
      }
    }
    // At the very millisecond record 4 was committed, it is in; a millisecond before, it is not.
    const records = readdirSync(target).filter((n) => n.startsWith('journal-')).flatMap((n) => scanJournal(readFileSync(join(target, n))).records);
    const fourAt = records.find((r) => JSON.stringify(r.ops).includes('urn:n:4'))!.at!;
    for (const [time, expected] of [[fourAt, [1, 2, 3, 4]], [fourAt - 1, [1, 2, 3]]] as const) {
      const put = await restoreTo(new Date(time).toISOString());
      expect(put.code, put.stderr).to.equal(0);
      expect(await numbersIn(put.dir)).to.deep.equal(expected);
    }
    // At the moment the snapshot's last record was committed: the snapshot itself.
    const atSnapshot = await restoreTo(manifest.snapshotAt!);
    expect(atSnapshot.code, atSnapshot.stderr).to.equal(0);
    expect(await numbersIn(atSnapshot.dir)).to.deep.equal([1, 2]);
    // After the backup was taken: all of it, said so.
    const later = await restoreTo(new Date(Date.now() + 60_000).toISOString());
    expect(later.code, later.stderr).to.equal(0);
    expect(later.stdout).to.match(/after the backup was taken/);
    expect(await numbersIn(later.dir)).to.deep.equal([1, 2, 3, 4, 5]);

    const early = await restoreTo(beforeSnapshot.toISOString());
    expect(early.code).to.equal(1);
    expect(early.stderr).to.match(/is before the backup's snapshot \(journal record \d+, committed at /);
    expect(readdirSync(early.dir)).to.deep.equal([]);
    for (const bad of ['yesterday', '2026-12-04', '2026-12-04T15:30:00', '2026-02-31T10:00:00Z', String(afterThree.getTime())]) {
      const refused = await restoreTo(bad);
      expect(refused.code, bad).to.equal(2);
      expect(refused.stderr).to.contain(`--to-time takes an ISO 8601 date and time with its zone`).and.to.contain(`not "${bad}"`);
      expect(readdirSync(refused.dir)).to.deep.equal([]);
    }
    const both = await runWsm(['restore', target, '--to-seq', '3', '--to-time', afterThree.toISOString()], { WSM_DATA_DIR: await fresh() });
    expect(both.code).to.equal(2);
    expect(both.stderr).to.match(/not both/);
  });

  it('reads journal records written before records carried their time, and refuses a --to-time among them', async () => {
    const data = await fresh();
    // A store whose first records are of the older form (as an earlier version wrote them).
    const { store: created } = await openCollecting(data);
    await created.close();
    const journal = readdirSync(data).find((n) => n.startsWith('journal-'))!;
    const insert = (n: number) => updateOp(insertPair(n), ['urn:g:test']);
    appendFileSync(join(data, journal), Buffer.concat([untimedRecord(1, [insert(1)]), untimedRecord(2, [insert(2)])]));
    const beforeThree = await momentBetween();
    const { store } = await openCollecting(data);
    expect((await numbers(store)).a).to.deep.equal(new Set([1, 2]));
    await store.update(insertPair(3), ['urn:g:test']);
    const afterThree = await momentBetween();
    await store.update(insertPair(4), ['urn:g:test']);
    await store.close();
    const target = join(await fresh(), 'backup');
    expect((await runWsm(['backup', target], { WSM_DATA_DIR: data })).code).to.equal(0);

    // Committed before record 3, which has a time at or before T: the older records are in.
    const restored = await fresh();
    const put = await runWsm(['restore', target, '--to-time', afterThree.toISOString()], { WSM_DATA_DIR: restored });
    expect(put.code, put.stderr).to.equal(0);
    expect(await numbersIn(restored)).to.deep.equal([1, 2, 3]);
    const among = await fresh();
    const refused = await runWsm(['restore', target, '--to-time', beforeThree.toISOString()], { WSM_DATA_DIR: among });
    expect(refused.code).to.equal(1);
    expect(refused.stderr).to.match(/journal records 1 to 2 of this backup carry no commit time/).and.to.match(/--to-seq/);
    expect(readdirSync(among)).to.deep.equal([]);
    // --to-seq still reaches them.
    const bySeq = await fresh();
    expect((await runWsm(['restore', target, '--to-seq', '2'], { WSM_DATA_DIR: bySeq })).code).to.equal(0);
    expect(await numbersIn(bySeq)).to.deep.equal([1, 2]);
  });

  it('refuses an incomplete or damaged backup and a non-empty data directory, leaving it as it was', async () => {
    const data = await fresh();
    const writer = startWriter(data);
    await until(() => writer.acknowledged().length > 50);
    writer.child.kill('SIGKILL');
    await writer.killed;
    const target = join(await fresh(), 'backup');
    expect((await runWsm(['backup', target], { WSM_DATA_DIR: data })).code).to.equal(0);

    const busy = await fresh();
    writeFileSync(join(busy, 'keep.txt'), 'mine');
    const intoBusy = await runWsm(['restore', target], { WSM_DATA_DIR: busy });
    expect(intoBusy.code).to.equal(1);
    expect(intoBusy.stderr).to.match(/not empty/);
    expect(readdirSync(busy)).to.deep.equal(['keep.txt']);

    const journal = readdirSync(target).find((n) => n.startsWith('journal-'))!;
    const bytes = readFileSync(join(target, journal));
    bytes[bytes.length - 3] ^= 0x01;
    writeFileSync(join(target, journal), bytes);
    const damaged = await runWsm(['restore', target], { WSM_DATA_DIR: await fresh() });
    expect(damaged.code).to.equal(1);
    expect(damaged.stderr).to.match(/does not match its manifest/);

    // A backup cut short before its manifest (as a crash midway leaves it) is never taken for complete.
    rmSync(join(target, 'manifest.json'));
    const empty = await fresh();
    const incomplete = await runWsm(['restore', target], { WSM_DATA_DIR: empty });
    expect(incomplete.code).to.equal(1);
    expect(incomplete.stderr).to.match(/not a complete backup/);
    expect(readdirSync(empty)).to.deep.equal([]);

    const again = await runWsm(['backup', target], { WSM_DATA_DIR: data });
    expect(again.code).to.equal(1);
    expect(again.stderr).to.match(/not empty/);
  });
});
