/**
 * P5 probe (not part of `npm run bench`): starts the service with a package
 * installed from the hosted registry (`reads-registry`) and one uploaded
 * (`reads`), then drives P5 of the packages named on the command line at 32
 * connections for 6 s each and prints each rate. With BENCH_CPU_PROF=<dir>
 * the service writes a CPU profile of just that load.
 *
 *   node --import tsx bench/p5-probe.ts reads-registry reads
 */
import { installFromRegistry, installPackage, load, serviceWithWorkspace } from './lib.js';
import { packageArchive } from './data.js';
const env = await serviceWithWorkspace();
const { svc, token, root, slug } = env;
await installFromRegistry(svc.url, root, token, 'owner', slug, 'bench', 'reads-registry', await packageArchive('reads-registry', '1.0.0', 'https://bench.example/matrix/reads-registry', 200));
await installPackage(svc.url, token, slug, await packageArchive('reads', '1.0.0', 'https://bench.example/matrix/reads', 200));
for (const p of process.argv.slice(2)) {
  const r = await load({ url: `${svc.url}/api/v1/packages/${slug}/${p}`, connections: 32, duration: 6, headers: { Authorization: `Bearer ${token}` } });
  console.log(p, Math.round(r.rps), r.non2xx);
}
await env.close();
