/**
 * `npm run balancer [-- start <host:port> ... | stop | status]`: HAProxy
 * (Debian's `haproxy` package, installed with apt-get when missing) in front
 * of several service instances of one cluster (`WSM_STORE=cluster`,
 * docs/cluster.md; docs/operations.md says how to run them).
 *
 * - Listens on `HOST` (loopback by default) at `PORT`, or at a free port;
 *   prints the balancer's URL.
 * - Routes by workspace: the path segment after `/api/v1/<area>/` (after
 *   `/mcp/`) is hashed on a consistent-hash ring, so each workspace's reads
 *   and writes go to one instance while it is up; requests naming no
 *   workspace go round robin.
 * - Checks `GET /health` on each instance every 500 ms: two failures take it
 *   out, two successes bring it back.
 * - Retries a request on another instance when the connection to its
 *   instance could not be made (nothing was sent); a GET, HEAD or OPTIONS
 *   also when the instance closed the connection without answering. Any
 *   other request whose instance died under it is answered 502, never sent
 *   again: its outcome is unknown.
 * - With every instance out (their /health says 503 while PostgreSQL is out
 *   of reach), sends requests to them all the same: each answers reads from
 *   its replica and refuses writes itself (503, Retry-After).
 * - Server-Sent Events and other long responses pass through unbuffered.
 * - Answers 429 itself to a client address holding more than 200
 *   connections at once (WSM_BALANCER_CLIENT_CONNECTIONS): the instances see
 *   only the balancer's address, so the limit is kept here.
 *
 * Its configuration, pid file, admin socket and log live under
 * `<data dir>/balancer`. `start` while it runs writes the new configuration
 * and reloads it (streams open on the old one end there as they would).
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

const dataDir = path.resolve(process.env.WSM_DATA_DIR ?? './data');
const dir = path.join(dataDir, 'balancer');
const configFile = path.join(dir, 'haproxy.cfg');
const pidFile = path.join(dir, 'haproxy.pid');
const stateFile = path.join(dir, 'balancer.json');
const socketFile = path.join(dir, 'admin.sock');
const logFile = path.join(dir, 'haproxy.log');

/** What `status` and a later `start` need to know of the running balancer; `instances` as given. */
interface State { host: string; port: number; instances: string[]; clientConnections: number }

/** Connections one client address may hold at once through the balancer, unless WSM_BALANCER_CLIENT_CONNECTIONS says otherwise. */
const CLIENT_CONNECTIONS = 200;

/** The 429 the balancer answers a client over its limit, in the service's error envelope. */
const TOO_MANY_CONNECTIONS = JSON.stringify({ success: false, error: { code: 'TOO_MANY_REQUESTS', message: 'Too many connections from this address at once: close some and try again' } });

function say(line: string): void { process.stderr.write(`${line}\n`); }

function haproxyBinary(): string | undefined {
  for (const candidate of ['/usr/sbin/haproxy', '/usr/bin/haproxy']) if (existsSync(candidate)) return candidate;
  const found = spawnSync('sh', ['-c', 'command -v haproxy'], { encoding: 'utf8' });
  return found.status === 0 && found.stdout.trim() ? found.stdout.trim() : undefined;
}

function ensureInstalled(): string {
  const found = haproxyBinary();
  if (found) return found;
  say('HAProxy is not installed: installing haproxy from the Debian packages');
  const apt = (args: string[]) => spawnSync('apt-get', args, { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } }).status === 0;
  if (!apt(['install', '-y', '-qq', 'haproxy']) && (!apt(['update', '-qq']) || !apt(['install', '-y', '-qq', 'haproxy']))) {
    throw new Error('Could not install haproxy with apt-get (run as root, or install it yourself)');
  }
  const installed = haproxyBinary();
  if (!installed) throw new Error('haproxy was installed but no haproxy program was found');
  return installed;
}

function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, host, () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * One instance argument: `host:port`, `[v6 address]:port`, or the same with
 * `http://` before it. Returns the address HAProxy's `server` line takes.
 */
function parseInstance(arg: string): string {
  const bare = arg.replace(/^http:\/\//, '').replace(/\/$/, '');
  const match = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(bare);
  const port = match ? Number(match[2]) : 0;
  if (!match || port < 1 || port > 65535) {
    throw new Error(`"${arg}" is not an instance address: give each instance as host:port (127.0.0.1:8081, [::1]:8081)`);
  }
  const host = match[1]!.startsWith('[') ? match[1]!.slice(1, -1) : match[1]!;
  return `${host.includes(':') ? `ipv6@${host}` : host}:${port}`;
}

function bindAddress(host: string, port: number): string {
  return host.includes(':') ? `ipv6@${host}:${port}` : `${host}:${port}`;
}

function url(state: State): string {
  return `http://${state.host.includes(':') ? `[${state.host}]` : state.host}:${state.port}`;
}

/** The name each instance has in the balancer (its logs, `status`, the `X-Served-By` header): its place in the list. */
const serverName = (index: number): string => `instance-${index + 1}`;

function haproxyConfig(state: State, asRoot: boolean): string {
  const servers = state.instances.map((instance, i) => `  server ${serverName(i)} ${parseInstance(instance)} check`);
  const fallbacks = state.instances.map((instance, i) => `  server ${serverName(i)}-fallback ${parseInstance(instance)} backup`);
  return `# Written by \`npm run balancer\` (scripts/balancer.ts); rewritten at each start.
global
  log stdout format raw local0 info
  stats socket ${socketFile} mode 600 level admin
  maxconn 4096
${asRoot ? '  user haproxy\n  group haproxy\n' : ''}
defaults
  mode http
  log global
  option httplog
  option dontlognull
  timeout connect 2s
  # Waiting for a request's headers, and between the requests of a kept-alive connection.
  timeout http-request 30s
  timeout http-keep-alive 10s
  timeout queue 10s
  # Inactivity on either side of a request under way. Long enough for a long
  # request (an import, a large export) and for Server-Sent Events, which send
  # a comment every 15 s; tunnels (upgraded connections) alike.
  timeout client 10m
  timeout server 10m
  timeout tunnel 1h
  timeout client-fin 10s
  timeout server-fin 10s
  timeout check 1s

frontend wsm
  bind ${bindAddress(state.host, state.port)}
  # Connections one client address holds at once (WSM_BALANCER_CLIENT_CONNECTIONS): past
  # ${state.clientConnections}, its requests are answered 429 here and reach no instance. The
  # instances see only the balancer's address, so the limit is kept here: one
  # client opening thousands of connections at once would otherwise hold an
  # instance's event loop and its listen queue (docs/operations.md, "Probes").
  stick-table type ip size 100k expire 60s store conn_cur
  tcp-request connection track-sc0 src
  http-request return status 429 content-type "application/json; charset=utf-8" string "${TOO_MANY_CONNECTIONS.replace(/"/g, '\\"')}" hdr Retry-After 1 hdr Connection close if { sc0_conn_cur gt ${state.clientConnections} }
  default_backend instances

backend instances
  # The workspace of a request: the segment after /api/v1/<area>/ (after /mcp/).
  # The registry, users and import areas have none there: round robin.
  acl api path_beg /api/v1/
  acl no_workspace path_beg /api/v1/registry/ /api/v1/users/
  acl no_workspace path /api/v1/workspaces/import
  http-request set-var(txn.ws) path,field(5,/) if api !no_workspace
  http-request set-var(txn.ws) path,field(3,/) if { path_beg /mcp/ }
  http-request unset-var(txn.ws) if { var(txn.ws) -m len 0 }
  # Consistent hashing: an instance that leaves moves only its own workspaces,
  # and they come back to it when it returns. Without a workspace: round robin.
  balance hash var(txn.ws)
  hash-type consistent
  # /health answers 503 when the instance cannot save changes.
  option httpchk GET /health
  http-check expect status 200
  default-server inter 500ms fall 2 rise 2
  # A connection that could not be made: nothing was sent, so any request is
  # sent again, to another instance. A safe method (GET, HEAD, OPTIONS) also
  # when the instance closed without answering; never any other request,
  # whose outcome is then unknown (the client gets 502).
  retries 3
  option redispatch 1
  retry-on conn-failure empty-response
  http-request disable-l7-retry unless METH_GET METH_HEAD METH_OPTIONS
  http-response set-header X-Served-By %s
${servers.join('\n')}
  # While PostgreSQL is out of reach every instance's /health answers 503 and
  # none is left above. The same instances, unchecked, then take the requests
  # (a dead one is passed over by the retries): reads are answered from their
  # replicas, writes with the service's own 503 STORE_UNAVAILABLE and Retry-After.
  option allbackups
${fallbacks.join('\n')}
`;
}

function readState(): State | undefined {
  return existsSync(stateFile) ? JSON.parse(readFileSync(stateFile, 'utf8')) as State : undefined;
}

function runningPid(): number | undefined {
  if (!existsSync(pidFile)) return undefined;
  const pid = Number(readFileSync(pidFile, 'utf8').trim().split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    process.kill(pid, 0);
    return pid;
  } catch {
    return undefined;
  }
}

function logTail(lines = 30): string {
  try {
    return readFileSync(logFile, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Answers one command of HAProxy's admin socket. */
function admin(command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(socketFile);
    let out = '';
    socket.setEncoding('utf8');
    socket.setTimeout(5000, () => socket.destroy(new Error('the balancer\'s admin socket did not answer')));
    socket.on('connect', () => socket.end(`${command}\n`));
    socket.on('data', (chunk: string) => { out += chunk; });
    socket.on('end', () => resolve(out));
    socket.on('error', reject);
  });
}

async function waitUntil(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const answers = (state: State) => new Promise<boolean>((resolve) => {
  const socket = net.connect(state.port, state.host, () => { socket.destroy(); resolve(true); });
  socket.on('error', () => resolve(false));
});

async function start(args: string[]): Promise<State> {
  if (args.length === 0) throw new Error('Give the instances to balance: npm run balancer -- start 127.0.0.1:8081 127.0.0.1:8082 ...');
  for (const arg of args) parseInstance(arg);
  const instances = args;
  const bin = ensureInstalled();
  mkdirSync(dir, { recursive: true });
  const previous = readState();
  const pid = runningPid();
  const host = process.env.HOST || previous?.host || '127.0.0.1';
  const requested = process.env.PORT ? Number(process.env.PORT) : undefined;
  if (requested !== undefined && (!Number.isInteger(requested) || requested < 1 || requested > 65535)) throw new Error(`PORT "${process.env.PORT}" is not a port number`);
  const port = requested ?? (pid && previous ? previous.port : await freePort(host));
  const limit = process.env.WSM_BALANCER_CLIENT_CONNECTIONS;
  const clientConnections = limit ? Number(limit) : CLIENT_CONNECTIONS;
  if (!Number.isInteger(clientConnections) || clientConnections < 1 || clientConnections > 100_000) {
    throw new Error(`WSM_BALANCER_CLIENT_CONNECTIONS "${limit}" is not a number of connections (1 to 100000)`);
  }
  const state: State = { host, port, instances, clientConnections };
  const asRoot = process.getuid?.() === 0 && spawnSync('id', ['-u', 'haproxy']).status === 0;
  writeFileSync(configFile, haproxyConfig(state, asRoot));
  const checked = spawnSync(bin, ['-c', '-q', '-f', configFile], { encoding: 'utf8' });
  if (checked.status !== 0) throw new Error(`HAProxy refused the configuration ${configFile}:\n${`${checked.stdout}${checked.stderr}`.trim()}`);
  writeFileSync(stateFile, `${JSON.stringify(state, null, 2)}\n`);
  if (pid) {
    // Master-worker mode: SIGUSR2 makes the master read the configuration again and start new workers.
    process.kill(pid, 'SIGUSR2');
    say(`Balancer reloaded with ${instances.length} instance(s)`);
    if (!await waitUntil(() => answers(state), 10_000)) throw new Error(`The balancer does not answer on ${url(state)} after the reload; the end of its log (${logFile}):\n${logTail()}`);
    return state;
  }
  const log = openSync(logFile, 'a');
  // -W: master-worker, in the foreground of a detached process (so its log goes to the file), -p: the master's pid.
  const child = spawn(bin, ['-W', '-f', configFile, '-p', pidFile], { detached: true, stdio: ['ignore', log, log] });
  closeSync(log);
  let exited = false;
  child.on('exit', () => { exited = true; });
  child.unref();
  const up = await waitUntil(async () => exited || (runningPid() !== undefined && await answers(state)), 15_000);
  if (!up || exited) throw new Error(`HAProxy did not start on ${url(state)}; the end of its log (${logFile}):\n${logTail()}`);
  say(`Balancer (HAProxy) on ${url(state)} in front of ${instances.length} instance(s); configuration in ${configFile}`);
  return state;
}

async function stop(): Promise<void> {
  const pid = runningPid();
  if (!pid) { say('The balancer is not running'); return; }
  process.kill(pid, 'SIGTERM');
  if (!await waitUntil(() => runningPid() === undefined, 10_000)) throw new Error(`HAProxy (pid ${pid}) did not stop`);
  say('Balancer stopped');
}

/** Each instance's state as HAProxy's checks see it (`show stat`). */
async function status(): Promise<void> {
  const state = readState();
  if (!state) throw new Error('No balancer set up under this data directory: run `npm run balancer -- start host:port ...` first');
  if (!runningPid()) throw new Error(`The balancer is not running (it was on ${url(state)}); the end of its log (${logFile}):\n${logTail()}`);
  const csv = (await admin('show stat')).split('\n').filter((line) => line && !line.startsWith('#'));
  say(`Balancer on ${url(state)}`);
  for (const line of csv) {
    // Fields of `show stat`: 0 pxname, 1 svname, 17 status, 36 check_status.
    const fields = line.split(',');
    const [proxy, name, status, check] = [fields[0], fields[1], fields[17], fields[36]];
    if (proxy !== 'instances' || !/^instance-\d+$/.test(name ?? '')) continue;
    const index = Number(name!.slice('instance-'.length)) - 1;
    say(`  ${name} ${state.instances[index] ?? '?'} ${status}${check ? ` (${check})` : ''}`);
  }
}

const [command = 'start', ...rest] = process.argv.slice(2);
try {
  if (command === 'start') {
    const state = await start(rest);
    process.stdout.write(`${url(state)}\n`);
  } else if (command === 'stop') {
    await stop();
  } else if (command === 'status') {
    await status();
  } else {
    throw new Error(`Unknown command "${command}": use start <host:port> ..., stop or status`);
  }
} catch (err) {
  say(err instanceof Error ? err.message : String(err));
  process.exitCode = 1;
}
