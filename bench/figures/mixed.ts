import { api, figure, installPackage, load, serviceWithWorkspace, type Figure, type LoadResult } from '../lib.js';
import { packageArchive } from '../data.js';

/**
 * A mixed load at 64 connections (issue 12, acceptance 11): each connection
 * cycles through a read (P5), a write (C5, a new slash command), a slash
 * execution (default answer) and a workspace read, while a 100,000-triple
 * matrix installs in the same workspace. Target: no error, p99 <= 1 s.
 * The baseline column is the same load on the service with no install.
 */
const CONNECTIONS = 64;
const DURATION_S = 10;
const QUERY = `PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
PREFIX iam: <https://poliglot.io/os/spec/iam#>
CONSTRUCT { ?agent rdfs:label ?label ; iam:hasRole ?role . ?role rdfs:label ?roleLabel }
WHERE { ?agent a iam:Agent ; rdfs:label ?label ; iam:hasRole ?role . ?role rdfs:label ?roleLabel }`;


export async function run(): Promise<Figure[]> {
  const env = await serviceWithWorkspace();
  try {
    const { svc, token, slug } = env;
    await installPackage(svc.url, token, slug, await packageArchive('reads', '1.0.0', 'https://bench.example/matrix/reads', 10_000));
    const created = await api(svc.url, token, 'POST', `/api/v1/commands/${slug}`, {
      alias: 'agents-and-roles', description: 'Agents with their roles', interpretation: 'Each agent with the roles its specification gives it.',
      scriptType: 'CONSTRUCT', scriptContent: QUERY,
    });
    if (created.status !== 200) throw new Error(`C5 answered ${created.status}: ${created.text.slice(0, 200)}`);
    const commandId: string = created.json.data.id;
    const auth = { Authorization: `Bearer ${token}` };
    // autocannon runs in its own process (bench/loadgen.ts); each window's aliases are unique ({{n}}).
    let window = 0;
    const mixed = async (duration: number): Promise<LoadResult> => {
      window++;
      return load({
        url: svc.url, connections: CONNECTIONS, duration,
        requests: [
          { label: 'P5 read', method: 'GET', path: `/api/v1/packages/${slug}/reads`, headers: auth },
          {
            label: 'C5 write', method: 'POST', path: `/api/v1/commands/${slug}`, headers: { ...auth, 'Content-Type': 'application/json' },
            uniqueBody: JSON.stringify({
              alias: `mixed-${window}-{{n}}`, description: 'Mixed load', interpretation: 'Lists every labelled thing.',
              scriptType: 'CONSTRUCT', scriptContent: 'PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> CONSTRUCT { ?s rdfs:label ?l } WHERE { ?s rdfs:label ?l } LIMIT 10',
            }),
          },
          { label: 'slash execute', method: 'POST', path: `/api/v1/commands/${slug}/${commandId}/execute`, headers: auth },
          { label: 'workspace read', method: 'GET', path: `/api/v1/workspaces/${slug}`, headers: auth },
        ],
      });
    };
    const quiet = await mixed(DURATION_S);
    const big = await packageArchive('big', '1.0.0', 'https://bench.example/matrix/big', 100_000);
    // The install starts a second into the load and runs on past it if it must.
    const install = new Promise((r) => setTimeout(r, 1000)).then(() => installPackage(svc.url, token, slug, big));
    install.catch(() => {});
    const busy = await mixed(DURATION_S);
    const { ms: installMs } = await install;
    const note = `${busy.errors} errors, ${busy.non2xx} non-2xx (quiet: ${quiet.errors}, ${quiet.non2xx}); install took ${(installMs / 1000).toFixed(1)} s`;
    return [
      figure({ name: `mixed load at ${CONNECTIONS} connections with an install, errors + non-2xx`, unit: '', value: busy.errors + busy.non2xx, baseline: quiet.errors + quiet.non2xx, target: '0', check: (_r, v) => v === 0, note,
        cause: quiet.errors + quiet.non2xx > 0 ? 'the same load without an install failed too: the service does not keep up with 64 connections on this machine' : 'requests failed only while the install ran: it starves the other requests (see the installs-loop figure)' }),
      figure({ name: 'mixed load with an install, p50 latency', unit: 'ms', value: busy.p50, baseline: quiet.p50, target: 'report', check: () => true }),
      figure({ name: 'mixed load with an install, p99 latency', unit: 'ms', value: busy.p99, baseline: quiet.p99, target: '<= 1000 ms', check: (_r, v) => v <= 1000, note: `max ${busy.max} ms (quiet ${quiet.max} ms)`,
        cause: quiet.p99 > 1000 ? 'p99 is over 1 s without an install as well: 64 connections queue behind each other on this machine' : 'the install stalls the other requests' }),
      figure({ name: 'mixed load with an install, throughput', unit: 'req/s', value: busy.rps, baseline: quiet.rps, target: 'report', check: () => true }),
      // Which kind of request makes the tail: each kind's p99 and p50, with the install and without (baseline column).
      ...(busy.byKind ?? []).map((k, i) => {
        const q = quiet.byKind?.[i];
        return figure({
          name: `${k.kind}: p99 latency (${k.count} requests; quiet ${q?.count ?? 0})`, unit: 'ms', value: k.p99, baseline: q?.p99 ?? Number.NaN,
          target: 'report', check: () => true, note: `p50 ${k.p50.toFixed(1)} vs ${q?.p50.toFixed(1) ?? '?'} ms; max ${k.max.toFixed(0)} vs ${q?.max.toFixed(0) ?? '?'} ms`,
        });
      }),
    ];
  } finally {
    await env.close();
  }
}
