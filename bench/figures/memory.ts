import { figure, startService, spawnTs, type Figure } from '../lib.js';
import { millionQuadDataDir } from '../data.js';

/** RSS of the service holding 1M quads vs a bare Oxigraph store holding them. */
export async function run(): Promise<Figure[]> {
  const data = await millionQuadDataDir();
  const s = await startService(data.dir, { WSM_DEMO: 'false' });
  await new Promise((r) => setTimeout(r, 500));
  const service = s.rss();
  await s.stop();
  const b = await spawnTs('bench/bare-load.ts', [data.snapshotFile], {}, '/');
  await new Promise((r) => setTimeout(r, 500));
  const bare = b.rss();
  await b.stop();
  const mib = (n: number) => n / 2 ** 20;
  return [figure({
    name: `RSS after start with ${data.quads.toLocaleString('en')} quads`,
    unit: 'MiB', value: mib(service), baseline: mib(bare), target: 'report (no target set)',
    check: () => true,
    note: 'baseline: bare Oxigraph store in a node + tsx process',
  })];
}
