import { api, figure, installPackage, sampleLatency, serviceWithWorkspace, type Figure } from '../lib.js';
import { packageArchive } from '../data.js';

/** Brings a workspace to `packages` installed packages and `users` members, through the API. */
async function grow(url: string, token: string, slug: string, have: { packages: number; users: number }, want: { packages: number; users: number }): Promise<void> {
  const tasks: Array<() => Promise<unknown>> = [];
  for (let i = have.packages; i < want.packages; i++) {
    tasks.push(async () => {
      // Same bytes, renamed: the manifest decides the name, so build each one.
      const pkg = await packageArchive(`pkg-${i}`, '1.0.0', `https://bench.example/matrix/pkg-${i}`, 0);
      // 16 clients polling their command every 2 ms would be most of the service's work: 50 ms.
      await installPackage(url, token, slug, pkg, 'package.tgz', 50);
    });
  }
  for (let i = have.users; i < want.users; i++) {
    tasks.push(() => api(url, token, 'PUT', `/api/v1/workspaces/${slug}/members/user-${i}`, { email: `user-${i}@bench.example` }));
  }
  let next = 0;
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (next < tasks.length) await tasks[next++]!();
  }));
}

/** P4 and I5 page 1 with 10,000 packages / users against 10. */
export async function run(): Promise<Figure[]> {
  const env = await serviceWithWorkspace();
  try {
    const { svc, token, slug } = env;
    const measure = (path: string) => sampleLatency(300, () => fetch(svc.url + path, { headers: { Authorization: `Bearer ${token}` } }));
    const small = { packages: 10, users: 10 };
    const large = { packages: 10_000, users: 10_000 };
    await grow(svc.url, token, slug, { packages: 0, users: 0 }, small);
    const p4Small = await measure(`/api/v1/packages/${slug}?page=1&pageSize=20`);
    const i5Small = await measure(`/api/v1/iam/${slug}/users?page=1&pageSize=20`);
    await grow(svc.url, token, slug, small, large);
    const p4Large = await measure(`/api/v1/packages/${slug}?page=1&pageSize=20`);
    const i5Large = await measure(`/api/v1/iam/${slug}/users?page=1&pageSize=20`);
    return [
      figure({ name: 'P4 page 1, p50 latency, 10,000 vs 10 packages', unit: 'ms', value: p4Large.p50, baseline: p4Small.p50, target: '<= 2x', check: (r) => r <= 2, cause: 'page 1 of P4 costs more with more packages: a step of the list still grows with the number of installations' }),
      figure({ name: 'I5 page 1, p50 latency, 10,000 vs 10 users', unit: 'ms', value: i5Large.p50, baseline: i5Small.p50, target: '<= 2x', check: (r) => r <= 2, cause: 'page 1 of I5 costs more with more users: a step of the list still grows with the number of members' }),
    ];
  } finally {
    await env.close();
  }
}
