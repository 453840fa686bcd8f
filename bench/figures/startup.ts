import { figure, interleave, median, startService, spawnTs, type Figure } from '../lib.js';
import { millionQuadDataDir } from '../data.js';

const PAIRS = 3;

/**
 * Start-up of a data dir with 1M quads shaped like the service's (its real
 * graph and resource IRIs) in a snapshot plus 10,000 journal records, vs a
 * bare Oxigraph load of the same snapshot file; the two interleave.
 */
export async function run(): Promise<Figure[]> {
  const data = await millionQuadDataDir();
  const m = await interleave(PAIRS,
    async () => { const s = await startService(data.dir, { WSM_DEMO: 'false' }); await s.stop(); return s.startMs; },
    async () => { const b = await spawnTs('bench/bare-load.ts', [data.snapshotFile], {}, '/'); await b.stop(); return b.startMs; },
    (ms) => ms);
  return [figure({
    name: `start until /health answers (${data.quads.toLocaleString('en')} quads, ${data.records.toLocaleString('en')} journal records)`,
    unit: 'ms', value: median(m.service), baseline: median(m.baseline), ratios: m.ratios, target: '<= 1.3x',
    check: (r) => r <= 1.3,
    note: 'baseline: node + bare Oxigraph load of the same snapshot file (not the journal)',
    cause: 'the service also starts the store\'s thread, reads and replays the journal records and builds its caches before /health answers (its modules load while the store\'s thread recovers, and the snapshot\'s checksum is checked beside the load, in a worker)',
  })];
}
