import type { Services } from './app.js';
import { mintToken } from './auth/tokens.js';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { publishExamples, exampleNames, EXAMPLES_DIR } from './packages/examples.js';
import { buildPackageArchive } from './packages/build-archive.js';
import { AppError } from './errors.js';
import { readFile } from 'node:fs/promises';

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
  if (location === 'self') return publishHostedExamples(services);
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
 * With the hosted registry (`WSM_REGISTRY=self`): the first start creates
 * the publisher `examples`, owned by `admin`, and publishes the example
 * packages into it; later starts publish an example version that is not
 * there yet (the same bytes again change nothing). A package is published
 * after the packages it depends on, whose matrices its validation needs.
 */
async function publishHostedExamples(services: Services): Promise<string[]> {
  const registry = services.hostedRegistry;
  const existing = await registry.publisher(EXAMPLES_PUBLISHER).catch(() => null);
  // Another instance starting at the same moment may create it first (409): it is there either way.
  if (!existing) await alreadyThere(registry.addPublisher(EXAMPLES_PUBLISHER, 'Example packages', [DEMO_ADMIN]));
  let pending = await Promise.all(exampleNames().map(async (dir) => {
    const manifest = JSON.parse(await readFile(path.join(EXAMPLES_DIR, dir, 'manifest.json'), 'utf8')) as { name: string };
    return { dir, name: manifest.name, bytes: await buildPackageArchive(path.join(EXAMPLES_DIR, dir)) };
  }));
  const published = new Set<string>();
  const as = { username: DEMO_ADMIN, systemAdmin: false };
  for (let progress = true; pending.length && progress;) {
    progress = false;
    const retry: typeof pending = [];
    for (const example of pending) {
      try {
        const out = await registry.publish(as, EXAMPLES_PUBLISHER, example.name, example.bytes);
        if (out.created) services.logger.info({ example: example.dir }, 'published an example package into the hosted registry');
        published.add(`${EXAMPLES_PUBLISHER}/${example.name}`);
        progress = true;
      } catch (err) {
        // Its dependency may not be published yet: try again after the others.
        if (err instanceof AppError && err.code === 'VALIDATION_FAILED') retry.push(example);
        else services.logger.warn({ err, example: example.dir }, 'could not publish an example package into the hosted registry');
      }
    }
    pending = retry;
  }
  for (const example of pending) services.logger.warn({ example: example.dir }, 'an example package does not pass the registry checks; not published');
  return [...published].sort();
}

/** `created`, or nothing when it was refused with 409 because what it creates already exists. */
async function alreadyThere<T>(created: Promise<T>): Promise<T | undefined> {
  try {
    return await created;
  } catch (err) {
    if (err instanceof AppError && err.code === 'CONFLICT') return undefined;
    throw err;
  }
}

/** The demo workspace's slash command (README, "Run a slash command"): docs/slash-commands.md's `/roles-of-agent`. */
export const DEMO_COMMAND = {
  alias: 'roles-of-agent',
  scriptType: 'CONSTRUCT' as const,
  description: 'Every agent with the roles its specification gives it, with labels',
  interpretation: 'Each agent with the roles its specification gives it.',
  scriptContent: `PREFIX iam: <https://poliglot.io/os/spec/iam#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
CONSTRUCT {
  ?agent a iam:Agent ; rdfs:label ?agentLabel ; iam:hasRole ?role .
  ?role rdfs:label ?roleLabel .
}
WHERE {
  ?agent a iam:Agent ; iam:hasRole ?role .
  OPTIONAL { ?agent rdfs:label ?agentLabel }
  OPTIONAL { ?role rdfs:label ?roleLabel }
}`,
};

async function createDemoCommand(services: Services): Promise<void> {
  const access = await services.workspaces.requireAdmin({ username: DEMO_ADMIN, systemAdmin: false, profile: {} }, DEMO_SLUG);
  await services.slashCommands.create(access, access.user!, DEMO_COMMAND);
}

/**
 * First start: with an empty store (and WSM_DEMO not false), create the
 * `demo` workspace owned by `admin`, with the slash command `/roles-of-agent`,
 * and mint a token for it. Every step is idempotent across instances:
 * instances started together on one remote engine all find the store
 * empty, one creates each record (a conditional write), and the others
 * find it created and carry on, each printing a token as the first start
 * does.
 */
export async function bootstrap(services: Services): Promise<BootstrapResult> {
  const { config, workspaces, logger } = services;
  // Read before the examples are published: the hosted registry keeps them in the store.
  const firstStart = await services.store.isEmpty();
  const examples = await publishExampleRegistry(services);
  if (!config.WSM_DEMO || !firstStart) return examples.length ? { examples } : {};
  const ws = await alreadyThere(workspaces.create({ slug: DEMO_SLUG, name: 'Demo workspace', owner: DEMO_ADMIN }));
  if (ws) logger.info({ workspace: ws.slug, owner: DEMO_ADMIN }, 'first start: created the demo workspace');
  else logger.info({ workspace: DEMO_SLUG }, 'first start: the demo workspace was created by another instance starting at the same time');
  await alreadyThere(createDemoCommand(services));
  if (config.WSM_OIDC_ISSUER) return examples.length ? { examples } : {};
  const demoToken = await mintToken(config.dataDir, DEMO_ADMIN, { systemAdmin: true, ttlSeconds: config.WSM_TOKEN_TTL });
  return { demoToken, ...(examples.length ? { examples } : {}) };
}
