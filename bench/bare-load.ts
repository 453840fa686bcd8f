/**
 * Baseline of the start-up and memory figures: a bare Oxigraph store loading
 * the same snapshot file, then answering /health. The file is read in 4 MiB
 * steps into one streaming parse, as the service reads it (a whole file in
 * one string stops at V8's 512 MiB string limit, about 4M quads).
 */
import http from 'node:http';
import { closeSync, openSync, readSync } from 'node:fs';
import oxigraph from 'oxigraph';

const file = process.argv[2]!;
function* chunks(): Generator<Buffer> {
  const fd = openSync(file, 'r');
  try {
    const buffer = Buffer.allocUnsafe(4 * 2 ** 20);
    for (let n = readSync(fd, buffer); n > 0; n = readSync(fd, buffer)) yield buffer.subarray(0, n);
  } finally {
    closeSync(fd);
  }
}
// The snapshot's header and end lines are comments, valid in both formats.
const store = new oxigraph.Store();
store.load(chunks(), { format: file.endsWith('.trig') ? 'application/trig' : 'application/n-quads', no_transaction: true });
http.createServer((_req, res) => { res.end(JSON.stringify({ quads: store.size })); })
  .listen(Number(process.env.PORT), '127.0.0.1');
