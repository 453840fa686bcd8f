/**
 * Baseline of the start-up and memory figures: a bare Oxigraph store loading
 * the same snapshot file, then answering /health.
 */
import http from 'node:http';
import { readFileSync } from 'node:fs';
import oxigraph from 'oxigraph';

const file = process.argv[2]!;
const text = readFileSync(file, 'utf8');
// The snapshot's header and end lines are comments, valid in both formats.
const store = new oxigraph.Store();
store.load(text, { format: file.endsWith('.trig') ? 'application/trig' : 'application/n-quads' });
http.createServer((_req, res) => { res.end(JSON.stringify({ quads: store.size })); })
  .listen(Number(process.env.PORT), '127.0.0.1');
