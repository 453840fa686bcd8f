/**
 * `npm run postgres [-- start|stop|status|env]`: a local PostgreSQL (Debian's
 * `postgresql` packages, installed with apt-get when missing) for
 * `WSM_STORE=cluster`, the cluster's shared journal (docs/cluster.md).
 *
 * - a database cluster initialised under `<data dir>/postgres/pgdata`, owned
 *   and run by the `postgres` system user when started as root (PostgreSQL
 *   refuses to run as root), by the current user otherwise;
 * - listening on loopback only, on a free port; its Unix socket in
 *   `<data dir>/postgres`, reachable only by its owner;
 * - connections over TCP need a password (scram-sha-256); the service's
 *   role `wsm` (random password) owns the database `wsm` and may create
 *   databases (the test suite gives each test server its own).
 *
 * The credentials live in `<data dir>/postgres/credentials.json` (mode
 * 0600). It prints the settings that start the service on it.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

const dataDir = path.resolve(process.env.WSM_DATA_DIR ?? './data');
const dir = path.join(dataDir, 'postgres');
const pgdata = path.join(dir, 'pgdata');
const credentialsFile = path.join(dir, 'credentials.json');
const logFile = path.join(dir, 'postgres.log');

interface Credentials { port: number; user: string; password: string; database: string }

function say(line: string): void { process.stderr.write(`${line}\n`); }

const asRoot = process.getuid?.() === 0;

/** The directory of PostgreSQL's server programs (the newest installed version), or undefined. */
function binDir(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).filter((v) => existsSync(path.join(root, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : path.join(root, versions[0], 'bin');
}

function ensureInstalled(): string {
  const found = binDir();
  if (found) return found;
  say('PostgreSQL is not installed: installing postgresql from the Debian packages');
  const apt = (args: string[]) => spawnSync('apt-get', args, { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } }).status === 0;
  if (!apt(['install', '-y', '-qq', 'postgresql']) && (!apt(['update', '-qq']) || !apt(['install', '-y', '-qq', 'postgresql']))) {
    throw new Error('Could not install postgresql with apt-get (run as root, or install it yourself)');
  }
  const installed = binDir();
  if (!installed) throw new Error('postgresql was installed but no initdb was found under /usr/lib/postgresql');
  return installed;
}

/** Runs one of PostgreSQL's programs as the user that owns the cluster; throws with its output when it fails. */
function run(bin: string, program: string, args: string[], input?: string): SpawnSyncReturns<string> {
  const command = path.join(bin, program);
  const result = asRoot
    ? spawnSync('runuser', ['-u', 'postgres', '--', command, ...args], { input, encoding: 'utf8', cwd: dir })
    : spawnSync(command, args, { input, encoding: 'utf8', cwd: dir });
  if (result.status !== 0) throw new Error(`${program} failed: ${`${result.stdout ?? ''}${result.stderr ?? ''}`.trim() || result.error?.message}`);
  return result;
}

/** SQL as the cluster's superuser over the Unix socket (peer authentication); psql stops at the first error. */
function psql(bin: string, c: Credentials, sql: string, database = 'postgres'): string {
  return run(bin, 'psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', dir, '-p', String(c.port), '-U', 'postgres', '-d', database, '-At'], sql).stdout;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * The `postgres` user must reach its directory: every directory above it
 * gets the traverse bit for others where it lacks it (a `mktemp -d`
 * directory is 0700), never read or write.
 */
function reachableByPostgres(): void {
  if (!asRoot) return;
  const { uid, gid } = userIds('postgres');
  chownSync(dir, uid, gid);
  chmodSync(dir, 0o700);
  for (let d = path.dirname(dir); ; d = path.dirname(d)) {
    const mode = statSync(d).mode;
    if ((mode & 0o001) === 0) chmodSync(d, (mode & 0o7777) | 0o001);
    if (d === path.dirname(d)) break;
  }
}

function userIds(name: string): { uid: number; gid: number } {
  const id = (flag: string) => Number(spawnSync('id', [flag, name], { encoding: 'utf8' }).stdout.trim());
  const uid = id('-u');
  if (!Number.isInteger(uid)) throw new Error(`no system user "${name}": install PostgreSQL from the Debian packages (it creates it)`);
  return { uid, gid: id('-g') };
}

function isReady(bin: string, c: Credentials): boolean {
  return spawnSync(path.join(bin, 'pg_isready'), ['-q', '-h', '127.0.0.1', '-p', String(c.port)]).status === 0;
}

function url(c: Credentials): string {
  return `postgres://${c.user}:${encodeURIComponent(c.password)}@127.0.0.1:${c.port}/${c.database}`;
}

function settings(c: Credentials): string {
  return ['WSM_STORE=cluster', `WSM_POSTGRES_URL=${url(c)}`].join('\n');
}

function readCredentials(): Credentials {
  if (!existsSync(credentialsFile)) throw new Error('No PostgreSQL set up under this data directory: run `npm run postgres` first');
  return JSON.parse(readFileSync(credentialsFile, 'utf8')) as Credentials;
}

function logTail(lines = 30): string {
  try {
    return readFileSync(logFile, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** The service's role and database; idempotent, applied at every start. */
function setUp(bin: string, c: Credentials): void {
  const password = c.password.replaceAll("'", "''");
  psql(bin, c, `
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${c.user}') THEN
    CREATE ROLE ${c.user} LOGIN CREATEDB PASSWORD '${password}';
  ELSE
    ALTER ROLE ${c.user} LOGIN CREATEDB PASSWORD '${password}';
  END IF;
END $$;
SELECT 'CREATE DATABASE ${c.database} OWNER ${c.user}' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '${c.database}')\\gexec
`);
}

async function start(): Promise<Credentials> {
  const bin = ensureInstalled();
  mkdirSync(dir, { recursive: true });
  const fresh = !existsSync(credentialsFile);
  const c: Credentials = fresh
    ? { port: await freePort(), user: 'wsm', password: `w${randomBytes(16).toString('hex')}`, database: 'wsm' }
    : readCredentials();
  if (fresh) writeFileSync(credentialsFile, `${JSON.stringify(c, null, 2)}\n`, { mode: 0o600 });
  reachableByPostgres();
  if (isReady(bin, c)) {
    say(`PostgreSQL already runs on 127.0.0.1:${c.port}`);
    setUp(bin, c);
    return c;
  }
  if (!existsSync(path.join(pgdata, 'PG_VERSION'))) {
    say(`Initialising a PostgreSQL cluster in ${pgdata}`);
    run(bin, 'initdb', ['-D', pgdata, '-U', 'postgres', '-E', 'UTF8', '--locale=C', '--auth-local=peer', '--auth-host=scram-sha-256']);
  }
  say(`Starting PostgreSQL in ${pgdata} on 127.0.0.1:${c.port}`);
  const options = [`-p ${c.port}`, "-c listen_addresses=127.0.0.1", `-c unix_socket_directories=${dir}`, '-c max_connections=300'].join(' ');
  try {
    run(bin, 'pg_ctl', ['-D', pgdata, '-l', logFile, '-o', options, '-w', '-t', '60', 'start']);
  } catch (err) {
    throw new Error(`${(err as Error).message}\nThe end of its log:\n${logTail()}`);
  }
  setUp(bin, c);
  return c;
}

function stop(): void {
  if (!existsSync(credentialsFile)) { say('No PostgreSQL set up under this data directory'); return; }
  const bin = ensureInstalled();
  if (!existsSync(path.join(pgdata, 'postmaster.pid'))) { say('PostgreSQL is not running'); return; }
  run(bin, 'pg_ctl', ['-D', pgdata, '-m', 'fast', '-w', 'stop']);
  say('PostgreSQL stopped');
}

const command = process.argv[2] ?? 'start';
try {
  if (command === 'start') {
    const c = await start();
    say('Start the service on it with:');
    process.stdout.write(`${settings(c)}\n`);
  } else if (command === 'env') {
    process.stdout.write(`${settings(readCredentials())}\n`);
  } else if (command === 'stop') {
    stop();
  } else if (command === 'status') {
    const c = readCredentials();
    if (!isReady(ensureInstalled(), c)) throw new Error(`PostgreSQL does not answer on 127.0.0.1:${c.port}; the end of its log:\n${logTail()}`);
    say(`PostgreSQL runs on 127.0.0.1:${c.port}`);
  } else {
    throw new Error(`Unknown command "${command}": use start, stop, status or env`);
  }
} catch (err) {
  say(err instanceof Error ? err.message : String(err));
  process.exitCode = 1;
}
