import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { insertPair, numbers, openCollecting, tempDir } from './helpers.js';

const writerScript = fileURLToPath(new URL('../fixtures/crash-writer.ts', import.meta.url));

/** Runs the crash writer, SIGKILLs it ~1 s after its first acknowledged write; returns the acknowledged numbers. */
async function runAndKill(dir: string): Promise<number[]> {
  const child = spawn(process.execPath, ['--import', 'tsx', writerScript, dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let timer: NodeJS.Timeout | undefined;
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    timer ??= setTimeout(() => child.kill('SIGKILL'), 1000);
  });
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  // Wait for exit: only then is the child reaped, so its pid no longer runs.
  const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, sig) => resolve(sig)));
  clearTimeout(timer);
  expect(signal, `writer exited by itself: ${err}`).to.equal('SIGKILL');
  // Only whole lines: a line cut by the kill is not an acknowledgement we can read.
  return out.split('\n').slice(0, -1).map(Number);
}

describe('crash', function () {
  this.timeout(60_000);
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => ({ dir, cleanup } = await tempDir()));
  afterEach(async () => cleanup());

  it('keeps every acknowledged write after SIGKILL, and no half write', async () => {
    let total = 0;
    for (let round = 0; round < 2; round++) {
      const acknowledged = await runAndKill(dir);
      expect(acknowledged.length).to.be.greaterThan(100);
      total += acknowledged.length;

      const { store, warnings } = await openCollecting(dir);
      const { a, b } = await numbers(store);
      const missing = acknowledged.filter((n) => !a.has(n) || !b.has(n));
      expect(missing, 'acknowledged writes lost').to.deep.equal([]);
      // Each update inserted two triples at once: both or neither.
      expect([...a].filter((n) => !b.has(n))).to.deep.equal([]);
      expect([...b].filter((n) => !a.has(n))).to.deep.equal([]);
      expect(warnings.every((w) => /cutting/.test(w)), warnings.join('\n')).to.equal(true);
      // Still writable; the next round continues on the recovered directory.
      await store.update(insertPair(-1 - round), ['urn:g:test']);
      await store.close();
    }
    expect(total).to.be.greaterThan(200);
  });
});
