import { figure, load, serviceWithWorkspace, startBaseline, type Figure } from '../lib.js';

/**
 * Durable writes: C5 (create a slash command, one journaled fsynced write)
 * at 1 and 32 connections against an Express handler that appends the same
 * body to a file and fsyncs before answering.
 */
export async function run(): Promise<Figure[]> {
  const env = await serviceWithWorkspace();
  const baseline = await startBaseline('fsync');
  try {
    const { svc, token, slug } = env;
    let n = 0;
    const body = () => JSON.stringify({
      alias: `bench-${process.pid}-${n++}`,
      description: 'Benchmark command',
      interpretation: 'Lists every labelled thing.',
      scriptType: 'CONSTRUCT',
      scriptContent: 'PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> CONSTRUCT { ?s rdfs:label ?l } WHERE { ?s rdfs:label ?l }',
    });
    const figures: Figure[] = [];
    for (const connections of [1, 32]) {
      const request = (url: string) => ({
        url, connections, duration: 5, method: 'POST' as const,
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        requests: [{ setupRequest: (req: any) => ({ ...req, body: body() }) }],
      });
      const service = await load(request(`${svc.url}/api/v1/commands/${slug}`));
      const base = await load(request(`${baseline.url}/write`));
      if (service.non2xx || service.errors) throw new Error(`C5: ${service.non2xx} non-2xx, ${service.errors} errors`);
      figures.push(figure({
        name: `C5 create at ${connections} connection(s), throughput`, unit: 'req/s', value: service.rps, baseline: base.rps,
        target: connections === 32 ? '>= 0.5x' : 'report', check: (r) => connections !== 32 || r >= 0.5,
        note: connections === 32 ? 'concurrent writes share fsyncs (group commit)' : undefined,
      }));
      figures.push(figure({
        name: `C5 create at ${connections} connection(s), p99 latency`, unit: 'ms', value: service.p99, baseline: base.p99,
        target: 'report', check: () => true,
      }));
    }
    return figures;
  } finally {
    await baseline.stop();
    await env.close();
  }
}
