import { spawn } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { tempDir } from './helpers.js';

const script = fileURLToPath(new URL('../fixtures/big-store.ts', import.meta.url));

function run(args: string[]): Promise<any> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`big-store ${args[0]} exited ${code}: ${err}`))));
  });
}

const MiB = 2 ** 20;

/*
 * Slow (about a minute on an idle 2-core machine, several under load): runs
 * when WSM_SLOW_TESTS is set, as .ci/run does.
 */
(process.env.WSM_SLOW_TESTS ? describe : describe.skip)('snapshot larger than 512 MiB of N-Quads (slow)', function () {
  this.timeout(15 * 60_000);
  let dir: string;
  let cleanup: () => Promise<void>;
  before(async () => ({ dir, cleanup } = await tempDir()));
  after(async () => cleanup());

  it('snapshots in bounded memory, restarts from the snapshot and answers', async () => {
    // Quads shaped like the service's (graph and resource IRIs, vocabularies), with long comments to need fewer of them.
    const built = await run(['build', dir, String(530 * MiB), '1500']);
    expect(built.nquadsBytes, 'the store as N-Quads text').to.be.greaterThan(512 * MiB);
    expect(built.stats).to.include({ snapshots: 1, snapshotFailures: 0, snapshotSeq: 1 });
    // The whole store was never held as one text: the peak grew by far less than its size.
    expect(built.peakRssAfterSnapshot - built.peakRssBeforeSnapshot).to.be.below(built.nquadsBytes / 3);
    expect((await readdir(dir)).filter((f) => f.startsWith('snapshot-'))).to.deep.equal(['snapshot-0000000000000001.trig']);

    const checked = await run(['check', dir]);
    expect(checked.replayInfo).to.include({ snapshotSeq: 1, recordsReplayed: 0 });
    expect(checked.quads).to.equal(built.quads);
    expect(checked.marker).to.equal(true);
    expect(checked.graph3Quads).to.equal(100_000);
    expect(checked.labels).to.have.length(2);
  });
});
