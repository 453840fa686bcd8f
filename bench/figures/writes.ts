import { figure, interleave, load, serviceWithWorkspace, startBaseline, type Figure, type LoadResult } from '../lib.js';

const PAIRS = 3;
const WINDOW_S = 3;

/** C5's body, an alias of its own for each request (autocannon's `{{n}}`). */
export const C5_BODY = JSON.stringify({
  alias: 'bench-{{n}}',
  description: 'Benchmark command',
  interpretation: 'Lists every labelled thing.',
  scriptType: 'CONSTRUCT',
  scriptContent: 'PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> CONSTRUCT { ?s rdfs:label ?l } WHERE { ?s rdfs:label ?l }',
});

/**
 * Durable writes: C5 (create a slash command, one journaled, fdatasynced
 * write) at 1 and 32 connections against an Express handler that appends
 * the same body to a file with group-committed fdatasync (bodies arriving
 * during one fdatasync share the next). Service and baseline windows
 * interleave; the load generator runs in its own process.
 */
export async function run(): Promise<Figure[]> {
  const env = await serviceWithWorkspace();
  const baseline = await startBaseline('fsync');
  try {
    const { svc, token, slug } = env;
    const figures: Figure[] = [];
    for (const connections of [1, 32]) {
      const window = (url: string) => async (): Promise<LoadResult> => {
        const r = await load({
          url, connections, duration: WINDOW_S, method: 'POST',
          headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, uniqueBody: C5_BODY,
        });
        if (r.non2xx || r.errors) throw new Error(`C5 at ${connections} connection(s) on ${url}: ${r.non2xx} non-2xx, ${r.errors} errors`);
        return r;
      };
      const service = window(`${svc.url}/api/v1/commands/${slug}`);
      const base = window(`${baseline.url}/write`);
      const rps = await interleave(PAIRS, service, base, (r) => r.rps);
      const p99 = (rs: LoadResult[]) => rs.map((r) => r.p99).sort((a, b) => a - b)[Math.floor(rs.length / 2)]!;
      figures.push(figure({
        name: `C5 create at ${connections} connection(s), throughput`, unit: 'req/s',
        value: rps.serviceMedian, baseline: rps.baselineMedian, ratios: rps.ratios,
        target: connections === 32 ? '>= 0.5x' : 'report', check: (r) => connections !== 32 || r >= 0.5,
        note: `baseline: append + group-committed fdatasync; p99 ${p99(rps.service)} vs ${p99(rps.baseline)} ms`,
        cause: 'CPU: a C5 costs the service about 0.8 ms of CPU (0.4 ms of it on the event loop) against 0.13-0.15 ms for the baseline, '
          + 'which only appends the body; besides the same HTTP work, each C5 authenticates, validates, asks the engine three times '
          + '(the write checked on an empty store, the alias condition, the apply) and journals a record (see bench/RESULTS.md)',
      }));
    }
    return figures;
  } finally {
    await baseline.stop();
    await env.close();
  }
}
