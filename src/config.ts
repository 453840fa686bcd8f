import path from 'node:path';
import { z } from 'zod';

/**
 * Settings come from the environment and are validated at start; a bad value
 * stops the start with one line naming the setting (see `loadConfig`).
 */
const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().positive();
const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');
const semver = z.string().regex(/^\d+\.\d+\.\d+$/, 'must be a full semver version like 1.0.0');
const httpUrl = z.url({ protocol: /^https?$/ });

export const configSchema = z.object({
  PORT: port.default(8080),
  HOST: z.string().min(1).default('127.0.0.1'),
  /**
   * A listener of its own for `/health` and `/metrics` (on HOST), for
   * probes and scrapers: a flood of connections on PORT does not queue
   * them. Unset: none (both are answered on PORT, as they always are).
   */
  WSM_OPS_PORT: port.optional(),
  WSM_DATA_DIR: z.string().min(1).default('./data'),
  /** `self` (the registry this service hosts), a directory, or an http(s) base URL. */
  WSM_REGISTRY: z.string().min(1).default('self'),
  WSM_AUTO_UPDATE_INTERVAL: positiveInt.default(300),
  WSM_BASE_IRI: z.url().refine((v) => v.endsWith('/'), 'must end with a slash').default('https://workspaces.local/'),
  WSM_ENGINE_VERSION: semver.default('1.0.0'),
  WSM_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  WSM_OIDC_ISSUER: httpUrl.optional(),
  WSM_OIDC_AUDIENCE: z.string().min(1).optional(),
  WSM_OIDC_JWKS_URL: httpUrl.optional(),
  /** Dotted path of the claim that marks a system admin, e.g. `realm_access.roles`. */
  WSM_OIDC_ADMIN_CLAIM: z.string().min(1).default('wsm_system_admin'),
  /** When the admin claim is an array, the value it must contain. */
  WSM_OIDC_ADMIN_VALUE: z.string().min(1).default('wsm-admin'),
  WSM_TOKEN_TTL: positiveInt.default(3600 * 12),
  /**
   * The service's address as people and clients reach it (no trailing slash):
   * the sign-in issuer and the base of every sign-in URL. Default: the
   * address it listens on (`http://HOST:PORT`).
   */
  WSM_PUBLIC_URL: httpUrl.refine((v) => !v.endsWith('/') && !/[?#]/.test(v), 'must not end with a slash nor hold a query').optional(),
  /** The client id the ecosystem's command-line client signs in with (at this service, or registered at WSM_OIDC_ISSUER). */
  WSM_CLI_CLIENT_ID: z.string().regex(/^[\w.-]{1,100}$/, 'must be letters, digits, "_", "." or "-"').default('plgt'),
  /** Named in `/.well-known/poliglot.json`. */
  WSM_DEPLOYMENT_NAME: z.string().min(1).max(200).default('Workspace service'),
  /** The oldest command-line client version this service works with (`min_cli_version` of `/.well-known/poliglot.json`). */
  WSM_MIN_CLI_VERSION: semver.optional(),
  /** Lifetime in seconds of the access tokens of sign-in (refresh tokens renew them). */
  WSM_ACCESS_TOKEN_TTL: positiveInt.default(3600),
  WSM_MAX_BODY_BYTES: positiveInt.default(1024 * 1024),
  WSM_MAX_UPLOAD_BYTES: positiveInt.default(20 * 1024 * 1024),
  /** Largest body of a workspace import (after gzip is undone), docs/backup.md. */
  WSM_MAX_IMPORT_BYTES: positiveInt.default(1024 * 1024 * 1024),
  WSM_QUERY_TIMEOUT_MS: positiveInt.default(10_000),
  WSM_QUERY_MAX_TRIPLES: positiveInt.default(100_000),
  WSM_QUERY_MAX_MEMORY_MB: positiveInt.default(384),
  /** The embedded store: journal MiB a small store writes before an automatic snapshot (docs/decisions.md, Durability). */
  WSM_SNAPSHOT_JOURNAL_MB: z.coerce.number().int().min(1).max(64).default(16),
  /** Live event streams (P10 as Server-Sent Events) one user may hold open at once; beyond it 429. */
  WSM_MAX_EVENT_STREAMS: z.coerce.number().int().min(1).max(10_000).default(10),
  WSM_DEMO: bool.default(true),
  /** Case of command statuses in answers (docs/api.md, "Conventions"): `upper` for the ecosystem's client. */
  WSM_STATUS_CASE: z.enum(['lower', 'upper']).default('lower'),
  /** Where the data lives (docs/store.md, docs/remote-store.md, docs/cluster.md): the embedded Oxigraph store, a remote SPARQL 1.1 engine, or a journal in PostgreSQL with a replica per instance. */
  WSM_STORE: z.enum(['embedded', 'sparql', 'cluster']).default('embedded'),
  /** With `cluster`: the PostgreSQL database that holds the cluster's journal and snapshots (docs/cluster.md). */
  WSM_POSTGRES_URL: z.string().regex(/^postgres(ql)?:\/\/[^\s]+$/, 'must be a postgres:// URL').optional(),
  WSM_SPARQL_QUERY_URL: httpUrl.optional(),
  WSM_SPARQL_UPDATE_URL: httpUrl.optional(),
  WSM_SPARQL_USER: z.string().min(1).optional(),
  WSM_SPARQL_PASSWORD: z.string().min(1).optional(),
  /** `virtuoso` absorbs Virtuoso 7's quirks (non-atomic multi-op updates, INSERT DATA size limit). */
  WSM_SPARQL_DIALECT: z.enum(['standard', 'virtuoso']).default('standard'),
  /** With `sparql` or `cluster`: milliseconds an instance's lease on the lifecycle commands it runs lasts unless renewed. */
  WSM_LEASE_MS: z.coerce.number().int().min(500).max(3_600_000).default(30_000),
  /**
   * With `cluster`: quads past which an instance lets go of the workspaces it used least recently (docs/cluster.md,
   * "Residency"). Unset: every instance holds every workspace.
   */
  WSM_CLUSTER_RESIDENT_QUADS: z.coerce.number().int().min(1000, 'must be at least 1000 quads').optional(),
  /** With WSM_CLUSTER_RESIDENT_QUADS: seconds after which a workspace no read or write used is let go; with WSM_CLUSTER_PLACEMENT=lease, after which its lease is released. */
  WSM_CLUSTER_IDLE_SECONDS: z.coerce.number().int().min(1).max(86_400).default(600),
  /**
   * With `cluster`: `lease` places each workspace on one instance through a lease kept in PostgreSQL (docs/cluster.md,
   * "Placement"): only the holder writes the workspace, and other instances forward its requests there. `none`: every
   * instance writes every workspace.
   */
  WSM_CLUSTER_PLACEMENT: z.enum(['none', 'lease']).default('none'),
  /** With WSM_CLUSTER_PLACEMENT=lease: milliseconds a workspace's lease lasts unless renewed (renewed every third of it). */
  WSM_CLUSTER_LEASE_MS: z.coerce.number().int().min(500).max(60_000).default(3000),
  /**
   * With WSM_CLUSTER_PLACEMENT=lease: the URL other instances forward this one's workspaces' requests to. Default: the
   * address it listens on (`http://HOST:PORT`).
   */
  WSM_CLUSTER_ADVERTISE_URL: httpUrl.refine((v) => !v.endsWith('/') && !/[?#]/.test(v), 'must not end with a slash nor hold a query').optional(),
  /** The key that seals secret values at rest, a file outside the data directory (docs/secrets.md). */
  WSM_SECRETS_KEY_FILE: z.string().min(1).optional(),
}).superRefine((c, ctx) => {
  if (c.WSM_OPS_PORT !== undefined && c.WSM_OPS_PORT !== 0 && c.WSM_OPS_PORT === c.PORT) ctx.addIssue({ code: 'custom', path: ['WSM_OPS_PORT'], message: 'must differ from PORT (0 picks a free port)' });
  if (c.WSM_CLUSTER_RESIDENT_QUADS !== undefined && c.WSM_STORE !== 'cluster') ctx.addIssue({ code: 'custom', path: ['WSM_CLUSTER_RESIDENT_QUADS'], message: 'applies only with WSM_STORE=cluster' });
  if (c.WSM_CLUSTER_PLACEMENT !== 'none' && c.WSM_STORE !== 'cluster') ctx.addIssue({ code: 'custom', path: ['WSM_CLUSTER_PLACEMENT'], message: 'applies only with WSM_STORE=cluster' });
  if (c.WSM_CLUSTER_ADVERTISE_URL !== undefined && c.WSM_CLUSTER_PLACEMENT !== 'lease') ctx.addIssue({ code: 'custom', path: ['WSM_CLUSTER_ADVERTISE_URL'], message: 'applies only with WSM_CLUSTER_PLACEMENT=lease' });
  if (c.WSM_CLUSTER_PLACEMENT === 'lease' && !c.WSM_CLUSTER_ADVERTISE_URL && ['0.0.0.0', '::', '[::]'].includes(c.HOST)) {
    ctx.addIssue({ code: 'custom', path: ['WSM_CLUSTER_ADVERTISE_URL'], message: `is required with WSM_CLUSTER_PLACEMENT=lease when HOST=${c.HOST} (every address): other instances forward requests to it` });
  }
  if (c.WSM_STORE === 'cluster' && !c.WSM_POSTGRES_URL) ctx.addIssue({ code: 'custom', path: ['WSM_POSTGRES_URL'], message: 'is required when WSM_STORE=cluster' });
  if (c.WSM_STORE !== 'sparql') return;
  for (const key of ['WSM_SPARQL_QUERY_URL', 'WSM_SPARQL_UPDATE_URL'] as const) {
    if (!c[key]) ctx.addIssue({ code: 'custom', path: [key], message: 'is required when WSM_STORE=sparql' });
  }
  if (c.WSM_SPARQL_PASSWORD && !c.WSM_SPARQL_USER) {
    ctx.addIssue({ code: 'custom', path: ['WSM_SPARQL_USER'], message: 'is required when WSM_SPARQL_PASSWORD is set' });
  }
});

export type Config = z.infer<typeof configSchema> & { dataDir: string };

export class ConfigError extends Error {}

/** Validates the environment; throws a ConfigError naming the first bad setting. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const relevant: Record<string, string> = {};
  for (const key of Object.keys(configSchema.shape)) {
    const value = env[key];
    if (value !== undefined && value !== '') relevant[key] = value;
  }
  const parsed = configSchema.safeParse(relevant);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const name = String(issue.path[0] ?? 'environment');
    throw new ConfigError(`Invalid setting ${name}=${JSON.stringify(relevant[name] ?? '')}: ${issue.message}`);
  }
  return { ...parsed.data, dataDir: path.resolve(parsed.data.WSM_DATA_DIR) };
}
