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
