/**
 * `npm run virtuoso [-- start|stop|status|env]`: a local Virtuoso 7 (Debian's
 * `virtuoso-opensource-7-bin`) for `WSM_STORE=sparql`, installed when missing
 * and started under the data directory with a safe configuration:
 *
 * - serializable isolation (`DefaultIsolation = 8`): the default loses racing updates;
 * - result limits raised far above what the service reads (answers are cut silently at the limit);
 * - listening on loopback only, on free ports;
 * - the `dba` password replaced by a random one; the service's own user `wsm`
 *   (random password) reaches the engine only through `/wsm/sparql`, a
 *   Basic-auth endpoint; anonymous SPARQL sees no graph (default graph
 *   permissions of `nobody` are 0);
 * - the procedures the `virtuoso` dialect needs (all-or-nothing multi-op
 *   writes, see src/store/remote/virtuoso.sql).
 *
 * The credentials live in `<data dir>/virtuoso/credentials.json` (mode 0600).
 * It prints the settings that start the service on it.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const dataDir = path.resolve(process.env.WSM_DATA_DIR ?? './data');
const dir = path.join(dataDir, 'virtuoso');
const credentialsFile = path.join(dir, 'credentials.json');
const setupSql = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'src', 'store', 'remote', 'virtuoso.sql');

interface Credentials { sqlPort: number; httpPort: number; dbaPassword: string; user: string; password: string }

function say(line: string): void { process.stderr.write(`${line}\n`); }

function has(command: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

function ensureInstalled(): void {
  if (has('virtuoso-t') && has('isql-vt')) return;
  say('Virtuoso is not installed: installing virtuoso-opensource-7-bin from the Debian packages');
  const apt = (args: string[]) => spawnSync('apt-get', args, { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } }).status === 0;
  if (!apt(['install', '-y', '-qq', 'virtuoso-opensource-7-bin'])) {
    if (!apt(['update', '-qq']) || !apt(['install', '-y', '-qq', 'virtuoso-opensource-7-bin'])) {
      throw new Error('Could not install virtuoso-opensource-7-bin with apt-get (run as root, or install it yourself)');
    }
  }
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

function ini(c: Credentials): string {
  const f = (name: string) => path.join(dir, name);
  return `[Database]
DatabaseFile = ${f('virtuoso.db')}
ErrorLogFile = ${f('virtuoso.log')}
LockFile = ${f('virtuoso.lck')}
TransactionFile = ${f('virtuoso.trx')}
xa_persistent_file = ${f('virtuoso.pxa')}
ErrorLogLevel = 7
FileExtend = 200
MaxCheckpointRemap = 2000
Striping = 0
TempStorage = TempDatabase

[TempDatabase]
DatabaseFile = ${f('virtuoso-temp.db')}
TransactionFile = ${f('virtuoso-temp.trx')}
MaxCheckpointRemap = 2000
Striping = 0

[Parameters]
ServerPort = 127.0.0.1:${c.sqlPort}
DisableUnixSocket = 1
MaxClientConnections = 32
CheckpointInterval = 60
CaseMode = 2
AllowOSCalls = 0
DirsAllowed = ${dir}
NumberOfBuffers = 170000
MaxDirtyBuffers = 130000
DefaultIsolation = 8
MaxQueryMem = 1G
ThreadsPerQuery = 2
AsyncQueueMaxThreads = 4

[HTTPServer]
ServerPort = 127.0.0.1:${c.httpPort}
ServerRoot = ${dir}
MaxClientConnections = 32
EnabledDavVSP = 0
HTTPProxyEnabled = 0
MaxKeepAlives = 32
KeepAliveTimeout = 10
HTTPThreadSize = 280000
HttpPrintWarningsInOutput = 0
Charset = UTF-8
EnabledGzipContent = 0

[Client]
SQL_QUERY_TIMEOUT = 0
SQL_TXN_TIMEOUT = 0

[SPARQL]
ResultSetMaxRows = 10000000
MaxSortedTopRows = 10000000
MaxQueryCostEstimationTime = 0
MaxQueryExecutionTime = 600
`;
}

/** Runs SQL as dba; isql-vt exits 0 on SQL errors, so its output is checked too. */
function isql(c: Credentials, password: string, sql: string): string {
  const run = spawnSync('isql-vt', [`127.0.0.1:${c.sqlPort}`, 'dba', password], { input: `${sql}\n`, encoding: 'utf8' });
  const out = `${run.stdout ?? ''}${run.stderr ?? ''}`;
  // U0013: a role granted at an earlier start (GRANT has no IF NOT EXISTS).
  const errors = out.split('\n').filter((line) => line.startsWith('*** Error') && !line.includes('U0013'));
  if (run.status !== 0 || errors.length > 0) throw new Error(`Virtuoso refused the set-up: ${out.trim()}`);
  return out;
}

async function answers(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    return res.status < 500;
  } catch {
    return false;
  }
}

const endpoint = (c: Credentials) => `http://127.0.0.1:${c.httpPort}/wsm/sparql`;

function settings(c: Credentials): string {
  return [
    'WSM_STORE=sparql',
    `WSM_SPARQL_QUERY_URL=${endpoint(c)}`,
    `WSM_SPARQL_UPDATE_URL=${endpoint(c)}`,
    `WSM_SPARQL_USER=${c.user}`,
    `WSM_SPARQL_PASSWORD=${c.password}`,
    'WSM_SPARQL_DIALECT=virtuoso',
  ].join('\n');
}

async function start(): Promise<Credentials> {
  ensureInstalled();
  mkdirSync(dir, { recursive: true });
  const fresh = !existsSync(credentialsFile);
  const c: Credentials = fresh
    ? { sqlPort: await freePort(), httpPort: await freePort(), dbaPassword: `w${randomBytes(16).toString('hex')}`, user: 'wsm', password: `w${randomBytes(16).toString('hex')}` }
    : JSON.parse(readFileSync(credentialsFile, 'utf8')) as Credentials;
  if (await answers(`http://127.0.0.1:${c.httpPort}/sparql`)) {
    say(`Virtuoso already runs on 127.0.0.1:${c.httpPort}`);
    // The set-up is idempotent: a running engine gets the service's current procedures too.
    isql(c, c.dbaPassword, readFileSync(setupSql, 'utf8').replaceAll('{{USER}}', c.user));
    return c;
  }
  writeFileSync(path.join(dir, 'virtuoso.ini'), ini(c));
  say(`Starting Virtuoso in ${dir} (SQL 127.0.0.1:${c.sqlPort}, HTTP 127.0.0.1:${c.httpPort})`);
  const child = spawn('virtuoso-t', ['+configfile', path.join(dir, 'virtuoso.ini'), '+wait'], { cwd: dir, stdio: 'ignore' });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`virtuoso-t exited with ${code}; see ${path.join(dir, 'virtuoso.log')}`);
  await answering(c, 'after its start');
  if (fresh) {
    // Secure the new database before anything else can use it.
    isql(c, 'dba', `SET PASSWORD dba ${c.dbaPassword};`);
    writeFileSync(credentialsFile, `${JSON.stringify(c, null, 2)}\n`, { mode: 0o600 });
    isql(c, c.dbaPassword, `DB.DBA.USER_CREATE('${c.user}', '${c.password}');`);
  }
  // Idempotent set-up, re-applied at every start so an upgrade of the service brings its procedures.
  isql(c, c.dbaPassword, readFileSync(setupSql, 'utf8').replaceAll('{{USER}}', c.user));
  // Into the database file now: Virtuoso 7.2 cannot roll its log forward over a password change or a new user
  // (set_user_struct fails), so after a crash before the next checkpoint the engine came back with dba's
  // default password and without the service's user.
  isql(c, c.dbaPassword, 'checkpoint;');
  // The service reaches the engine only over HTTP: a start that leaves it unanswered fails here, not in the service.
  await answering(c, 'after its set-up');
  return c;
}

/** The last lines of the engine's log, without its routine checkpoint lines. */
function logTail(lines = 30): string {
  try {
    return readFileSync(path.join(dir, 'virtuoso.log'), 'utf8').split('\n')
      .filter((line) => !/Checkpoint (started|finished)|Roll forward|\* Monitor:/.test(line)).slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Waits up to a minute for the engine's HTTP endpoint; throws with the log's tail when it does not answer. */
async function answering(c: Credentials, when: string): Promise<void> {
  const url = `http://127.0.0.1:${c.httpPort}/sparql`;
  for (let i = 0; i < 120; i++) {
    if (await answers(url)) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`Virtuoso does not answer on 127.0.0.1:${c.httpPort} ${when}; the end of its log:\n${logTail()}`);
}

function stop(): void {
  if (!existsSync(credentialsFile)) { say('No Virtuoso set up under this data directory'); return; }
  const c = JSON.parse(readFileSync(credentialsFile, 'utf8')) as Credentials;
  try {
    isql(c, c.dbaPassword, 'shutdown();');
  } catch {
    // The connection drops as the server goes down.
  }
  say('Virtuoso stopped');
}

const command = process.argv[2] ?? 'start';
try {
  if (command === 'start') {
    const c = await start();
    say('Start the service on it with:');
    process.stdout.write(`${settings(c)}\n`);
  } else if (command === 'env') {
    if (!existsSync(credentialsFile)) throw new Error('Not set up yet: run `npm run virtuoso` first');
    process.stdout.write(`${settings(JSON.parse(readFileSync(credentialsFile, 'utf8')) as Credentials)}\n`);
  } else if (command === 'stop') {
    stop();
  } else if (command === 'status') {
    if (!existsSync(credentialsFile)) throw new Error('No Virtuoso set up under this data directory');
    const c = JSON.parse(readFileSync(credentialsFile, 'utf8')) as Credentials;
    if (!(await answers(`http://127.0.0.1:${c.httpPort}/sparql`))) {
      throw new Error(`Virtuoso does not answer on 127.0.0.1:${c.httpPort}; the end of its log:\n${logTail()}`);
    }
    say(`Virtuoso runs on 127.0.0.1:${c.httpPort}`);
  } else {
    throw new Error(`Unknown command "${command}": use start, stop, status or env`);
  }
} catch (err) {
  say(err instanceof Error ? err.message : String(err));
  process.exitCode = 1;
}
