import path from 'node:path';
import oxigraph from 'oxigraph';
import { api, figure, installPackage, percentile, serviceWithWorkspace, spawnTs, type Figure } from '../lib.js';
import { generateTriples, packageArchive } from '../data.js';
import { openDurableStore } from '../../src/store/embedded/durable.js';
import { iri, sparql } from '../../src/rdf/sparql.js';

/**
 * Slash commands on a large workspace (issue 16, acceptance 3): a package
 * is installed through the API, then its matrix graph is grown to
 * `BENCH_LARGE_QUADS` quads (default 1M) directly in the data directory
 * (bypassing the API, as the issue allows), with the service's data
 * shapes. Two cases, each on a freshly started service, so the executions
 * include preparing the data for the query worker:
 * - `snapshot`: the graph is in the snapshot file: the worker reads its
 *   block from the file;
 * - `journal`: the graph was written again after the snapshot (as an
 *   install writes it: dropped, then loaded): the worker reads the
 *   snapshot's block and replays the journal records after it.
 * In each, 5 executions start at once while `/health` is sampled every
 * 20 ms. Figures: `/health` p99 during that, and RSS after the executions
 * against RSS at rest.
 */
export async function run(): Promise<Figure[]> {
  const quads = Number(process.env.BENCH_LARGE_QUADS ?? 1_000_000);
  // An empty service starts in seconds, but minutes on a machine at load average 30.
  const env = await serviceWithWorkspace('bench', 600_000);
  try {
    const { token, slug, dataDir } = env;
    const uri = 'https://bench.example/matrix/large';
    await installPackage(env.svc.url, token, slug, await packageArchive('large', '1.0.0', uri, 10));
    const created = await api(env.svc.url, token, 'POST', `/api/v1/commands/${slug}`, {
      alias: 'one-thing', scriptType: 'CONSTRUCT',
      scriptContent: 'CONSTRUCT WHERE { <https://bench.example/large/c0/thing/7> ?p ?o }',
    });
    if (created.status !== 200) throw new Error(`C5 answered ${created.status}`);
    await env.svc.stop();
    // Grow the matrix graph in the data directory itself.
    let store = await openDurableStore(dataDir, { snapshotAfterBytes: Number.MAX_SAFE_INTEGER });
    const graph = (await store.graphNames()).find((g) => g.includes('/workspaces/') && g.includes('/matrices/') && !g.endsWith('/derived'));
    if (!graph) throw new Error('no matrix graph found');
    const chunks = (each: (text: string) => void) => {
      for (let done = 0, chunk = 0; done < quads; done += 100_000, chunk++) each(generateTriples(Math.min(100_000, quads - done), `https://bench.example/large/c${chunk}/`));
    };
    // Straight into the engine (no journal), then one snapshot holds it all: fast to build on a busy machine.
    chunks((text) => store.raw.load(text, { format: 'application/n-triples', to_graph_name: oxigraph.namedNode(graph), no_transaction: true, lenient: true }));
    await store.update(sparql`INSERT DATA { GRAPH <https://bench.example/marker> { <https://bench.example/grown> <https://bench.example/to> 1 } }`, ['https://bench.example/marker']);
    await store.snapshot();
    await store.close();
    const figures = await measureOrSay('snapshot', quads, dataDir, token, slug);

    // The same graph written again after the snapshot, through the journal: dropped, then loaded in records of 100,000 triples.
    store = await openDurableStore(dataDir, { snapshotAfterBytes: Number.MAX_SAFE_INTEGER });
    await store.update(sparql`DROP SILENT GRAPH ${iri(graph)}`, [graph]);
    const writes: Promise<void>[] = [];
    chunks((text) => writes.push(store.write([{ kind: 'load', graph, format: 'application/n-triples', data: text }])));
    await Promise.all(writes);
    await store.close();
    figures.push(...await measureOrSay('journal', quads, dataDir, token, slug));
    return figures;
  } finally {
    await env.close();
  }
}

/** One case's figures, or a row saying why it was not measured (so the other case still reports). */
async function measureOrSay(source: 'snapshot' | 'journal', quads: number, dataDir: string, token: string, slug: string): Promise<Figure[]> {
  try {
    return await measure(source, quads, dataDir, token, slug);
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    return [figure({
      name: `5 executions at once, ${quads.toLocaleString('en')}-quad workspace, data ${source === 'snapshot' ? 'in the snapshot' : 'written since the snapshot'}`, unit: 'ms',
      value: Number.NaN, baseline: Number.NaN, target: 'every execution answers', check: () => false,
      cause: `not measured: ${e.message}${e.cause?.code ? ` (${e.cause.code})` : ''}`,
    })];
  }
}

async function measure(source: 'snapshot' | 'journal', quads: number, dataDir: string, token: string, slug: string): Promise<Figure[]> {
  // Loading a million quads at start-up takes minutes on a busy machine: wait up to 10 minutes for /health.
  // BENCH_SERVICE_NODE_ARGS (e.g. `--cpu-prof --cpu-prof-dir=DIR`), as for `startService`: to see what holds the main thread.
  const running = await spawnTs('src/cli.ts', ['serve'], { WSM_DATA_DIR: dataDir, WSM_REGISTRY: path.join(dataDir, 'registry'), WSM_DEMO: 'false' }, '/health', 600_000,
    (process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(' ').filter(Boolean));
  try {
    await new Promise((r) => setTimeout(r, 1000));
    const atRest = running.rss();
    const health: number[] = [];
    let healthErrors = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const started = performance.now();
        try {
          await (await fetch(`${running.url}/health`)).arrayBuffer();
        } catch {
          healthErrors++;
        }
        health.push(performance.now() - started);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: 5 }, () => fetch(`${running.url}/api/v1/commands/${slug}/alias/one-thing/execute`, {
      method: 'POST', headers: { Authorization: `Bearer ${token}`, Accept: 'application/n-triples' },
    }).then(async (res) => ({ status: res.status, text: await res.text() }))));
    const elapsed = performance.now() - started;
    sampling = false;
    await sampler;
    const after = running.rss();
    const statuses = answers.map((a) => a.status).join(', ');
    const triples = answers[0]!.text.trim().split('\n').length;
    const mib = (n: number) => n / 2 ** 20;
    const label = `${quads.toLocaleString('en')}-quad workspace, data ${source === 'snapshot' ? 'in the snapshot' : 'written since the snapshot'}`;
    const ok = answers.every((a) => a.status === 200) && triples === 5;
    return [
      figure({
        name: `/health p99 while 5 executions start at once, ${label}`, unit: 'ms',
        value: percentile(health, 99), baseline: percentile(health, 50), target: '<= 50 ms, every execution answers', check: (_r, v) => v <= 50 && ok,
        cause: ok ? 'the main thread was held while the executions started (see the max)' : `not every execution answered its 5 triples (${statuses})`,
        note: `baseline: its p50; executions answered ${statuses} (${triples} triples each) in ${(elapsed / 1000).toFixed(1)} s; ${health.length} samples (max ${Math.max(...health).toFixed(0)} ms), ${healthErrors} failed`,
      }),
      figure({
        name: `RSS after 5 concurrent executions vs at rest, ${label}`, unit: 'MiB',
        value: mib(after), baseline: mib(atRest), target: '<= 2x', check: (r) => r <= 2,
        cause: 'the query worker holds a copy of the workspace\'s data beside the service\'s store',
      }),
    ];
  } finally {
    await running.stop();
  }
}
