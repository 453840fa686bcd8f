import { figure, installPackage, interleave, load, serviceWithWorkspace, startBaseline, type Figure, type LoadResult } from '../lib.js';
import { packageArchive } from '../data.js';

const PAIRS = 3;
const WINDOW_S = 3;
const WRITERS = 16;
const WRITES_PER_S = 10;

/**
 * Reads with writers beside them: P5 of an uploaded package at 32
 * connections while 16 other connections each create a slash command (C5,
 * a durable write to another graph of the same workspace) 10 times a
 * second. The baseline window runs the same two loads at once against the
 * static Express handler (answering P5's bytes) and the group-committing
 * append. Writes move only the revisions of the graphs they declare, so
 * they should leave P5's cached answers in place (docs/store.md, one
 * cache); the figure shows what the writes' own work costs the reads.
 */
export async function run(): Promise<Figure[]> {
  const env = await serviceWithWorkspace();
  const reads = await startBaseline('static');
  const writes = await startBaseline('fsync');
  try {
    const { svc, token, slug } = env;
    await installPackage(svc.url, token, slug, await packageArchive('reads', '1.0.0', 'https://bench.example/matrix/reads', 200));
    const path = `/api/v1/packages/${slug}/reads`;
    const probe = await fetch(svc.url + path, { headers: { Authorization: `Bearer ${token}` } });
    const bytes = Buffer.from(await probe.arrayBuffer());
    if (probe.status !== 200) throw new Error(`P5 answered ${probe.status}: ${bytes.toString().slice(0, 200)}`);
    const set = await fetch(`${reads.url}/__set`, { method: 'POST', headers: { 'X-Content-Type': probe.headers.get('content-type') ?? 'application/json' }, body: bytes });
    if (!set.ok) throw new Error(`baseline /__set answered ${set.status}`);
    const uniqueBody = JSON.stringify({
      alias: 'beside-{{n}}', description: 'Written beside the reads', scriptType: 'CONSTRUCT',
      scriptContent: 'PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> CONSTRUCT { ?s rdfs:label ?l } WHERE { ?s rdfs:label ?l }',
    });
    const headers = { Authorization: `Bearer ${token}` };
    const window = (readUrl: string, writeUrl: string, duration = WINDOW_S) => async (): Promise<{ reads: LoadResult; writes: LoadResult }> => {
      const [r, w] = await Promise.all([
        load({ url: readUrl, connections: 32, duration, headers }),
        load({
          url: writeUrl, connections: WRITERS, connectionRate: WRITES_PER_S, duration, method: 'POST',
          headers: { ...headers, 'Content-Type': 'application/json' }, uniqueBody,
        }),
      ]);
      for (const [what, x] of [['reads', r], ['writes', w]] as const) {
        if (x.non2xx || x.errors) throw new Error(`${what} on ${what === 'reads' ? readUrl : writeUrl}: ${x.non2xx} non-2xx, ${x.errors} errors`);
      }
      return { reads: r, writes: w };
    };
    const service = window(svc.url + path, `${svc.url}/api/v1/commands/${slug}`);
    const baseline = window(reads.url + path, `${writes.url}/write`);
    await service.call(null);
    const m = await interleave(PAIRS, service, baseline, (x) => x.reads.rps);
    const mid = <T>(xs: T[], f: (x: T) => number) => xs.map(f).sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    return [figure({
      name: `P5 GET package at 32 connections with ${WRITERS} writers beside (C5, ${WRITES_PER_S}/s each), throughput (${bytes.length} B)`, unit: 'req/s',
      value: m.serviceMedian, baseline: m.baselineMedian, ratios: m.ratios,
      target: '>= 0.5x', check: (r) => r >= 0.5,
      note: `writes answered ${mid(m.service, (x) => x.writes.rps).toFixed(0)} vs ${mid(m.baseline, (x) => x.writes.rps).toFixed(0)}/s, write p99 ${mid(m.service, (x) => x.writes.p99)} vs ${mid(m.baseline, (x) => x.writes.p99)} ms; read p99 ${mid(m.service, (x) => x.reads.p99)} vs ${mid(m.baseline, (x) => x.reads.p99)} ms`,
      cause: 'the writes share the event loop with the reads: each C5 checks, journals and applies a SPARQL update on the main thread',
    })];
  } finally {
    await reads.stop();
    await writes.stop();
    await env.close();
  }
}
