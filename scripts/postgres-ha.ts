/**
 * `npm run postgres-ha [-- start|stop|status|env|backup|restore --to-time T|kill-primary|wait-sync]`:
 * PostgreSQL that fails over without losing an acknowledged write, for
 * `WSM_STORE=cluster` (docs/cluster.md, "PostgreSQL with failover").
 *
 * Under `<data dir>/postgres-ha`, on free loopback ports, all run by the
 * `postgres` system user when started as root:
 * - one etcd (Debian's `etcd-server`): Patroni's record of who leads;
 * - two Patroni nodes (Debian's `patroni`), each a PostgreSQL: a primary
 *   and a synchronous standby (`synchronous_mode`: a commit is
 *   acknowledged once the standby flushed it, and only that standby may be
 *   promoted);
 * - HAProxy (Debian's `haproxy`) in front: it sends connections to the
 *   node whose Patroni answers `GET /primary` with 200, and ends those to a
 *   node that stops answering so. The service's WSM_POSTGRES_URL names it;
 * - pgBackRest (Debian's `pgbackrest`): stanza `wsm`, WAL archived from
 *   whichever node is primary, its repository in `pgbackrest/repo`.
 *
 * Missing packages are installed with apt-get. Passwords and ports live in
 * `state.json` (mode 0600). `backup` takes a full backup; `restore
 * --to-time T` restores the newest backup before T and the WAL up to T into
 * a new directory and starts it alone (not part of the failover pair) on a
 * free port, printing its settings; `kill-primary` kills the primary
 * node (its Patroni and its postmaster, -9), as a machine that dies
 * (`--postmaster-only`: its postmaster alone); `wait-sync [seconds]` waits
 * for a primary with a synchronous standby again.
 */
import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

const dataDir = path.resolve(process.env.WSM_DATA_DIR ?? './data');
const dir = path.join(dataDir, 'postgres-ha');
const stateFile = path.join(dir, 'state.json');
const bkDir = path.join(dir, 'pgbackrest');
const bkConf = path.join(bkDir, 'pgbackrest.conf');
const STANZA = 'wsm';
const SCOPE = 'wsm';
/** Seconds the leader's key lives in etcd without renewal: a dead primary is replaced after at most this, plus a loop. */
const TTL = 10;

interface Node { name: string; pg: number; rest: number }
interface State {
  etcd: { client: number; peer: number };
  haproxy: number;
  nodes: Node[];
  superuser: string;
  replication: string;
  user: string;
  password: string;
  database: string;
}

const asRoot = process.getuid?.() === 0;
function say(line: string): void { process.stderr.write(`${line}\n`); }
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const PACKAGES: Array<{ pkg: string; has: () => boolean }> = [
  { pkg: 'postgresql', has: () => binDir() !== undefined },
  { pkg: 'patroni', has: () => existsSync('/usr/bin/patroni') },
  { pkg: 'etcd-server', has: () => existsSync('/usr/bin/etcd') },
  { pkg: 'pgbackrest', has: () => existsSync('/usr/bin/pgbackrest') },
  { pkg: 'haproxy', has: () => existsSync('/usr/sbin/haproxy') },
];

function binDir(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).filter((v) => existsSync(path.join(root, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : path.join(root, versions[0], 'bin');
}

function ensureInstalled(): string {
  const missing = PACKAGES.filter((p) => !p.has()).map((p) => p.pkg);
  if (missing.length > 0) {
    say(`Installing from the Debian packages: ${missing.join(' ')}`);
    const apt = (args: string[]) => spawnSync('apt-get', args, { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } }).status === 0;
    if (!apt(['install', '-y', '-qq', ...missing]) && (!apt(['update', '-qq']) || !apt(['install', '-y', '-qq', ...missing]))) {
      throw new Error(`Could not install ${missing.join(' ')} with apt-get (run as root, or install them yourself)`);
    }
  }
  const bin = binDir();
  if (!bin) throw new Error('no PostgreSQL server programs under /usr/lib/postgresql');
  return bin;
}

/** The command line that runs `argv` as the `postgres` system user (as is when not root). */
function asPostgres(argv: string[]): string[] {
  return asRoot ? ['setpriv', '--reuid=postgres', '--regid=postgres', '--init-groups', '--', ...argv] : argv;
}

function run(argv: string[], input?: string): SpawnSyncReturns<string> {
  const [command, ...args] = asPostgres(argv);
  const result = spawnSync(command!, args, { input, encoding: 'utf8', cwd: dir });
  if (result.status !== 0) throw new Error(`${path.basename(argv[0]!)} failed: ${`${result.stdout ?? ''}${result.stderr ?? ''}`.trim() || result.error?.message}`);
  return result;
}

/** Starts a long-running program in the background as `postgres`, its output to `log`; its pid is kept in `pidFile`. */
function daemon(argv: string[], log: string, pidFile: string): void {
  const out = openSync(log, 'a');
  const [command, ...args] = asPostgres(argv);
  const child = spawn(command!, args, { detached: true, stdio: ['ignore', out, out], cwd: dir });
  closeSync(out);
  child.unref();
  writeFileSync(pidFile, `${child.pid}\n`);
  own(pidFile);
}

function pidOf(pidFile: string): number | undefined {
  if (!existsSync(pidFile)) return undefined;
  const pid = Number(readFileSync(pidFile, 'utf8').trim().split('\n')[0]);
  return Number.isInteger(pid) && alive(pid) ? pid : undefined;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function own(file: string): void {
  if (!asRoot) return;
  const { uid, gid } = userIds('postgres');
  chownSync(file, uid, gid);
}

function userIds(name: string): { uid: number; gid: number } {
  const id = (flag: string) => Number(spawnSync('id', [flag, name], { encoding: 'utf8' }).stdout.trim());
  const uid = id('-u');
  if (!Number.isInteger(uid)) throw new Error(`no system user "${name}": install PostgreSQL from the Debian packages (it creates it)`);
  return { uid, gid: id('-g') };
}

/** A directory of `postgres`, mode 0700; every directory above gets the traverse bit for others where it lacks it. */
function ownedDir(d: string): void {
  mkdirSync(d, { recursive: true });
  if (!asRoot) return;
  own(d);
  chmodSync(d, 0o700);
  for (let up = path.dirname(d); ; up = path.dirname(up)) {
    const mode = statSync(up).mode;
    if ((mode & 0o001) === 0) chmodSync(up, (mode & 0o7777) | 0o001);
    if (up === path.dirname(up)) break;
  }
}

function writeOwned(file: string, text: string): void {
  writeFileSync(file, text, { mode: 0o600 });
  own(file);
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

function readState(): State {
  if (!existsSync(stateFile)) throw new Error('No PostgreSQL with failover set up under this data directory: run `npm run postgres-ha` first');
  return JSON.parse(readFileSync(stateFile, 'utf8')) as State;
}

const nodeDir = (n: Node) => path.join(dir, n.name);
const pgdata = (n: Node) => path.join(nodeDir(n), 'data');

async function http(port: number, route: string): Promise<{ status: number; body: string } | undefined> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}${route}`, { signal: AbortSignal.timeout(2000) });
    return { status: res.status, body: await res.text() };
  } catch {
    return undefined;
  }
}

async function waitFor(what: string, ok: () => Promise<boolean>, seconds: number, log?: string): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  while (!await ok()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${seconds} s${log ? `; the end of ${log}:\n${tail(log)}` : ''}`);
    await sleep(300);
  }
}

function tail(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

function archiveCommand(n: Node): string {
  return `pgbackrest --config=${bkConf} --stanza=${STANZA} --pg1-path=${pgdata(n)} archive-push %p`;
}

function patroniConfig(s: State, n: Node, bin: string): string {
  const q = (v: string | number) => JSON.stringify(String(v));
  return `scope: ${SCOPE}
namespace: /wsm/
name: ${n.name}
restapi:
  listen: 127.0.0.1:${n.rest}
  connect_address: 127.0.0.1:${n.rest}
etcd3:
  hosts: 127.0.0.1:${s.etcd.client}
bootstrap:
  dcs:
    ttl: ${TTL}
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_mode_strict: false
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        wal_log_hints: "on"
        hot_standby: "on"
        archive_mode: "on"
        max_connections: 300
        max_wal_senders: 10
        max_replication_slots: 10
        synchronous_commit: "on"
  initdb:
    - encoding: UTF8
    - locale: C
    - data-checksums
postgresql:
  listen: 127.0.0.1:${n.pg}
  connect_address: 127.0.0.1:${n.pg}
  data_dir: ${pgdata(n)}
  bin_dir: ${bin}
  pgpass: ${path.join(nodeDir(n), 'pgpass')}
  authentication:
    superuser:
      username: postgres
      password: ${q(s.superuser)}
    replication:
      username: replicator
      password: ${q(s.replication)}
  parameters:
    unix_socket_directories: ${q(nodeDir(n))}
    archive_command: ${q(archiveCommand(n))}
  pg_hba:
    - local all postgres peer
    - host replication replicator 127.0.0.1/32 scram-sha-256
    - host all all 127.0.0.1/32 scram-sha-256
  basebackup:
    - checkpoint: fast
`;
}

function haproxyConfig(s: State): string {
  return `global
  maxconn 1000
defaults
  mode tcp
  timeout connect 2s
  timeout client 2h
  timeout server 2h
  timeout check 1s
listen primary
  bind 127.0.0.1:${s.haproxy}
  option httpchk GET /primary
  http-check expect status 200
  default-server inter 500ms fastinter 250ms fall 2 rise 1 on-marked-down shutdown-sessions
${s.nodes.map((n) => `  server ${n.name} 127.0.0.1:${n.pg} check port ${n.rest}`).join('\n')}
`;
}

function pgbackrestConfig(s: State): string {
  return `[global]
repo1-path=${path.join(bkDir, 'repo')}
repo1-retention-full=2
log-path=${path.join(bkDir, 'log')}
lock-path=${path.join(bkDir, 'lock')}
spool-path=${path.join(bkDir, 'spool')}
log-level-console=warn
log-level-file=info
start-fast=y

[${STANZA}]
${s.nodes.map((n, i) => `pg${i + 1}-path=${pgdata(n)}\npg${i + 1}-port=${n.pg}\npg${i + 1}-socket-path=${nodeDir(n)}\npg${i + 1}-user=postgres`).join('\n')}
`;
}

function pgbackrest(args: string[]): SpawnSyncReturns<string> {
  return run(['pgbackrest', `--config=${bkConf}`, `--stanza=${STANZA}`, ...args]);
}

/** The member that leads now, per Patroni (the one whose REST API answers /primary with 200). */
async function primary(s: State): Promise<Node | undefined> {
  for (const n of s.nodes) if ((await http(n.rest, '/primary'))?.status === 200) return n;
  return undefined;
}

function psqlOn(bin: string, n: Node, sql: string): string {
  return run([path.join(bin, 'psql'), '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', nodeDir(n), '-p', String(n.pg), '-U', 'postgres', '-d', 'postgres', '-At'], sql).stdout;
}

function setUp(bin: string, s: State, n: Node): void {
  const password = s.password.replaceAll("'", "''");
  psqlOn(bin, n, `
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${s.user}') THEN
    CREATE ROLE ${s.user} LOGIN CREATEDB PASSWORD '${password}';
  ELSE
    ALTER ROLE ${s.user} LOGIN CREATEDB PASSWORD '${password}';
  END IF;
END $$;
SELECT 'CREATE DATABASE ${s.database} OWNER ${s.user}' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '${s.database}')\\gexec
`);
}

function settings(s: State): string {
  return ['WSM_STORE=cluster', `WSM_POSTGRES_URL=postgres://${s.user}:${encodeURIComponent(s.password)}@127.0.0.1:${s.haproxy}/${s.database}`].join('\n');
}

async function start(): Promise<State> {
  const bin = ensureInstalled();
  ownedDir(dir);
  let s: State;
  if (existsSync(stateFile)) {
    s = readState();
  } else {
    const port = freePort;
    s = {
      etcd: { client: await port(), peer: await port() },
      haproxy: await port(),
      nodes: [{ name: 'node1', pg: await port(), rest: await port() }, { name: 'node2', pg: await port(), rest: await port() }],
      superuser: randomBytes(16).toString('hex'),
      replication: randomBytes(16).toString('hex'),
      user: 'wsm',
      password: `w${randomBytes(16).toString('hex')}`,
      database: 'wsm',
    };
    writeFileSync(stateFile, `${JSON.stringify(s, null, 2)}\n`, { mode: 0o600 });
  }
  for (const d of [path.join(dir, 'etcd'), bkDir, path.join(bkDir, 'repo'), path.join(bkDir, 'log'), path.join(bkDir, 'lock'), path.join(bkDir, 'spool'), ...s.nodes.map(nodeDir)]) ownedDir(d);
  writeOwned(bkConf, pgbackrestConfig(s));
  writeOwned(path.join(dir, 'haproxy.cfg'), haproxyConfig(s));
  for (const n of s.nodes) writeOwned(path.join(nodeDir(n), 'patroni.yml'), patroniConfig(s, n, bin));

  // etcd
  const etcdLog = path.join(dir, 'etcd.log');
  if (!pidOf(path.join(dir, 'etcd.pid'))) {
    say(`Starting etcd on 127.0.0.1:${s.etcd.client}`);
    const peer = `http://127.0.0.1:${s.etcd.peer}`;
    daemon(['etcd', '--name', 'wsm', '--data-dir', path.join(dir, 'etcd', 'data'),
      '--listen-client-urls', `http://127.0.0.1:${s.etcd.client}`, '--advertise-client-urls', `http://127.0.0.1:${s.etcd.client}`,
      '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer, '--initial-cluster', `wsm=${peer}`, '--initial-cluster-state', 'new',
      '--logger', 'zap', '--log-outputs', 'stderr'], etcdLog, path.join(dir, 'etcd.pid'));
  }
  await waitFor('etcd does not answer', async () => (await http(s.etcd.client, '/health'))?.status === 200, 60, etcdLog);

  // Patroni: the first node bootstraps (or leads again), the second follows it.
  const startNode = (n: Node) => {
    if (pidOf(path.join(nodeDir(n), 'patroni.pid'))) return;
    say(`Starting Patroni ${n.name}: PostgreSQL on 127.0.0.1:${n.pg}, REST API on 127.0.0.1:${n.rest}`);
    daemon(['patroni', path.join(nodeDir(n), 'patroni.yml')], path.join(nodeDir(n), 'patroni.log'), path.join(nodeDir(n), 'patroni.pid'));
  };
  const fresh = !existsSync(path.join(pgdata(s.nodes[0]!), 'PG_VERSION'));
  if (fresh) {
    startNode(s.nodes[0]!);
    await waitFor('the first node did not become primary', async () => (await http(s.nodes[0]!.rest, '/primary'))?.status === 200, 120, path.join(nodeDir(s.nodes[0]!), 'patroni.log'));
  }
  for (const n of s.nodes) startNode(n);
  let leader: Node | undefined;
  await waitFor('no node became primary', async () => (leader = await primary(s)) !== undefined, 120, path.join(nodeDir(s.nodes[0]!), 'patroni.log'));
  const standbys = s.nodes.filter((n) => n !== leader);
  await waitFor('no synchronous standby', async () => {
    for (const n of standbys) if ((await http(n.rest, '/sync'))?.status === 200) return true;
    return false;
  }, 180, path.join(nodeDir(standbys[0]!), 'patroni.log'));
  setUp(bin, s, leader!);

  // HAProxy
  const haPid = path.join(dir, 'haproxy.pid');
  if (!pidOf(haPid)) {
    say(`Starting HAProxy on 127.0.0.1:${s.haproxy}`);
    run(['haproxy', '-D', '-p', haPid, '-f', path.join(dir, 'haproxy.cfg')]);
  }

  // pgBackRest: the stanza once, checked (a WAL switch archived).
  if (!existsSync(path.join(bkDir, 'repo', 'backup', STANZA, 'backup.info'))) {
    say(`Creating the pgBackRest stanza ${STANZA}`);
    pgbackrest(['stanza-create']);
  }
  pgbackrest(['check']);
  return s;
}

async function stop(): Promise<void> {
  if (!existsSync(stateFile)) { say('No PostgreSQL with failover set up under this data directory'); return; }
  const s = readState();
  const pids = (files: string[]) => files.map(pidOf).filter((p): p is number => p !== undefined);
  const ended = async (list: number[], seconds: number) => {
    const deadline = Date.now() + seconds * 1000;
    while (list.some(alive) && Date.now() < deadline) await sleep(200);
    for (const pid of list.filter(alive)) process.kill(pid, 'SIGKILL');
  };
  {
    const patronis = pids(s.nodes.map((n) => path.join(nodeDir(n), 'patroni.pid')));
    for (const pid of patronis) process.kill(pid, 'SIGTERM');
    await ended(patronis, 60);
    // A postmaster left by a Patroni that was killed.
    for (const n of s.nodes) {
      const pid = pidOf(path.join(pgdata(n), 'postmaster.pid'));
      if (pid) { process.kill(pid, 'SIGINT'); await ended([pid], 30); }
    }
    const rest = pids([path.join(dir, 'haproxy.pid'), path.join(dir, 'etcd.pid'), path.join(dir, 'restore', 'data', 'postmaster.pid')]);
    for (const pid of rest) process.kill(pid, 'SIGTERM');
    await ended(rest, 30);
    say('PostgreSQL with failover stopped');
  }
}

async function status(): Promise<void> {
  const s = readState();
  const lines: string[] = [];
  for (const n of s.nodes) {
    const res = await http(n.rest, '/patroni');
    const info = res ? JSON.parse(res.body) as { role?: string; state?: string; timeline?: number } : undefined;
    const sync = (await http(n.rest, '/sync'))?.status === 200;
    lines.push(`${n.name}: ${info ? `${info.role}${sync ? ' (synchronous standby)' : ''}, ${info.state}, timeline ${info.timeline}` : 'Patroni does not answer'} (PostgreSQL 127.0.0.1:${n.pg}, REST 127.0.0.1:${n.rest})`);
  }
  lines.push(`etcd: ${(await http(s.etcd.client, '/health'))?.status === 200 ? 'answers' : 'does not answer'} (127.0.0.1:${s.etcd.client})`);
  lines.push(`HAProxy: ${pidOf(path.join(dir, 'haproxy.pid')) ? 'runs' : 'does not run'} (127.0.0.1:${s.haproxy})`);
  for (const line of lines) say(line);
  if (!await primary(s)) throw new Error('no primary: writes cannot be taken');
}

/**
 * Kills the primary node as a machine that dies: its Patroni first (so it
 * cannot restart PostgreSQL), then its postmaster, both with SIGKILL; the
 * standby takes over. With `--postmaster-only`, only the postmaster: the
 * node's Patroni, which still holds the leader key, starts it again.
 */
async function killPrimary(postmasterOnly: boolean): Promise<void> {
  const s = readState();
  const leader = await primary(s);
  if (!leader) throw new Error('no primary to kill');
  const patroniPid = postmasterOnly ? undefined : pidOf(path.join(nodeDir(leader), 'patroni.pid'));
  const postmasterPid = pidOf(path.join(pgdata(leader), 'postmaster.pid'));
  if (patroniPid) process.kill(patroniPid, 'SIGKILL');
  if (postmasterPid) process.kill(postmasterPid, 'SIGKILL');
  process.stdout.write(`${leader.name}\n`);
  say(`Killed ${postmasterOnly ? 'the postmaster of ' : ''}${leader.name} (Patroni ${patroniPid ?? '-'}, postmaster ${postmasterPid ?? '-'}) at ${new Date().toISOString()}`);
}

/** Waits until a primary and a synchronous standby run (after a drill). */
async function waitSync(seconds: number): Promise<void> {
  const s = readState();
  await waitFor('no primary with a synchronous standby', async () => {
    if (!await primary(s)) return false;
    for (const n of s.nodes) if ((await http(n.rest, '/sync'))?.status === 200) return true;
    return false;
  }, seconds);
}

function backup(): void {
  readState();
  ensureInstalled();
  say('Full backup with pgBackRest');
  pgbackrest(['--type=full', 'backup']);
  say(pgbackrest(['info']).stdout.trim());
}

/** PostgreSQL's form of a time (pgBackRest picks the backup set by it). */
function targetTime(given: string): string {
  const t = new Date(given);
  if (Number.isNaN(t.getTime())) throw new Error(`--to-time ${given}: not a time (use e.g. 2026-01-31T12:00:00Z)`);
  return t.toISOString().replace('T', ' ').replace('Z', '+00');
}

async function restore(toTime: string): Promise<string> {
  const bin = ensureInstalled();
  const s = readState();
  const target = targetTime(toTime);
  // WAL written up to now is archived first, so the time can be reached (only while a primary runs).
  if (await primary(s)) pgbackrest(['check']);
  const rdir = path.join(dir, 'restore');
  const rdata = path.join(rdir, 'data');
  const old = pidOf(path.join(rdata, 'postmaster.pid'));
  if (old) {
    process.kill(old, 'SIGINT');
    while (alive(old)) await sleep(200);
  }
  rmSync(rdir, { recursive: true, force: true });
  ownedDir(rdir);
  ownedDir(rdata);
  say(`Restoring to ${target} into ${rdata}`);
  pgbackrest([`--pg1-path=${rdata}`, '--type=time', `--target=${target}`, '--target-action=promote', 'restore']);
  const port = await freePort();
  const options = [`-p ${port}`, '-c listen_addresses=127.0.0.1', `-c unix_socket_directories=${rdir}`,
    // Alone: it archives nothing into the failover pair's repository and waits for no standby.
    '-c archive_mode=off', "-c synchronous_standby_names=''", "-c primary_conninfo=''"].join(' ');
  try {
    run([path.join(bin, 'pg_ctl'), '-D', rdata, '-l', path.join(rdir, 'postgres.log'), '-o', options, '-w', '-t', '120', 'start']);
  } catch (err) {
    throw new Error(`${(err as Error).message}\nThe end of its log:\n${tail(path.join(rdir, 'postgres.log'))}`);
  }
  // Recovery ends at the target and promotes: wait until it takes writes.
  await waitFor('the restored PostgreSQL did not finish recovery', async () => {
    try {
      return run([path.join(bin, 'psql'), '-X', '-h', rdir, '-p', String(port), '-U', 'postgres', '-d', 'postgres', '-At', '-c', 'SELECT pg_is_in_recovery()']).stdout.trim() === 'f';
    } catch {
      return false;
    }
  }, 120, path.join(rdir, 'postgres.log'));
  return ['WSM_STORE=cluster', `WSM_POSTGRES_URL=postgres://${s.user}:${encodeURIComponent(s.password)}@127.0.0.1:${port}/${s.database}`].join('\n');
}

const [command = 'start', ...rest] = process.argv.slice(2);
try {
  if (command === 'start') {
    const s = await start();
    say('Start the service on it with:');
    process.stdout.write(`${settings(s)}\n`);
  } else if (command === 'env') {
    process.stdout.write(`${settings(readState())}\n`);
  } else if (command === 'stop') {
    await stop();
  } else if (command === 'status') {
    await status();
  } else if (command === 'kill-primary') {
    await killPrimary(rest.includes('--postmaster-only'));
  } else if (command === 'wait-sync') {
    await waitSync(Number(rest[0] ?? 120));
  } else if (command === 'backup') {
    backup();
  } else if (command === 'restore') {
    const at = rest.indexOf('--to-time');
    const time = at >= 0 ? rest[at + 1] : undefined;
    if (!time) throw new Error('restore needs --to-time T (e.g. 2026-01-31T12:00:00Z)');
    const out = await restore(time);
    say('The restored PostgreSQL runs alone; the service reads it with:');
    process.stdout.write(`${out}\n`);
  } else {
    throw new Error(`Unknown command "${command}": use start, stop, status, env, backup, restore --to-time T, kill-primary [--postmaster-only] or wait-sync [seconds]`);
  }
} catch (err) {
  say(err instanceof Error ? err.message : String(err));
  process.exitCode = 1;
}
