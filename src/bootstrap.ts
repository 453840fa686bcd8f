import type { Services } from './app.js';
import { mintToken } from './auth/tokens.js';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { publishExamples } from './packages/examples.js';

export interface BootstrapResult {
  /** Set on the first start only: a token for the demo administrator. */
  demoToken?: string;
  /** Example packages published into an empty directory registry at this start: `publisher/name`. */
  examples?: string[];
}

export const EXAMPLES_PUBLISHER = 'examples';

/**
 * When the registry is a directory that is missing or empty, publish the
 * example packages into it (publisher `examples`), so a newcomer can install
 * one with a single request. Never touches a registry that holds anything.
 */
export async function publishExampleRegistry(services: Services): Promise<string[]> {
  const location = services.config.WSM_REGISTRY;
  if (/^https?:\/\//i.test(location)) return [];
  const dir = path.resolve(location);
  const entries = await readdir(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [] as string[];
    throw err;
  });
  if (entries.some((e) => !e.startsWith('.'))) return [];
  await publishExamples(dir, EXAMPLES_PUBLISHER);
  const names = (await readdir(path.join(dir, EXAMPLES_PUBLISHER)).catch(() => [] as string[])).filter((n) => !n.startsWith('.')).sort();
  if (names.length) services.logger.info({ registry: dir, packages: names }, 'published the example packages into the empty registry');
  return names.map((n) => `${EXAMPLES_PUBLISHER}/${n}`);
}

const DEMO_SLUG = 'demo';
const DEMO_ADMIN = 'admin';

/**
 * First start: with an empty store (and WSM_DEMO not false), create the
 * `demo` workspace owned by `admin`, and mint a token for it.
 */
export async function bootstrap(services: Services): Promise<BootstrapResult> {
  const { config, workspaces, logger } = services;
  const examples = await publishExampleRegistry(services);
  if (!config.WSM_DEMO || await services.store.size() > 0) return examples.length ? { examples } : {};
  const ws = await workspaces.create({ slug: DEMO_SLUG, name: 'Demo workspace', owner: DEMO_ADMIN });
  logger.info({ workspace: ws.slug, owner: DEMO_ADMIN }, 'first start: created the demo workspace');
  if (config.WSM_OIDC_ISSUER) return examples.length ? { examples } : {};
  const demoToken = await mintToken(config.dataDir, DEMO_ADMIN, { systemAdmin: true, ttlSeconds: config.WSM_TOKEN_TTL });
  return { demoToken, ...(examples.length ? { examples } : {}) };
}
