import { figure, removeDir, startService, type Figure } from '../lib.js';
import { journalPairDataDirs } from '../data.js';

const MiB = 2 ** 20;

/**
 * Start-up with a journal just below the automatic snapshot threshold
 * (`snapshotThresholdFor` the base snapshot: its 16 MiB floor here) vs
 * start-up of the same content right after a snapshot: what a restart
 * costs at worst between two snapshots. Four records in five are
 * conditional creations, as C5 journals them (a restart asks each
 * condition), the fifth an edit.
 */
export async function run(): Promise<Figure[]> {
  const data = await journalPairDataDirs(200_000);
  const runs = 3;
  let journal = 0;
  let snapshot = 0;
  try {
    for (let i = 0; i < runs; i++) {
      const s = await startService(data.snapshot, { WSM_DEMO: 'false' });
      snapshot += s.startMs;
      await s.stop();
      const j = await startService(data.journal, { WSM_DEMO: 'false' });
      journal += j.startMs;
      await j.stop();
    }
  } finally {
    removeDir(data.journal);
    removeDir(data.snapshot);
  }
  return [figure({
    name: `start until /health answers, ${(data.journalFileBytes / MiB).toFixed(0)} MiB journal (${data.records.toLocaleString('en')} records) after the snapshot, ${data.quads.toLocaleString('en')} quads, mean of ${runs}`,
    unit: 'ms', value: journal / runs, baseline: snapshot / runs, target: '<= 2x',
    check: (r) => r <= 2,
    cause: 'replaying the journal (parsing and applying each record) costs more than loading the same content from a snapshot',
    note: 'baseline: the same content started right after a snapshot (empty journal); runs interleaved',
  })];
}
