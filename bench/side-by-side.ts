import os from 'node:os';
import { figure, type Figure } from './lib.js';

/** Where the other side of a comparison runs: `on` runs a figure with every service it starts on that store. */
export interface OtherStore {
  /** As named in the rows: "Virtuoso", "the cluster". */
  label: string;
  on<T>(figure: string, fn: () => Promise<T>): Promise<T>;
}

/**
 * Runs each named figure (a module of bench/figures) once on the embedded
 * store, then at once on the other store, and answers one row per figure
 * row: the other store's value against the embedded one (each side's own
 * ratio to its baseline in the note). A side that fails gives a row saying
 * so, and the next figure runs.
 */
export async function sideBySide(names: readonly string[], other: OtherStore, progress: (line: string) => void): Promise<Figure[]> {
  const rows: Figure[] = [];
  for (const name of names) {
    const mod = await import(`./figures/${name}.js`) as { run(): Promise<Figure[]> };
    const attempt = async (): Promise<Figure[] | Error> => { try { return await mod.run(); } catch (err) { return err as Error; } };
    const loadBefore = os.loadavg()[0]!;
    const embedded = await attempt();
    progress(`${name} measured on the embedded store`);
    const theirs = await other.on(name, attempt);
    const loadAfter = os.loadavg()[0]!;
    progress(`${name} measured on ${other.label}`);
    const load = `load average ${loadBefore.toFixed(1)}-${loadAfter.toFixed(1)}`;
    if (embedded instanceof Error || theirs instanceof Error) {
      const side = embedded instanceof Error ? `embedded: ${embedded.message}` : `${other.label}: ${(theirs as Error).message}`;
      rows.push(figure({ name: `${name}: not measured`, unit: '', value: Number.NaN, baseline: Number.NaN, target: 'report', check: () => false, cause: side.slice(0, 400) }));
      continue;
    }
    embedded.forEach((e, i) => {
      const r = theirs[i];
      if (!r) return;
      // Throughput: other / embedded (higher is better); time: the same ratio (lower is better).
      const verdict = (f: Figure) => `${f.ratio.toFixed(2)}x its baseline${f.target.startsWith('report') ? '' : ` (${f.met ? 'met' : 'missed'} ${f.target})`}`;
      rows.push(figure({
        name: `${name}: ${r.name}`, unit: r.unit, value: r.value, baseline: e.value,
        target: 'report (no target set)', check: () => true,
        note: `baseline: the same figure on the embedded store, run just before; on ${other.label} ${verdict(r)}, embedded ${verdict(e)}; ${load}`,
      }));
    });
  }
  return rows;
}
