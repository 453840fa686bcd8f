import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import supertest from 'supertest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { startServer, type RunningServer } from '../../src/server.js';
import type { StoreTestOptions } from '../../src/store/open.js';
import { mintToken, type MintOptions } from '../../src/auth/tokens.js';
import { emptyEngine, engineEnv, remoteSettings } from './remote.js';
import { clusterStoreEnv } from './cluster.js';

/** Data directories (with their base IRI) whose remote graphs this test process has already emptied. */
const emptied = new Set<string>();

/**
 * `WSM_TEST_STORE=sparql` runs the test servers on the remote engine whose
 * settings are in the environment (see helpers/remote.ts). A new data
 * directory starts from an engine emptied of the graphs under its base IRI;
 * a restart on the same data directory finds what the last run left, as
 * on the embedded store. Two servers up at once on one engine need
 * different base IRIs (`WSM_BASE_IRI`), or they share their graphs.
 */
async function remoteStoreEnv(baseIri: string, dataDir: string): Promise<Record<string, string>> {
  if (process.env.WSM_TEST_STORE !== 'sparql') return {};
  const settings = remoteSettings();
  if (!settings) throw new Error('WSM_TEST_STORE=sparql needs the WSM_SPARQL_* settings of a running engine');
  const key = `${path.resolve(dataDir)} ${baseIri}`;
  if (!emptied.has(key)) {
    emptied.add(key);
    await emptyEngine(settings, baseIri);
  }
  return engineEnv(settings);
}

export interface TestServer {
  url: string;
  dataDir: string;
  server: RunningServer;
  /** supertest bound to the running server (a real socket). */
  http: ReturnType<typeof supertest>;
  token(username: string, options?: Partial<MintOptions>): Promise<string>;
  close(): Promise<void>;
}

export const tempDir = (prefix = 'wsm-test-'): string => mkdtempSync(path.join(os.tmpdir(), prefix));

/**
 * Starts the real service on a free loopback port with a fresh data dir.
 * `store` reaches the embedded store's test options (journal fault injection).
 */
export async function startTestServer(env: Record<string, string> = {}, dataDir = tempDir(), store?: StoreTestOptions): Promise<TestServer> {
  const remote = { ...await remoteStoreEnv(env.WSM_BASE_IRI ?? 'https://workspaces.local/', dataDir), ...await clusterStoreEnv(dataDir) };
  const config = loadConfig({
    ...remote,
    PORT: '0',
    HOST: '127.0.0.1',
    WSM_DATA_DIR: dataDir,
    WSM_REGISTRY: path.join(dataDir, 'registry'),
    WSM_LOG_LEVEL: process.env.WSM_TEST_LOG_LEVEL ?? 'silent',
    WSM_DEMO: 'false',
    ...env,
  });
  const server = await startServer(config, createLogger(config.WSM_LOG_LEVEL), store ? { store } : {});
  return {
    url: server.url,
    dataDir,
    server,
    http: supertest(server.url),
    token: (username, options = {}) => mintToken(dataDir, username, { ttlSeconds: 3600, ...options }),
    close: async () => {
      await server.close();
    },
  };
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

export const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

/**
 * A workspace with an owner (admin), a plain member and an outsider, each
 * with a token; `root` is a system admin.
 */
export async function seedWorkspace(t: Pick<TestServer, 'http' | 'token'>, slug = 'acme') {
  const root = await t.token('root', { systemAdmin: true });
  const owner = await t.token(`${slug}-owner`, { email: `${slug}-owner@example.org`, firstName: 'Olive', lastName: 'Owner' });
  const member = await t.token(`${slug}-member`);
  const outsider = await t.token(`${slug}-outsider`);
  const created = await t.http.post('/api/v1/workspaces').set(bearer(root)).send({ slug, owner: `${slug}-owner` });
  if (created.status !== 201) throw new Error(`seed failed: ${created.status} ${JSON.stringify(created.body)}`);
  const added = await t.http.put(`/api/v1/workspaces/${slug}/members/${slug}-member`).set(bearer(owner)).send({});
  if (added.status !== 200) throw new Error(`seed failed: ${added.status} ${JSON.stringify(added.body)}`);
  // The outsider calls once so its user record exists.
  await t.http.get('/api/v1/workspaces').set(bearer(outsider));
  return { workspace: created.body.data as { id: string; slug: string }, tokens: { root, owner, member, outsider } };
}

export type Tokens = Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
export type SeededWorkspace = { id: string; slug: string };

/**
 * The hooks most suites start with: before them a server (with `env`) and
 * a seeded workspace `slug`, handed to `use`; after them the server closed
 * and its data dir removed.
 */
export function withSeededServer(slug: string, use: (seeded: { t: TestServer; tokens: Tokens; workspace: SeededWorkspace }) => void, env: Record<string, string> = {}): void {
  let t: TestServer | undefined;
  before(async () => {
    t = await startTestServer(env);
    use({ t, ...await seedWorkspace(t, slug) });
  });
  after(async () => {
    if (!t) return;
    await t.close();
    removeDir(t.dataDir);
  });
}
