import { expect } from 'chai';
import { spawn } from 'node:child_process';
import readline from 'node:readline';
import { removeDir, startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Opens `count` connections to `port` at once, when told `go` on stdin,
 * and prints how many were established within `withinMs` (the kernel
 * establishes a connection the service has not accepted yet while its
 * listen queue has room); holds them until stdin closes.
 */
const OPENER = `
const net = require('node:net');
const [port, count, withinMs] = process.argv.slice(1).map(Number);
const sockets = [];
let connected = 0;
process.stdin.once('data', () => {
  for (let i = 0; i < count; i++) {
    const s = net.connect(port, '127.0.0.1', () => { connected++; });
    s.on('error', () => {});
    sockets.push(s);
  }
  setTimeout(() => process.stdout.write(connected + '\\n'), withinMs);
});
process.stdin.on('end', () => process.exit(0));
`;

describe('the listener under a flood of connections', function () {
  this.timeout(60_000);
  let t: TestServer;
  before(async () => { t = await startTestServer(); });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('holds 1,500 connections opened at once while the service is busy: none is dropped to wait for a retransmitted handshake', async () => {
    const count = 1_500;
    const port = Number(new URL(t.url).port);
    const child = spawn(process.execPath, ['-e', OPENER, String(port), String(count), '4000'], { stdio: ['pipe', 'pipe', 'inherit'] });
    try {
      const answer = new Promise<string>((resolve) => readline.createInterface({ input: child.stdout! }).once('line', resolve));
      await new Promise((r) => setTimeout(r, 500)); // the child's start
      child.stdin!.write('go\n');
      // The service's thread is held (as by a burst of work) while the connections arrive: it accepts none of them.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5_000);
      // Node's default listen queue (511) would have held about 512 of them.
      expect(Number(await answer)).to.equal(count);
      // And the service answers once free.
      expect((await fetch(`${t.url}/health`)).status).to.equal(200);
    } finally {
      child.stdin!.end();
    }
  });
});
