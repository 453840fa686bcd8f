import type { Services } from './app.js';
import { mintToken } from './auth/tokens.js';

export interface BootstrapResult {
  /** Set on the first start only: a token for the demo administrator. */
  demoToken?: string;
}

const DEMO_SLUG = 'demo';
const DEMO_ADMIN = 'admin';

/**
 * First start: with an empty store (and WSM_DEMO not false), create the
 * `demo` workspace owned by `admin`, and mint a token for it.
 */
export async function bootstrap(services: Services): Promise<BootstrapResult> {
  const { config, workspaces, logger } = services;
  if (!config.WSM_DEMO || services.store.size() > 0) return {};
  const ws = await workspaces.create({ slug: DEMO_SLUG, name: 'Demo workspace', owner: DEMO_ADMIN });
  logger.info({ workspace: ws.slug, owner: DEMO_ADMIN }, 'first start: created the demo workspace');
  if (config.WSM_OIDC_ISSUER) return {};
  const demoToken = await mintToken(config.dataDir, DEMO_ADMIN, { systemAdmin: true, ttlSeconds: config.WSM_TOKEN_TTL });
  return { demoToken };
}
