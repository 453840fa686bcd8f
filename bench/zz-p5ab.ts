// Untracked probe: P5 (uploaded package) alternately on embedded and cluster, 32 connections.
import { installPackage, load, serviceWithWorkspace, withServiceStore } from './lib.js';
import { packageArchive } from './data.js';
import { freshClusterUrl } from '../test/helpers/cluster.js';
const pgUrl = process.env.PROBE_PG!;
const archive = await packageArchive('reads', '1.0.0', 'https://bench.example/matrix/reads', 200);
const emb = await serviceWithWorkspace();
await installPackage(emb.svc.url, emb.token, emb.slug, archive);
const clu = await withServiceStore(async () => ({ WSM_STORE: 'cluster', WSM_POSTGRES_URL: await freshClusterUrl(pgUrl), ...JSON.parse(process.env.PROBE_ENV ?? '{}') }), () => serviceWithWorkspace());
await installPackage(clu.svc.url, clu.token, clu.slug, archive);
const path = process.env.PROBE_PATH ?? `/api/v1/packages/bench/reads`;
const dur = Number(process.env.PROBE_S ?? 5);
for (const s of [emb, clu]) await load({ url: s.svc.url + path, connections: 32, duration: 2, headers: { Authorization: `Bearer ${s.token}` } });
const res: Record<string, number[]> = { emb: [], clu: [] };
for (let i = 0; i < Number(process.env.PROBE_PAIRS ?? 3); i++) {
  for (const [k, s] of [['emb', emb], ['clu', clu]] as const) {
    const r = await load(process.env.PROBE_C5 ? { url: s.svc.url + '/api/v1/commands/bench', connections: 32, duration: dur, method: 'POST', headers: { Authorization: `Bearer ${s.token}`, 'Content-Type': 'application/json' }, uniqueBody: JSON.stringify({ alias: 'bench-{{n}}', description: 'B', interpretation: 'L', scriptType: 'CONSTRUCT', scriptContent: 'PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> CONSTRUCT { ?s rdfs:label ?l } WHERE { ?s rdfs:label ?l }' }) } : { url: s.svc.url + path, connections: 32, duration: dur, headers: { Authorization: `Bearer ${s.token}` } });
    if (r.non2xx) console.error('non2xx', k, r.non2xx);
    res[k]!.push(Math.round(r.rps));
  }
}
const m = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
console.log(JSON.stringify(res), 'ratio', (m(res.clu!) / m(res.emb!)).toFixed(2));
const met = await (await fetch(clu.svc.url + '/metrics', { headers: { Authorization: `Bearer ${clu.root}` } })).text();
console.log(met.split('\n').filter((l) => l.startsWith('wsm_cluster')).join('\n'));
await emb.close(); await clu.close();
