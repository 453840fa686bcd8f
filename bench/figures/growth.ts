import { api, figure, mintToken, removeDir, startService, spawnTs, type Figure } from '../lib.js';
import { serviceQuadDataDir } from '../data.js';

/**
 * Growth (issue 16): start-up time and RSS of the service by store size,
 * with the service's IRI shapes (matrix graphs of 100,000 quads), each
 * beside a bare Oxigraph load of the same snapshot file. The data is built
 * fast in process and written to disk by the store's own streaming
 * snapshot (timed); then the service starts from it and must answer: a
 * workspace is created through the API (a journaled write) and read back.
 * Sizes: `WSM_BENCH_GROWTH` (comma-separated quad counts; default 100k and
 * 1M; `100000,1000000,3000000,5000000` for the whole figure, which needs
 * several GiB of memory and many minutes).
 */
export async function run(): Promise<Figure[]> {
  const sizes = (process.env.WSM_BENCH_GROWTH ?? '100000,1000000').split(',').map(Number);
  const figures: Figure[] = [];
  for (const size of sizes) {
    const data = await serviceQuadDataDir(size);
    try {
      // A large store takes minutes to load on a busy machine.
      const s = await startService(data.dir, { WSM_DEMO: 'false' }, 1_800_000);
      let serviceRss: number;
      let answered: string;
      try {
        await new Promise((r) => setTimeout(r, 500));
        const root = await mintToken(data.dir, 'root', true);
        const created = await api(s.url, root, 'POST', '/api/v1/workspaces', { slug: 'grown', owner: 'owner' });
        const read = await api(s.url, root, 'GET', '/api/v1/workspaces/grown');
        answered = `create ${created.status}, read ${read.status}`;
        if (created.status !== 201 || read.status !== 200) throw new Error(`the service started on ${size} quads but answered ${answered}`);
        // After start and one write, before any query ran.
        serviceRss = s.rss();
      } finally {
        await s.stop();
      }
      const b = await spawnTs('bench/bare-load.ts', [data.snapshotFile], {}, '/', 1_800_000);
      await new Promise((r) => setTimeout(r, 500));
      const bareRss = b.rss();
      await b.stop();
      const label = data.quads.toLocaleString('en');
      figures.push(figure({
        name: `start until /health answers, ${label} quads`, unit: 'ms', value: s.startMs, baseline: b.startMs,
        target: 'report (no target set)', check: () => true,
        note: `baseline: node + bare Oxigraph load of the same snapshot file; the store's snapshot of it took ${(data.snapshotMs / 1000).toFixed(1)} s (${(data.snapshotBytes / 2 ** 20).toFixed(0)} MiB); after start: ${answered}`,
      }));
      figures.push(figure({
        name: `RSS after start, ${label} quads`, unit: 'MiB', value: serviceRss / 2 ** 20, baseline: bareRss / 2 ** 20,
        target: 'report (no target set)', check: () => true, note: 'baseline: the same bare load; service: after start and one write, before any query ran',
      }));
    } finally {
      removeDir(data.dir);
    }
  }
  return figures;
}
