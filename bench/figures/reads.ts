import { api, figure, installPackage, load, serviceWithWorkspace, startBaseline, type Figure } from '../lib.js';
import { packageArchive } from '../data.js';

/**
 * Reads: P5 and I6 at 32 connections against an Express handler in the same
 * process setup (node + tsx) answering the very bytes the service answered.
 */
export async function run(): Promise<Figure[]> {
  const env = await serviceWithWorkspace();
  const baseline = await startBaseline('static');
  try {
    const { svc, token, slug } = env;
    await installPackage(svc.url, token, slug, await packageArchive('reads', '1.0.0', 'https://bench.example/matrix/reads', 200));
    const ws = await api(svc.url, token, 'GET', `/api/v1/workspaces/${slug}`);
    const ownerId: string = ws.json.data.owner.id;
    const targets = [
      { name: 'P5 GET package', path: `/api/v1/packages/${slug}/reads` },
      { name: 'I6 GET user', path: `/api/v1/iam/${slug}/users/${ownerId}` },
    ];
    const figures: Figure[] = [];
    for (const target of targets) {
      const probe = await fetch(svc.url + target.path, { headers: { Authorization: `Bearer ${token}` } });
      const bytes = Buffer.from(await probe.arrayBuffer());
      if (probe.status !== 200) throw new Error(`${target.name} answered ${probe.status}: ${bytes.toString().slice(0, 200)}`);
      await fetch(`${baseline.url}/__set`, { method: 'POST', headers: { 'X-Content-Type': probe.headers.get('content-type') ?? 'application/json' }, body: bytes });
      const opts = { connections: 32, duration: 5, headers: { Authorization: `Bearer ${token}` } };
      await load({ ...opts, url: svc.url + target.path, duration: 1 }); // warm-up
      const service = await load({ ...opts, url: svc.url + target.path });
      await load({ ...opts, url: baseline.url + target.path, duration: 1 });
      const base = await load({ ...opts, url: baseline.url + target.path });
      if (service.non2xx || service.errors) throw new Error(`${target.name}: ${service.non2xx} non-2xx, ${service.errors} errors`);
      figures.push(figure({
        name: `${target.name}, throughput (${bytes.length} B)`, unit: 'req/s', value: service.rps, baseline: base.rps,
        target: '>= 0.5x', check: (r) => r >= 0.5,
      }));
      figures.push(figure({
        name: `${target.name}, p99 latency`, unit: 'ms', value: service.p99, baseline: base.p99,
        target: 'report', check: () => true,
      }));
    }
    return figures;
  } finally {
    await baseline.stop();
    await env.close();
  }
}
