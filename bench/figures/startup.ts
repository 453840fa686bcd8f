import { figure, startService, spawnTs, type Figure } from '../lib.js';
import { millionQuadDataDir } from '../data.js';

/** Start-up of a data dir with 1M quads (snapshot) + 10,000 journal records vs a bare Oxigraph load of the snapshot. */
export async function run(): Promise<Figure[]> {
  const data = await millionQuadDataDir();
  const runs = 3;
  let service = 0;
  let bare = 0;
  for (let i = 0; i < runs; i++) {
    const s = await startService(data.dir, { WSM_DEMO: 'false' });
    service += s.startMs;
    await s.stop();
    const b = await spawnTs('bench/bare-load.ts', [data.snapshotFile], {}, '/');
    bare += b.startMs;
    await b.stop();
  }
  return [figure({
    name: `start until /health answers (${data.quads.toLocaleString('en')} quads), mean of ${runs}`,
    unit: 'ms', value: service / runs, baseline: bare / runs, target: '<= 1.3x',
    check: (r) => r <= 1.3,
    note: 'baseline: node + tsx + bare Oxigraph load of the same snapshot file',
  })];
}
