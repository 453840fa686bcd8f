/**
 * The cluster's spread figure alone (bench/figures/cluster-spread.ts),
 * printed rather than written to bench/RESULTS.md: data over three
 * instances with residency and placement, the largest instance's RSS and
 * P5 on a workspace's owner against one embedded instance holding it all.
 *
 *   WSM_BENCH_POSTGRES_URL=... WSM_BENCH_CLUSTER_SPREAD_QUADS=300000 \
 *   WSM_BENCH_CLUSTER_SPREAD_WORKSPACES=30 npx tsx bench/cluster-spread.ts
 *
 * Without WSM_BENCH_POSTGRES_URL a PostgreSQL is started under a temporary
 * directory and stopped at the end (as `npm run bench -- cluster` does).
 */
import { startPostgres } from './figures/cluster.js';
import { clusterSpread } from './figures/cluster-spread.js';

const postgres = startPostgres();
try {
  for (const f of await clusterSpread(postgres.url)) process.stdout.write(`${JSON.stringify(f, null, 2)}\n`);
} finally {
  postgres.stop();
}
// As bench/run.ts: exit even if a handle is left open.
process.exit();
