import { randomBytes } from 'node:crypto';
import path from 'node:path';
import pg from 'pg';

/*
 * The cluster store's tests run on the PostgreSQL whose URL is in
 * `WSM_POSTGRES_URL` (`npm run postgres` prints it). Each test cluster, and
 * with `WSM_TEST_STORE=cluster` each test server's data directory, gets a
 * schema of its own in that database (through the URL's `search_path`), so
 * tests never see each other's journals.
 */

export const NO_POSTGRES = 'no PostgreSQL: run `npm run postgres` and export the settings it prints (WSM_POSTGRES_URL) to run these tests';

export function postgresUrl(): string | undefined {
  return process.env.WSM_POSTGRES_URL || undefined;
}

/**
 * Skips the suite without PostgreSQL, saying why; under `CI=true` a missing
 * PostgreSQL fails it instead (CI starts one).
 */
export function requirePostgres(ctx: Mocha.Context): string {
  const url = postgresUrl();
  if (url) return url;
  if (process.env.CI === 'true') throw new Error(`CI=true but ${NO_POSTGRES}`);
  ctx.skip();
}

/** A new, empty schema in the test database; the URL that makes it the cluster's. */
export async function freshClusterUrl(base = postgresUrl()): Promise<string> {
  if (!base) throw new Error(NO_POSTGRES);
  const schema = `t_${randomBytes(8).toString('hex')}`;
  const client = new pg.Client({ connectionString: base });
  await client.connect();
  try {
    await client.query(`CREATE SCHEMA ${schema}`);
  } finally {
    await client.end();
  }
  return withSchema(base, schema);
}

/** The rows of one statement run on its own connection to the cluster at `url` (a test's look into the tables). */
export async function sqlAt(url: string, text: string, values: unknown[] = []): Promise<Array<Record<string, string>>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text, values)).rows as Array<Record<string, string>>;
  } finally {
    await client.end();
  }
}

export function withSchema(url: string, schema: string): string {
  const u = new URL(url);
  u.searchParams.set('options', `-c search_path=${schema}`);
  return u.toString();
}

const byDataDir = new Map<string, string>();

/**
 * `WSM_TEST_STORE=cluster`: the settings of a test server on the cluster
 * store. A new data directory gets a new schema; a restart on the same data
 * directory finds what the last run left, as on the embedded store.
 */
export async function clusterStoreEnv(dataDir: string): Promise<Record<string, string>> {
  if (process.env.WSM_TEST_STORE !== 'cluster') return {};
  const key = path.resolve(dataDir);
  let url = byDataDir.get(key);
  if (!url) {
    url = await freshClusterUrl();
    byDataDir.set(key, url);
  }
  // WSM_TEST_CLUSTER_PLACEMENT=lease: the same with placement (every workspace leased by the one instance that writes it).
  const placement: Record<string, string> = process.env.WSM_TEST_CLUSTER_PLACEMENT === 'lease' ? { WSM_CLUSTER_PLACEMENT: 'lease' } : {};
  return { WSM_STORE: 'cluster', WSM_POSTGRES_URL: url, ...placement };
}
