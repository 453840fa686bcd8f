import { api, figure, installPackage, mintToken, sampleLatency, serviceWithWorkspace, type Figure } from '../lib.js';
import { packageArchive } from '../data.js';

const OTHER_USERS = 6_000;
const COMMANDS = 20;
const QUERY = `PREFIX iam: <https://poliglot.io/os/spec/iam#>
CONSTRUCT { ?agent iam:hasRole ?role } WHERE { ?agent iam:hasRole ?role }`;

/**
 * Reading, listing and running slash commands (C1, C4, execute) with 6,000
 * users in another workspace against 3 users in the service (issue 12,
 * acceptance 8: a list of commands used to join every user record).
 */
export async function run(): Promise<Figure[]> {
  const env = await serviceWithWorkspace();
  try {
    const { svc, token, slug, dataDir } = env;
    await installPackage(svc.url, token, slug, await packageArchive('users-bench', '1.0.0', 'https://bench.example/matrix/users', 200));
    for (const user of ['member-1', 'member-2']) {
      const res = await api(svc.url, token, 'PUT', `/api/v1/workspaces/${slug}/members/${user}`, { email: `${user}@bench.example` });
      if (res.status >= 300) throw new Error(`member PUT answered ${res.status}`);
    }
    let id = '';
    for (let i = 0; i < COMMANDS; i++) {
      const created = await api(svc.url, token, 'POST', `/api/v1/commands/${slug}`, { alias: `cmd-${i}`, scriptType: 'CONSTRUCT', scriptContent: QUERY });
      if (created.status !== 200) throw new Error(`C5 answered ${created.status}`);
      id = created.json.data.id;
    }
    const get = (path: string) => () => fetch(svc.url + path, { headers: { Authorization: `Bearer ${token}` } });
    const measure = async () => ({
      c4: await sampleLatency(300, get(`/api/v1/commands/${slug}`)),
      c1: await sampleLatency(300, get(`/api/v1/commands/${slug}/${id}`)),
      execute: await sampleLatency(300, () => fetch(`${svc.url}/api/v1/commands/${slug}/${id}/execute`, {
        method: 'POST', headers: { Authorization: `Bearer ${token}`, Accept: 'application/n-triples' },
      })),
    });
    const few = await measure();

    const root = await mintToken(dataDir, 'root', true);
    const other = await api(svc.url, root, 'POST', '/api/v1/workspaces', { slug: 'others', owner: 'others-owner' });
    if (other.status !== 201) throw new Error(`workspace creation answered ${other.status}`);
    let next = 0;
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (next < OTHER_USERS) {
        const i = next++;
        const res = await api(svc.url, root, 'PUT', `/api/v1/workspaces/others/members/other-${i}`, { email: `other-${i}@bench.example` });
        if (res.status >= 300) throw new Error(`member PUT answered ${res.status}`);
      }
    }));
    const many = await measure();
    const row = (name: string, key: 'c4' | 'c1' | 'execute') => figure({
      name: `${name}, p50 latency, ${OTHER_USERS.toLocaleString('en')} users in another workspace vs 3 users`, unit: 'ms',
      value: many[key].p50, baseline: few[key].p50, target: '<= 1.5x', check: (r) => r <= 1.5,
      cause: `${name} reads more with users elsewhere: a query still joins across other workspaces' user records`,
      note: `p99 ${many[key].p99.toFixed(2)} vs ${few[key].p99.toFixed(2)} ms`,
    });
    return [row(`C4 (list of ${COMMANDS} commands)`, 'c4'), row('C1 (one command)', 'c1'), row('execute (N-Triples)', 'execute')];
  } finally {
    await env.close();
  }
}
