import { figure, removeDir, startService, spawnTs, type Figure } from '../lib.js';
import { serviceQuadDataDir } from '../data.js';

/**
 * Growth: start-up time and RSS of the service at 100k and 1M quads with
 * the service's IRI shapes, each beside a bare Oxigraph load of the same
 * snapshot file. `WSM_BENCH_GROWTH` (comma-separated quad counts) measures
 * other sizes.
 */
export async function run(): Promise<Figure[]> {
  const sizes = (process.env.WSM_BENCH_GROWTH ?? '100000,1000000').split(',').map(Number);
  const figures: Figure[] = [];
  for (const size of sizes) {
    const data = await serviceQuadDataDir(size);
    try {
      const s = await startService(data.dir, { WSM_DEMO: 'false' });
      await new Promise((r) => setTimeout(r, 500));
      const serviceRss = s.rss();
      await s.stop();
      const b = await spawnTs('bench/bare-load.ts', [data.snapshotFile], {}, '/');
      await new Promise((r) => setTimeout(r, 500));
      const bareRss = b.rss();
      await b.stop();
      const label = data.quads.toLocaleString('en');
      figures.push(figure({
        name: `start until /health answers, ${label} quads`, unit: 'ms', value: s.startMs, baseline: b.startMs,
        target: 'report (no target set)', check: () => true, note: 'baseline: node + tsx + bare Oxigraph load of the same snapshot file',
      }));
      figures.push(figure({
        name: `RSS after start, ${label} quads`, unit: 'MiB', value: serviceRss / 2 ** 20, baseline: bareRss / 2 ** 20,
        target: 'report (no target set)', check: () => true, note: 'baseline: the same bare load; before any query ran',
      }));
    } finally {
      removeDir(data.dir);
    }
  }
  return figures;
}
