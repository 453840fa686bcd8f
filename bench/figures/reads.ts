import { api, figure, installFromRegistry, installPackage, interleave, load, serviceWithWorkspace, startBaseline, type Figure, type LoadResult } from '../lib.js';
import { packageArchive } from '../data.js';

const PAIRS = 3;
const WINDOW_S = 3;

/**
 * Reads at 32 connections: P5 of a package installed from the hosted
 * registry (the service's default; its answer looks up the registry's
 * latest version), P5 of an uploaded package, and I6, each against an
 * Express handler answering the very bytes the service answered. The
 * service runs with its defaults (request log at info); service and
 * baseline windows interleave; autocannon runs in its own process.
 */
export interface ReadTarget { name: string; path: string; registry: boolean }

/** The figure's reads on a service of `serviceWithWorkspace`: its packages installed (from the registry, by upload), the paths to read. */
export async function readTargets(env: Awaited<ReturnType<typeof serviceWithWorkspace>>): Promise<ReadTarget[]> {
  const { svc, token, root, slug } = env;
  await installFromRegistry(svc.url, root, token, 'owner', slug, 'bench', 'reads-registry',
    await packageArchive('reads-registry', '1.0.0', 'https://bench.example/matrix/reads-registry', 200));
  await installPackage(svc.url, token, slug, await packageArchive('reads', '1.0.0', 'https://bench.example/matrix/reads', 200));
  const ws = await api(svc.url, token, 'GET', `/api/v1/workspaces/${slug}`);
  const ownerId: string = ws.json.data.owner.id;
  return [
    { name: 'P5 GET package installed from the registry', path: `/api/v1/packages/${slug}/reads-registry`, registry: true },
    { name: 'P5 GET package installed by upload', path: `/api/v1/packages/${slug}/reads`, registry: false },
    { name: 'I6 GET user', path: `/api/v1/iam/${slug}/users/${ownerId}`, registry: false },
  ];
}

/** The bytes a target answers (200, and for a registry-installed package, with the registry's latest version), or an error saying what came instead. */
export async function readAnswer(url: string, token: string, target: ReadTarget): Promise<{ bytes: Buffer<ArrayBuffer>; contentType: string }> {
  const probe = await fetch(url + target.path, { headers: { Authorization: `Bearer ${token}` } });
  const bytes = Buffer.from(await probe.arrayBuffer());
  if (probe.status !== 200) throw new Error(`${target.name} answered ${probe.status}: ${bytes.toString().slice(0, 200)}`);
  if (target.registry) {
    const body = JSON.parse(bytes.toString()) as { data: { latestVersion?: string | null } };
    if (!body.data.latestVersion) throw new Error(`${target.name}: the answer has no latestVersion, so the registry lookup was not on the path`);
  }
  return { bytes, contentType: probe.headers.get('content-type') ?? 'application/json' };
}

export async function run(): Promise<Figure[]> {
  const env = await serviceWithWorkspace();
  const baseline = await startBaseline('static');
  try {
    const { svc, token } = env;
    const targets = await readTargets(env);
    const figures: Figure[] = [];
    for (const target of targets) {
      const { bytes, contentType } = await readAnswer(svc.url, token, target);
      const set = await fetch(`${baseline.url}/__set`, { method: 'POST', headers: { 'X-Content-Type': contentType }, body: bytes });
      if (!set.ok) throw new Error(`baseline /__set answered ${set.status}`);
      const window = (url: string, duration = WINDOW_S) => async (): Promise<LoadResult> => {
        const r = await load({ url, connections: 32, duration, headers: { Authorization: `Bearer ${token}` } });
        if (r.non2xx || r.errors) throw new Error(`${target.name} on ${url}: ${r.non2xx} non-2xx, ${r.errors} errors`);
        return r;
      };
      await window(svc.url + target.path, 1)(); // warm-up
      await window(baseline.url + target.path, 1)();
      const m = await interleave(PAIRS, window(svc.url + target.path), window(baseline.url + target.path), (r) => r.rps);
      const p99 = (rs: LoadResult[]) => rs.map((r) => r.p99).sort((a, b) => a - b)[Math.floor(rs.length / 2)]!;
      figures.push(figure({
        name: `${target.name}, throughput (${bytes.length} B)`, unit: 'req/s',
        value: m.serviceMedian, baseline: m.baselineMedian, ratios: m.ratios,
        target: '>= 0.5x', check: (r) => r >= 0.5,
        note: `p99 ${p99(m.service)} vs ${p99(m.baseline)} ms`,
        cause: `the service authenticates, checks membership, reads the store${target.registry ? ', looks up the latest version in the registry' : ''} and logs each request at info; the baseline sends fixed bytes`,
      }));
    }
    return figures;
  } finally {
    await baseline.stop();
    await env.close();
  }
}
