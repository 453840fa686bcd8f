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

  it('answers a probe on a new connection as soon as it is accepted, not after the requests of a flood of connections ahead of it', async () => {
    const count = 1_500;
    const port = Number(new URL(t.url).port);
    // Connects `count` sockets, then the probe's, and sends each its request at once (the service's thread is held
    // meanwhile: they all wait in its listen queue); prints the order the answers came in: F (the flood's), P (the probe's).
    const flood = `
const net = require('node:net');
const [port, count] = process.argv.slice(1).map(Number);
const open = () => new Promise((resolve) => { const s = net.connect(port, '127.0.0.1', () => resolve(s)); s.on('error', () => {}); });
const order = [];
const answer = (s, tag) => new Promise((resolve) => s.once('data', () => { order.push(tag); resolve(); }));
process.stdin.once('data', async () => {
  const sockets = await Promise.all(Array.from({ length: count }, open));
  const probe = await open();
  const answered = Promise.all([...sockets.map((s) => answer(s, 'F')), answer(probe, 'P')]);
  for (const s of sockets) s.write('GET /api/v1/workspaces HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n');
  probe.write('GET /health HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n');
  await answered;
  process.stdout.write(order.join('') + '\\n');
  process.exit(0);
});
`;
    const child = spawn(process.execPath, ['-e', flood, String(port), String(count)], { stdio: ['pipe', 'pipe', 'inherit'] });
    try {
      const answer = new Promise<string>((resolve) => readline.createInterface({ input: child.stdout! }).once('line', resolve));
      await new Promise((r) => setTimeout(r, 500)); // the child's start
      child.stdin!.write('go\n');
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5_000);
      const order = await answer;
      expect(order.length).to.equal(count + 1);
      // Answering each request as its connection is accepted, one per turn of the event loop, the probe would come last.
      expect(order.indexOf('P')).to.be.lessThan(count / 2);
    } finally {
      child.kill();
    }
  });
});
