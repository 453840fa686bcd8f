import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type Config } from './config.js';
import { createLogger } from './logger.js';
import { AppError, badRequest, notFound } from './errors.js';
import { readFile, stat } from 'node:fs/promises';
import { TRANSFER_USAGE, backupCommand, exportCommand, importCommand, restoreCommand } from './cli-transfer.js';

/**
 * `wsm <command>`: serve | token | passwd | publish | journal | help. Run from a checkout with
 * `npm run wsm -- <command>`; `npm start` is `wsm serve`.
 */
const USAGE = `Usage: wsm <command> [options]

Commands:
  serve                         start the service (settings from the environment, see README)
  token <username> [options]    print a bearer token of the embedded issuer
      --system-admin            the token makes its holder a system administrator
      --email E --first-name F --last-name L
      --ttl SECONDS             lifetime (default WSM_TOKEN_TTL, 12 hours)
  passwd <username> [options]   set the password a user signs in with, read from standard input (a prompt
                                on a terminal); through the running service, as a system administrator of
                                the data directory's issuer
      --system-admin            the user is a system administrator when signed in (default: unchanged)
      --url URL                 the service (default http://HOST:PORT)
  publish <folder|file.tgz> [options]
                                publish a package (a folder is packed first)
      --url URL                 to the registry of a running service (default with WSM_REGISTRY=self:
                                this service at HOST:PORT; with an http(s) WSM_REGISTRY: that one)
      --token T | --api-key K   credentials for the service (or WSM_TOKEN / WSM_API_KEY)
      --publisher P             the publisher (default for a service: the one the caller owns)
      --registry DIR            copy into a directory registry as DIR/P/<name>/<version>.tgz instead
      --dry-run                 check only, store nothing
  journal accept-loss           when the service refuses to start because its journal is damaged (a whole
                                record that fails its checksum, or valid records after the damage): cut
                                the journal at the damage, keeping the cut bytes beside it, and print
                                what was dropped (stop the service first)
${TRANSFER_USAGE}  help                          this text
`;

function fail(message: string, code = 2): never {
  process.stderr.write(`wsm: ${message}\n`);
  process.exit(code);
}

/** The running service this process's settings describe. */
function serviceUrl(): string {
  const cfg = config();
  return `http://${cfg.HOST.includes(':') ? `[${cfg.HOST}]` : cfg.HOST}:${cfg.PORT}`;
}

function config(): Config {
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) fail(err.message, 1);
    throw err;
  }
}

async function serve(): Promise<void> {
  const cfg = config();
  const logger = createLogger(cfg.WSM_LOG_LEVEL);
  let server;
  try {
    // The store first: its thread recovers the data (seconds for a large
    // store) while this thread loads the service's modules.
    const { openStore } = await import('./store/open.js');
    const opening = openStore(cfg, logger);
    opening.catch(() => {}); // awaited by startServer; no unhandled rejection meanwhile
    const { startServer } = await import('./server.js');
    server = await startServer(cfg, logger, { opening });
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    logger.fatal({ err }, 'start failed');
    fail(`could not start: ${message}`, 1);
  }
  logger.info({ url: server.url, ...(server.opsUrl ? { opsUrl: server.opsUrl } : {}), dataDir: cfg.dataDir }, 'ready');
  if (server.bootstrap.demoToken) {
    process.stdout.write(`\nFirst start: created workspace "demo" owned by "admin".\n` +
      `Bearer token for admin (system administrator):\n\n${server.bootstrap.demoToken}\n\n` +
      `Try:\n  curl -H "Authorization: Bearer <token>" ${server.url}/api/v1/workspaces/demo\n` +
      (server.bootstrap.examples?.length
        ? `Install an example package (${server.bootstrap.examples.join(', ')} are in the registry;\n` +
          `incident-response depends on project-tracking, which is installed first):\n` +
          `  curl -X POST -H "Authorization: Bearer <token>" -H "Content-Type: application/json" -d '{}' ` +
          `${server.url}/api/v1/packages/demo/registry/${server.bootstrap.examples.find((e) => e.endsWith('/incident-response')) ?? server.bootstrap.examples[0]}/install\n`
        : '') +
      `Then run the demo's slash command /roles-of-agent over what it installed:\n` +
      `  curl -X POST -H "Authorization: Bearer <token>" -H "Accept: text/turtle" ${server.url}/api/v1/commands/demo/alias/roles-of-agent/execute\n` +
      `API docs: ${server.url}/docs\n` +
      `Sign in as admin (the console, the command-line client): set a password first, in another terminal:\n` +
      `  npm run wsm -- passwd admin --system-admin\n\n`);
  }
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping');
    server.close().then(() => process.exit(0), (err) => { logger.error({ err }, 'stop failed'); process.exit(1); });
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

async function token(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      'system-admin': { type: 'boolean' },
      email: { type: 'string' },
      'first-name': { type: 'string' },
      'last-name': { type: 'string' },
      ttl: { type: 'string' },
    },
  });
  const username = positionals[0];
  if (!username || positionals.length > 1) fail('usage: wsm token <username> [--system-admin] [--email E] [--first-name F] [--last-name L] [--ttl S]');
  const cfg = config();
  const ttl = values.ttl === undefined ? cfg.WSM_TOKEN_TTL : Number(values.ttl);
  if (!Number.isSafeInteger(ttl) || ttl <= 0) fail('--ttl must be a positive number of seconds');
  const { mintToken, adoptSharedIssuerKey } = await import('./auth/tokens.js');
  if (cfg.WSM_STORE === 'cluster') {
    // The key every instance of the cluster signs and verifies with (docs/cluster.md).
    const { clusterPool, ClusterStartError } = await import('./store/cluster/open.js');
    const { PgLog } = await import('./store/cluster/log.js');
    const log = new PgLog(clusterPool(cfg.WSM_POSTGRES_URL!));
    try {
      await log.ensureSchema();
      await adoptSharedIssuerKey(cfg.dataDir, (proposed) => log.shared('issuer-key', proposed));
    } catch (err) {
      fail(new ClusterStartError(cfg.WSM_POSTGRES_URL!, err).message, 1);
    } finally {
      await log.pool.end();
    }
  }
  const jwt = await mintToken(cfg.dataDir, username, {
    systemAdmin: values['system-admin'] ?? false,
    email: values.email,
    firstName: values['first-name'],
    lastName: values['last-name'],
    ttlSeconds: ttl,
  });
  process.stdout.write(`${jwt}\n`);
}

async function passwd(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { 'system-admin': { type: 'boolean' }, url: { type: 'string' } } });
  const username = positionals[0];
  if (!username || positionals.length > 1) fail('usage: wsm passwd <username> [--system-admin] [--url URL] (the password is read from standard input)');
  const cfg = config();
  if (cfg.WSM_OIDC_ISSUER) fail(`people sign in at ${cfg.WSM_OIDC_ISSUER} (WSM_OIDC_ISSUER): this service keeps no passwords then`, 1);
  const password = await readPassword();
  if (!password) fail('no password given on standard input', 1);
  const root = (values.url ?? `http://${cfg.HOST.includes(':') ? `[${cfg.HOST}]` : cfg.HOST}:${cfg.PORT}`).replace(/\/+$/, '');
  const { mintToken } = await import('./auth/tokens.js');
  // A short-lived token of the data directory's issuer: whoever may read the data directory may set passwords.
  const jwt = await mintToken(cfg.dataDir, username, { systemAdmin: true, ttlSeconds: 120 });
  let res: Response;
  try {
    res = await fetch(`${root}/api/v1/users/${encodeURIComponent(username)}/password`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${jwt}`, 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ password, ...(values['system-admin'] ? { systemAdmin: true } : {}) }),
      signal: AbortSignal.timeout(60_000),
    });
  } catch (err) {
    fail(`cannot reach ${root} (${err instanceof Error ? err.message : String(err)}); the password is set through the running service: start it first`, 1);
  }
  const body = await res.json().catch(() => null) as { data?: { systemAdmin: boolean }; error?: { message?: string } } | null;
  if (res.status !== 200) fail(body?.error?.message ?? `the service answered ${res.status}`, 1);
  process.stdout.write(`Password set for ${username}${body?.data?.systemAdmin ? ' (system administrator)' : ''}; sign in at ${root}/console/\n`);
}

/** The password from standard input: typed at a prompt without echo on a terminal, else the first line of what is piped in. */
async function readPassword(): Promise<string> {
  const stdin = process.stdin;
  if (!stdin.isTTY) {
    const chunks: Buffer[] = [];
    for await (const chunk of stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8').split(/\r?\n/)[0] ?? '';
  }
  process.stderr.write('Password: ');
  stdin.setRawMode(true);
  stdin.setEncoding('utf8');
  let typed = '';
  return new Promise((resolve) => {
    const onData = (text: string) => {
      for (const c of text) {
        if (c === '\r' || c === '\n' || c === '\u0004') {
          stdin.setRawMode(false);
          stdin.pause();
          stdin.off('data', onData);
          process.stderr.write('\n');
          resolve(typed);
          return;
        }
        if (c === '\u0003') { stdin.setRawMode(false); process.stderr.write('\n'); process.exit(130); }
        typed = c === '\u007f' ? typed.slice(0, -1) : typed + c;
      }
    };
    stdin.on('data', onData);
    stdin.resume();
  });
}

const PUBLISH_USAGE = 'usage: wsm publish <folder|file.tgz> [--publisher P] [--registry DIR | --url URL] [--token T | --api-key K] [--dry-run]';

async function publish(args: string[]): Promise<void> {
  const { SLUG } = await import('./packages/manifest.js');
  const { readPackageArchive } = await import('./packages/archive.js');
  const { publishBytes } = await import('./packages/registry.js');
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      publisher: { type: 'string' }, registry: { type: 'string' }, url: { type: 'string' },
      token: { type: 'string' }, 'api-key': { type: 'string' }, 'dry-run': { type: 'boolean' },
    },
  });
  const source = positionals[0];
  if (!source || positionals.length > 1) fail(PUBLISH_USAGE);
  if (values.registry && values.url) fail('give either --registry DIR (a directory registry) or --url URL (a running service), not both');
  // Where to: --registry, --url, else WSM_REGISTRY (its own service for `self`, another service for a URL, else a directory).
  let target = values.url ?? values.registry;
  if (!target) {
    const cfg = config();
    target = cfg.WSM_REGISTRY === 'self' ? `http://${cfg.HOST.includes(':') ? `[${cfg.HOST}]` : cfg.HOST}:${cfg.PORT}` : cfg.WSM_REGISTRY;
  }
  try {
    const overHttp = /^https?:\/\//i.test(target);
    if (!overHttp) {
      if (!values.publisher) fail(`${PUBLISH_USAGE}\n(--publisher is required for a directory registry)`);
      if (!SLUG.test(values.publisher)) fail(`Publisher "${values.publisher}" must be a lower-case slug (letters a-z, digits, single hyphens between them)`, 1);
    }
    const bytes = await readPackageSource(source);
    if (overHttp) {
      if (values.registry) fail(`--registry takes a directory; "${target}" is a URL, give it with --url`);
      await publishOverHttp(target, bytes, { publisher: values.publisher, token: values.token ?? process.env.WSM_TOKEN, apiKey: values['api-key'] ?? process.env.WSM_API_KEY, dryRun: values['dry-run'] ?? false });
      return;
    }
    if (values['dry-run']) {
      const { manifest } = await readPackageArchive(bytes);
      process.stdout.write(`Dry run: ${manifest.name} ${manifest.version} is a valid archive; nothing was written\n`);
      return;
    }
    const out = await publishBytes(target, bytes, values.publisher!);
    process.stdout.write(`Published ${out.publisher}/${out.name} ${out.version} to ${out.path}\n`);
  } catch (err) {
    if (err instanceof AppError) fail(err.message, 1);
    throw err;
  }
}

async function journal(args: string[]): Promise<void> {
  const { positionals } = parseArgs({ args, allowPositionals: true, options: {} });
  if (positionals.length !== 1 || positionals[0] !== 'accept-loss') fail('usage: wsm journal accept-loss');
  const cfg = config();
  const { openDurableStore } = await import('./store/embedded/durable.js');
  const dropped: string[] = [];
  let store;
  try {
    store = await openDurableStore(cfg.dataDir, {
      acceptJournalLoss: true,
      onWarning: (message) => {
        dropped.push(message);
        process.stdout.write(`${message}\n`);
      },
    });
  } catch (err) {
    fail(`could not open ${cfg.dataDir}: ${err instanceof Error ? err.message : String(err)}`, 1);
  }
  const info = store.replayInfo;
  await store.close();
  if (info.droppedBytes === 0) {
    process.stdout.write(`Nothing to accept: the journal of ${cfg.dataDir} has no damage to accept (last record ${info.lastSeq}).\n`);
  } else {
    process.stdout.write(`Dropped ${info.droppedBytes} bytes; the store now ends at record ${info.lastSeq}. The service can start again.\n`);
  }
}

/** The archive bytes of a package folder (packed) or a `.tgz` file. */
async function readPackageSource(source: string): Promise<Buffer> {
  const { DEFAULT_ARCHIVE_LIMITS } = await import('./packages/archive.js');
  const { buildPackageArchive } = await import('./packages/build-archive.js');
  const info = await stat(source).catch(() => null);
  if (!info) throw notFound(`Cannot read "${source}": no such file or folder`);
  if (info.isDirectory()) return buildPackageArchive(source);
  if (info.size > DEFAULT_ARCHIVE_LIMITS.maxArchiveBytes) {
    throw badRequest(`"${source}" is ${info.size} bytes, over the archive limit of ${DEFAULT_ARCHIVE_LIMITS.maxArchiveBytes} bytes`);
  }
  return readFile(source);
}

/** Publishes to a running service's registry API with a bearer token or an API key. */
async function publishOverHttp(base: string, bytes: Buffer, options: { publisher?: string | undefined; token?: string | undefined; apiKey?: string | undefined; dryRun: boolean }): Promise<void> {
  const { readPackageArchive } = await import('./packages/archive.js');
  if (!options.token && !options.apiKey) fail('publishing to a service needs --token T (or WSM_TOKEN) or --api-key K (or WSM_API_KEY)');
  const { manifest } = await readPackageArchive(bytes);
  const root = base.replace(/\/+$/, '');
  const headers: Record<string, string> = options.apiKey ? { 'X-Api-Key': options.apiKey } : { Authorization: `Bearer ${options.token}` };
  const call = async (url: string, init: RequestInit = {}) => {
    let res: Response;
    try {
      res = await fetch(url, { ...init, headers: { ...headers, Accept: 'application/json' }, signal: AbortSignal.timeout(120_000) });
    } catch (err) {
      fail(`cannot reach ${root} (${err instanceof Error ? err.message : String(err)}); is the service running?`, 1);
    }
    const body = await res.json().catch(() => null) as { success?: boolean; data?: unknown; error?: { message?: string; details?: { report?: { violations?: Array<{ message: string; path: string | null }> } } } } | null;
    return { status: res.status, body };
  };
  let publisher = options.publisher;
  if (!publisher) {
    const me = await call(`${root}/api/v1/registry/publishers/me`);
    if (me.status !== 200) fail(`--publisher is needed: ${me.body?.error?.message ?? `the service answered ${me.status}`}`, 1);
    publisher = (me.body!.data as { slug: string }).slug;
  }
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(bytes)], { type: 'application/gzip' }), `${manifest.name}-${manifest.version}.tgz`);
  const url = `${root}/api/v1/registry/publishers/${encodeURIComponent(publisher)}/packages/${encodeURIComponent(manifest.name)}/versions${options.dryRun ? '?dryRun=true' : ''}`;
  const res = await call(url, { method: 'POST', body: form });
  const what = `${publisher}/${manifest.name} ${manifest.version}`;
  if (res.status === 201) {
    process.stdout.write(`Published ${what} to ${root} (${(res.body!.data as { checksum: string }).checksum})\n`);
  } else if (res.status === 200) {
    process.stdout.write(options.dryRun ? `Dry run: ${what} passes every check; nothing was stored\n` : `${what} is already published with these bytes; nothing changed\n`);
  } else {
    const violations = res.body?.error?.details?.report?.violations ?? [];
    const lines = violations.slice(0, 20).map((v) => `  - ${v.path ? `${v.path}: ` : ''}${v.message}`);
    fail([`${res.body?.error?.message ?? `the service answered ${res.status}`}`, ...lines].join('\n'), 1);
  }
}

export async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'serve': return await serve();
      case 'token': return await token(rest);
      case 'passwd': return await passwd(rest);
      case 'publish': return await publish(rest);
      case 'journal': return await journal(rest);
      case 'backup': return await backupCommand(rest, config().dataDir, fail);
      case 'restore': return await restoreCommand(rest, config().dataDir, fail);
      case 'export': return await exportCommand(rest, serviceUrl(), fail);
      case 'import': return await importCommand(rest, serviceUrl(), fail);
      case undefined: case 'help': case '--help': case '-h':
        process.stdout.write(USAGE);
        return;
      default:
        fail(`unknown command "${command}"\n\n${USAGE}`);
    }
  } catch (err) {
    if (err instanceof TypeError && (err as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS')) fail(err.message);
    throw err;
  }
}

await main(process.argv.slice(2));
