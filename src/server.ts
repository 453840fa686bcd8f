import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { AddressInfo } from 'node:net';
import type { Config } from './config.js';
import type { Logger } from './logger.js';
import { createApp, createServices, type Services } from './app.js';
import { AcceptFirst } from './http/accept-first.js';
import { createLocalJWKSet } from 'jose';
import { createVerifier, type LocalIssuer } from './auth/tokens.js';
import { publicJwks } from './sign-in/keys.js';
import { openStore, type StoreTestOptions } from './store/open.js';
import type { QuadStore } from './store/store.js';
import { bootstrap, type BootstrapResult } from './bootstrap.js';
import { ensureWorkspaceIndex } from './workspaces/workspace-index.js';
import { loadSecretsKey } from './secrets/key-file.js';
import { ClusterStore } from './store/cluster/cluster-store.js';
import { KEEP_ALIVE_MS } from './http/placement-forward.js';
import { workspaceStream } from './rdf/graphs.js';
import { setSecurityHeaders } from './http/security-headers.js';
import { errorBody } from './http/errors.js';
import { AppError } from './errors.js';

/**
 * Connections the kernel holds for the service until it accepts them. Node's
 * default, 511, is less than a client opening 2,000 connections at once
 * (an event-stream flood: 2,000 streams of one member): past it the kernel drops the
 * connections' handshakes, and every client connecting meanwhile, `/health`
 * probes included, waits for its retransmission (1 s, then 3 s, 7 s). Linux
 * caps it at net.core.somaxconn (4096 by default).
 */
const LISTEN_BACKLOG = 4096;

export interface RunningServer {
  url: string;
  /** With WSM_OPS_PORT: the address of the listener answering `/health` and `/metrics` alone. */
  opsUrl?: string;
  services: Services;
  bootstrap: BootstrapResult;
  close(): Promise<void>;
}

/**
 * Start: config -> store (recover) -> services -> app -> listen. `store`
 * is for tests only (fault injection into the journal's file operations);
 * `opening`, a store already being opened (`wsm serve` opens it before it
 * loads this module, so the two overlap).
 */
export async function startServer(config: Config, logger: Logger, options: { store?: StoreTestOptions; opening?: Promise<QuadStore> } = {}): Promise<RunningServer> {
  const store = await (options.opening ?? openStore(config, logger, options.store));
  let localIssuer: LocalIssuer | undefined;
  const verify = await createVerifier({
    dataDir: config.dataDir,
    oidcIssuer: config.WSM_OIDC_ISSUER,
    oidcAudience: config.WSM_OIDC_AUDIENCE,
    oidcJwksUrl: config.WSM_OIDC_JWKS_URL,
    adminClaim: config.WSM_OIDC_ADMIN_CLAIM,
    adminValue: config.WSM_OIDC_ADMIN_VALUE,
    localIssuer: () => localIssuer,
  });
  const secretsKey = await loadSecretsKey(config, logger).catch(async (err: unknown) => {
    await store.close();
    throw err;
  });
  const services = createServices({ config, logger, store, verify, secretsKey });
  // The index of workspaces, built once on a store written before it (src/workspaces/workspace-index.ts).
  const indexed = await ensureWorkspaceIndex(store, services.graphs);
  if (indexed === true) logger.info('built the index of workspaces (members, unfinished commands)');
  if (store instanceof ClusterStore && store.placement) {
    const { runner } = services.packages;
    const placement = store.placement;
    const workspaceOf = (stream: string): string | undefined => (stream.startsWith('ws:') ? stream.slice('ws:'.length) : undefined);
    // Placement: a workspace whose lifecycle command runs here keeps its lease until the command has ended (its writes need it).
    placement.keep = (stream) => { const ws = workspaceOf(stream); return ws !== undefined && runner.hasWork(ws); };
    // A command claimed by an instance that no longer holds its workspace is failed by the one that does (docs/cluster.md, "Placement").
    runner.usePlacement({
      held: () => placement.streams().filter((stream) => placement.holds(stream)).map(workspaceOf).filter((ws) => ws !== undefined),
      heldElsewhere: async (ws) => {
        const owner = await placement.owner(workspaceStream(ws));
        return owner !== undefined && owner.live && owner.instance !== placement.instance;
      },
    });
    placement.onAcquired = (stream) => { const ws = workspaceOf(stream); if (ws !== undefined) runner.leaseTaken(ws); };
    placement.onLost = (stream) => { const ws = workspaceOf(stream); if (ws !== undefined) runner.leaseLost(ws); };
  }
  // Commands cut off by the previous process's stop are failed ("interrupted") before anything else runs.
  await services.packages.runner.recover();
  const boot = await bootstrap(services);
  if (indexed === 'empty') await ensureWorkspaceIndex(store, services.graphs, true);
  const signInKeys = await services.signIn.prepare();
  const stopAutoUpdate = services.packages.startAutoUpdate(config.WSM_AUTO_UPDATE_INTERVAL);
  services.closers.push(() => services.packages.runner.stop(), stopAutoUpdate);
  const acceptFirst = new AcceptFirst();
  const app = createApp(services, { acceptFirst });
  const server = http.createServer(app);
  server.on('connection', () => acceptFirst.accepted());
  server.requestTimeout = 120_000;
  // Node's default, named: instances forwarding requests here (placement) close their idle connections before this.
  server.keepAliveTimeout = KEEP_ALIVE_MS;
  // Requests Node refuses before Express sees them (headers too large, malformed) still get the envelope.
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => answerClientError(err, socket));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: config.PORT, host: config.HOST, backlog: LISTEN_BACKLOG }, () => resolve());
  });
  const host = config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST;
  const url = `http://${host}:${(server.address() as AddressInfo).port}`;
  const ops = config.WSM_OPS_PORT === undefined ? undefined : await listenOps(app, config.HOST, config.WSM_OPS_PORT).catch(async (err: unknown) => {
    await new Promise<void>((resolve) => { server.close(() => resolve()); });
    throw err;
  });
  const opsUrl = ops && `http://${host}:${(ops.address() as AddressInfo).port}`;
  // The provider's issuer is the public address, known once the server listens (a test server's port is chosen then).
  const issuer = config.WSM_PUBLIC_URL ?? url;
  // Placement: other instances forward this one's workspaces' requests to the URL recorded with its leases.
  if (store instanceof ClusterStore && store.placement) await store.placement.setUrl(config.WSM_CLUSTER_ADVERTISE_URL ?? url);
  services.signIn.start(issuer);
  services.closers.push(() => services.signIn.stop());
  if (signInKeys) localIssuer = { issuer, key: createLocalJWKSet(publicJwks(signInKeys)) };
  let closing: Promise<void> | undefined;
  return {
    url,
    ...(opsUrl ? { opsUrl } : {}),
    services,
    bootstrap: boot,
    close: () => {
      closing ??= (async () => {
        await Promise.all([server, ...(ops ? [ops] : [])].map((s) => new Promise<void>((resolve) => { s.close(() => resolve()); s.closeAllConnections(); })));
        for (const close of services.closers.reverse()) await close();
        await store.close();
      })();
      return closing;
    },
  };
}

/** What the operations listener answers: `/health` and `/metrics` as the app does. */
const OPS_PATHS = new Set(['/health', '/metrics']);

/**
 * The operations listener (WSM_OPS_PORT): `/health` and `/metrics`, each
 * answered by the app as on PORT, on a listening socket of their own. Node
 * accepts one connection per listening socket per turn of its event loop, so
 * a probe connecting here is accepted in the next turn, where on PORT it
 * would wait behind every connection of a flood (2,000 opened at once) in
 * the listen queue. Any other path: 404.
 */
async function listenOps(app: http.RequestListener, host: string, port: number): Promise<http.Server> {
  const ops = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0]!;
    if (OPS_PATHS.has(path)) {
      app(req, res);
      return;
    }
    setSecurityHeaders(res);
    const body = JSON.stringify(errorBody(new AppError('NOT_FOUND', "This port answers /health and /metrics only; the API is on the service's port")));
    res.writeHead(404, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) }).end(body);
  });
  ops.keepAliveTimeout = KEEP_ALIVE_MS;
  ops.requestTimeout = 30_000;
  ops.on('clientError', (err: NodeJS.ErrnoException, socket) => answerClientError(err, socket));
  await new Promise<void>((resolve, reject) => {
    ops.once('error', reject);
    ops.listen({ port, host }, () => resolve());
  });
  return ops;
}

/** The answer to a request Node's HTTP parser refused, as the JSON envelope (docs/api.md, "Conventions"). */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (!socket.writable || (socket as Duplex & { _httpMessage?: unknown })._httpMessage) {
    socket.destroy();
    return;
  }
  const [status, code, reason, message] =
    err.code === 'HPE_HEADER_OVERFLOW' ? [431, 'REQUEST_HEADER_FIELDS_TOO_LARGE', 'Request Header Fields Too Large', 'The request headers are larger than the service accepts']
    : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? [408, 'REQUEST_TIMEOUT', 'Request Timeout', 'The request was not received in time']
    : [400, 'BAD_REQUEST', 'Bad Request', 'The request is not valid HTTP'];
  const body = JSON.stringify({ success: false, error: { code, message } });
  socket.end(`HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}
