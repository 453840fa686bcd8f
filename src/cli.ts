import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type Config } from './config.js';
import { createLogger } from './logger.js';
import { mintToken } from './auth/tokens.js';
import { startServer } from './server.js';
import { AppError } from './errors.js';
import { publishToDirectory } from './packages/registry.js';

/**
 * `wsm <command>`: serve | token | help. Run from a checkout with
 * `npm run wsm -- <command>`; `npm start` is `wsm serve`.
 */
const USAGE = `Usage: wsm <command> [options]

Commands:
  serve                         start the service (settings from the environment, see README)
  token <username> [options]    print a bearer token of the embedded issuer
      --system-admin            the token makes its holder a system administrator
      --email E --first-name F --last-name L
      --ttl SECONDS             lifetime (default WSM_TOKEN_TTL, 12 hours)
  publish <file.tgz> --publisher P [--registry DIR]
                                check a package archive and copy it into a directory registry
                                as DIR/P/<name>/<version>.tgz (DIR defaults to WSM_REGISTRY)
  journal accept-loss           when the service refuses to start because its journal is damaged with
                                valid records after the damage: cut the journal at the damage, keeping
                                the cut bytes beside it, and print what was dropped (stop the service first)
  help                          this text
`;

function fail(message: string, code = 2): never {
  process.stderr.write(`wsm: ${message}\n`);
  process.exit(code);
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
    server = await startServer(cfg, logger);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    logger.fatal({ err }, 'start failed');
    fail(`could not start: ${message}`, 1);
  }
  logger.info({ url: server.url, dataDir: cfg.dataDir }, 'ready');
  if (server.bootstrap.demoToken) {
    process.stdout.write(`\nFirst start: created workspace "demo" owned by "admin".\n` +
      `Bearer token for admin (system administrator):\n\n${server.bootstrap.demoToken}\n\n` +
      `Try:\n  curl -H "Authorization: Bearer <token>" ${server.url}/api/v1/workspaces/demo\n` +
      (server.bootstrap.examples?.length
        ? `Install an example package (${server.bootstrap.examples.join(', ')} are in the registry):\n` +
          `  curl -X POST -H "Authorization: Bearer <token>" -H "Content-Type: application/json" -d '{}' ` +
          `${server.url}/api/v1/packages/demo/registry/${server.bootstrap.examples.find((e) => e.endsWith('/project-tracking')) ?? server.bootstrap.examples[0]}/install\n`
        : '') +
      `API docs: ${server.url}/docs\n\n`);
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
  const jwt = await mintToken(cfg.dataDir, username, {
    systemAdmin: values['system-admin'] ?? false,
    email: values.email,
    firstName: values['first-name'],
    lastName: values['last-name'],
    ttlSeconds: ttl,
  });
  process.stdout.write(`${jwt}\n`);
}

async function publish(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { publisher: { type: 'string' }, registry: { type: 'string' } },
  });
  const file = positionals[0];
  if (!file || positionals.length > 1 || !values.publisher) fail('usage: wsm publish <file.tgz> --publisher P [--registry DIR]');
  const registry = values.registry ?? config().WSM_REGISTRY;
  if (/^https?:\/\//i.test(registry)) {
    fail(`the registry "${registry}" is an HTTP registry; wsm publish copies into a directory registry, give one with --registry DIR`);
  }
  try {
    const out = await publishToDirectory(registry, file, values.publisher);
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
  const { openDurableStore } = await import('./store/durable.js');
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
    process.stdout.write(`Nothing to accept: the journal of ${cfg.dataDir} has no damage followed by valid records (last record ${info.lastSeq}).\n`);
  } else {
    process.stdout.write(`Dropped ${info.droppedBytes} bytes; the store now ends at record ${info.lastSeq}. The service can start again.\n`);
  }
}

export async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'serve': return await serve();
      case 'token': return await token(rest);
      case 'publish': return await publish(rest);
      case 'journal': return await journal(rest);
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
