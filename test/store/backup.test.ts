import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { numbers, openCollecting, tempDir } from './helpers.js';
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
