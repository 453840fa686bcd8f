/**
 * Engine growth probe (not part of `npm run bench`): loads N-Triples into a
 * bare Oxigraph store in calls of 500 triples (about 40 KB, below the
 * store's 64 KB slices), with nothing of the service around it, and prints
 * every call that took over 20 ms with the store's size at that call.
 * Shows the engine's own pauses as its indexes grow: they come in clusters
 * at each doubling of the store's size, and grow with it.
 *
 *   node --import tsx bench/engine-growth-probe.ts [quads]
 */
import oxigraph from 'oxigraph';

const total = Number(process.argv[2] ?? 1_200_000);
const PER_CALL = 500;
const store = new oxigraph.Store();
const graph = oxigraph.namedNode('https://probe.example/graph');
const slow: string[] = [];
const times: number[] = [];
const started = performance.now();
for (let quads = 0; quads < total;) {
  const lines: string[] = [];
  for (let i = 0; i < PER_CALL; i++, quads++) lines.push(`<https://probe.example/role/${quads}> <https://probe.example/p${quads % 9}> "value ${quads}" .`);
  const text = lines.join('\n');
  const t = performance.now();
  store.load(text, { format: 'application/n-triples', to_graph_name: graph, no_transaction: true });
  const ms = performance.now() - t;
  times.push(ms);
  if (ms > 20) slow.push(`  at ${quads.toLocaleString('en')} quads: ${ms.toFixed(0)} ms`);
}
times.sort((a, b) => a - b);
const at = (q: number) => times[Math.min(times.length - 1, Math.floor(times.length * q))]!.toFixed(1);
console.log(`${total.toLocaleString('en')} quads in ${times.length} calls, ${(performance.now() - started).toFixed(0)} ms: per call p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${at(1)} ms`);
console.log(`calls over 20 ms:\n${slow.join('\n')}`);
