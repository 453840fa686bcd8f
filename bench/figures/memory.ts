import { api, figure, installPackage, mintToken, serviceWithWorkspace, spawnTs, startService, type Figure } from '../lib.js';
import { growMatrixGraph, packageArchive } from '../data.js';

const MiB = 2 ** 20;

/** The query workers the service runs now, from its metrics (wsm_sandbox_workers). */
async function workers(url: string, root: string): Promise<number> {
  const res = await fetch(`${url}/metrics`, { headers: { Authorization: `Bearer ${root}` } });
  const text = await res.text();
  const line = /^wsm_sandbox_workers(?:\{[^}]*\})? (\d+)/m.exec(text);
  if (!res.ok || !line) throw new Error(`/metrics answered ${res.status} without wsm_sandbox_workers`);
  return Number(line[1]);
}

/**
 * Memory of the service holding a workspace of `BENCH_MEMORY_QUADS` (1M)
 * quads with the service's real IRI shapes: RSS at rest, and RSS after
 * queries ran (5 slash executions at once, default answer, and a SPARQL
 * query on the admin endpoint), with the query workers counted then;
 * against a bare Oxigraph load of the same snapshot file.
 */
export async function run(): Promise<Figure[]> {
  const quads = Number(process.env.BENCH_MEMORY_QUADS ?? 1_000_000);
  const env = await serviceWithWorkspace();
  let svc: Awaited<ReturnType<typeof startService>> | undefined;
  try {
    const { token, slug, dataDir } = env;
    await installPackage(env.svc.url, token, slug, await packageArchive('memory', '1.0.0', 'https://bench.example/matrix/memory', 10));
    const created = await api(env.svc.url, token, 'POST', `/api/v1/commands/${slug}`, {
      alias: 'some-roles', scriptType: 'CONSTRUCT',
      scriptContent: 'PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> CONSTRUCT { ?r rdfs:label ?l } WHERE { ?r a <https://poliglot.io/os/spec/iam#Role> ; rdfs:label ?l } LIMIT 100',
    });
    if (created.status !== 200) throw new Error(`C5 answered ${created.status}`);
    await env.svc.stop();
    const size = await growMatrixGraph(dataDir, quads);
    const { readdirSync } = await import('node:fs');
    const snapshot = readdirSync(dataDir).filter((f) => f.startsWith('snapshot-')).sort().at(-1)!;

    const running = await startService(dataDir, { WSM_DEMO: 'false' });
    svc = running;
    const root = await mintToken(dataDir, 'root', true);
    await new Promise((r) => setTimeout(r, 1000));
    const atRest = running.rss();
    const workersAtRest = await workers(running.url, root);
    const answers = await Promise.all([
      ...Array.from({ length: 5 }, () => fetch(`${running.url}/api/v1/commands/${slug}/alias/some-roles/execute`, { method: 'POST', headers: { Authorization: `Bearer ${token}` } })),
      fetch(`${running.url}/api/v1/sparql/${slug}`, {
        method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/sparql-query', Accept: 'application/sparql-results+json' },
        body: 'SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }',
      }),
    ].map(async (p) => { const res = await p; await res.arrayBuffer(); return res.status; }));
    const afterQueries = running.rss();
    const workersAfter = await workers(running.url, root);
    await running.stop();
    svc = undefined;
    const bare = await spawnTs('bench/bare-load.ts', [`${dataDir}/${snapshot}`], {}, '/');
    await new Promise((r) => setTimeout(r, 1000));
    const bareRss = bare.rss();
    await bare.stop();
    const label = size.toLocaleString('en');
    const statuses = answers.join(', ');
    if (answers.some((s) => s !== 200)) throw new Error(`the queries answered ${statuses}`);
    return [
      figure({
        name: `RSS at rest, ${label} quads`, unit: 'MiB', value: atRest / MiB, baseline: bareRss / MiB,
        target: 'report (no target set)', check: () => true,
        note: `baseline: bare Oxigraph load of the same snapshot in a node process; ${workersAtRest} query worker(s) at rest`,
      }),
      figure({
        name: `RSS after 5 slash executions and 1 admin query at once vs at rest, ${label} quads`, unit: 'MiB',
        value: afterQueries / MiB, baseline: atRest / MiB, target: '<= 2x', check: (r) => r <= 2,
        note: `${workersAfter} query worker(s) after the queries; they answered ${statuses}`,
        cause: `each query worker holds its own copy of the workspace's data (${workersAfter} workers running)`,
      }),
    ];
  } finally {
    await svc?.stop();
    await env.close();
  }
}
