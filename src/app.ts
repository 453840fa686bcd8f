import type { RequestListener } from 'node:http';
import express, { type Request, type RequestHandler, type Response } from 'express';
import swaggerUi from 'swagger-ui-express';
import type { Config } from './config.js';
import type { Logger } from './logger.js';
import type { QuadStore } from './store/store.js';
import { Graphs } from './rdf/graphs.js';
import { ApiRegistry, type Access } from './http/api.js';
import { AppError, forbidden } from './errors.js';
import { errorHandler, notFoundHandler } from './http/errors.js';
import { requestLogger } from './http/request-log.js';
import type { AcceptFirst } from './http/accept-first.js';
import { pagePolicy, setSecurityHeaders } from './http/security-headers.js';
import { bearerToken } from './auth/tokens.js';
import type { AuthContext } from './auth/context.js';
import { UserService } from './users/service.js';
import { WorkspaceService, type WorkspaceAccess } from './workspaces/service.js';
import { workspaceRoutes } from './workspaces/routes.js';
import { transferRoutes } from './workspaces/transfer-routes.js';
import { WorkspaceTransfer } from './workspaces/transfer.js';
import { PackageService } from './packages/service.js';
import { packageRoutes } from './packages/routes.js';
import { openRegistry } from './packages/registry.js';
import { ExtensionService } from './extensions/service.js';
import { extensionRoutes } from './extensions/routes.js';
import { IamService } from './iam/service.js';
import { iamRoutes } from './iam/routes.js';
import { WorkspaceViews } from './sandbox/views.js';
import { QuerySandbox } from './sandbox/sandbox.js';
import { SlashCommandService } from './slash/service.js';
import { slashCommandRoutes } from './slash/routes.js';
import { sparqlRoutes } from './sandbox/routes.js';
import { consoleRouter } from './console/routes.js';
import { ApiKeyService } from './auth/api-keys.js';
import { apiKeyRoutes } from './auth/routes.js';
import { StatusPresenter } from './http/status-case.js';
import { mcpRoutes } from './mcp/routes.js';
import { renderMetrics, requestMetrics, serviceMetrics, type PlacementFigures } from './metrics.js';
import path from 'node:path';
import { DirectoryArchives } from './registry/archives.js';
import { HostedRegistry } from './registry/hosted.js';
import { registryRoutes } from './registry/routes.js';
import { QueryParser } from './sparql-parse/parser.js';
import { SignInService } from './sign-in/service.js';
import { signInRouter, challengeFor } from './sign-in/routes.js';
import { signInApiRoutes } from './sign-in/api-routes.js';
import { SecretsService } from './secrets/service.js';
import { secretsRoutes } from './secrets/routes.js';
import type { SecretKeyring } from './secrets/crypto.js';
import { ClusterStore } from './store/cluster/cluster-store.js';
import { inReadSession } from './store/read-session.js';
import { placementRouter } from './http/placement-forward.js';

/** Everything the areas need, built once in `createServices`. */
export interface Services {
  config: Config;
  logger: Logger;
  store: QuadStore;
  graphs: Graphs;
  users: UserService;
  workspaces: WorkspaceService;
  /** Package installations and lifecycle commands; `packages.requestRedeploy` and `setExtensionHook` serve extensions. */
  packages: PackageService;
  extensions: ExtensionService;
  iam: IamService;
  verify: (token: string) => Promise<AuthContext>;
  /** Runs user queries in worker threads (slash commands, the SPARQL endpoint). */
  sandbox: QuerySandbox;
  slashCommands: SlashCommandService;
  /** API keys (X-Api-Key), stored as hashes. */
  apiKeys: ApiKeyService;
  /** The registry this service hosts (docs/packages.md); installs use it when WSM_REGISTRY=self. */
  hostedRegistry: HostedRegistry;
  /** Parses user SPARQL off the event loop, bounded in size, depth and time. */
  queryParser: QueryParser;
  /** Sign-in: password accounts and the OpenID provider (src/sign-in). */
  signIn: SignInService;
  /** Variables and managed secrets packages declare (docs/secrets.md). */
  secrets: SecretsService;
  /** Started background work (schedulers, workers) to stop at shutdown. */
  closers: Array<() => Promise<void> | void>;
}

export function createServices(deps: {
  config: Config; logger: Logger; store: QuadStore; verify: (token: string) => Promise<AuthContext>;
  /** The key that seals secret values (`loadSecretsKey`); null or absent: secret values are off. */
  secretsKey?: SecretKeyring | null;
}): Services {
  const graphs = new Graphs(deps.config.WSM_BASE_IRI);
  const users = new UserService(deps.store, graphs);
  const workspaces = new WorkspaceService(deps.store, graphs, users, deps.config.WSM_ENGINE_VERSION);
  const hostedRegistry = new HostedRegistry(deps.store, graphs, deps.store.archives ?? new DirectoryArchives(path.join(deps.config.dataDir, 'archives')), deps.logger,
    { maxArchiveBytes: deps.config.WSM_MAX_UPLOAD_BYTES });
  const registry = deps.config.WSM_REGISTRY === 'self' ? hostedRegistry : openRegistry(deps.config.WSM_REGISTRY);
  const packages = new PackageService(deps.store, graphs, workspaces, registry, deps.logger,
    { maxArchiveBytes: deps.config.WSM_MAX_UPLOAD_BYTES });
  const extensions = new ExtensionService(deps.store, graphs, users, deps.config.WSM_MAX_BODY_BYTES);
  // Extensions ask packages for REDEPLOY commands; packages merge extensions into every deployment.
  extensions.setRedeployer(packages);
  packages.setExtensionHook(extensions);
  const iam = new IamService(deps.store, graphs, users, workspaces);
  const secrets = new SecretsService(deps.store, graphs, deps.secretsKey ?? null, deps.logger);
  packages.setSecrets(secrets);
  const sandbox = new QuerySandbox(deps.store, graphs, new WorkspaceViews(deps.store, graphs), deps.logger, {
    timeoutMs: deps.config.WSM_QUERY_TIMEOUT_MS,
    maxResults: deps.config.WSM_QUERY_MAX_TRIPLES,
    maxMemoryMb: deps.config.WSM_QUERY_MAX_MEMORY_MB,
  });
  const apiKeys = new ApiKeyService(deps.store, graphs, users);
  const queryParser = new QueryParser();
  const slashCommands = new SlashCommandService(deps.store, graphs, users, sandbox, queryParser);
  const signIn = new SignInService(deps.store, graphs, users, deps.logger, {
    cliClientId: deps.config.WSM_CLI_CLIENT_ID, accessTokenTtl: deps.config.WSM_ACCESS_TOKEN_TTL, upstreamIssuer: deps.config.WSM_OIDC_ISSUER,
  });
  const { secretsKey: _key, ...rest } = deps;
  void _key;
  return { ...rest, graphs, users, workspaces, packages, extensions, iam, sandbox, slashCommands, apiKeys, hostedRegistry, queryParser, secrets, signIn,
    closers: [() => sandbox.close(), () => queryParser.close()] };
}

/** Collects the routes of every area, in matching order. */
export function buildRegistry(services: Services): ApiRegistry {
  const registry = new ApiRegistry();
  registry.add(...workspaceRoutes(services.workspaces));
  registry.add(...transferRoutes(new WorkspaceTransfer(services.store, services.graphs, services.workspaces, services.users),
    { maxImportBytes: services.config.WSM_MAX_IMPORT_BYTES }));
  registry.add(...packageRoutes(services.workspaces, services.packages, {
    maxUploadBytes: services.config.WSM_MAX_UPLOAD_BYTES, statuses: new StatusPresenter(services.config.WSM_STATUS_CASE),
    streams: { onWrite: (listener) => services.store.onWrite(listener), maxPerUser: services.config.WSM_MAX_EVENT_STREAMS },
  }));
  registry.add(...extensionRoutes(services.workspaces, services.extensions));
  registry.add(...iamRoutes(services.workspaces, services.iam));
  registry.add(...slashCommandRoutes(services.slashCommands, services.workspaces, services.users));
  registry.add(...apiKeyRoutes(services.apiKeys));
  registry.add(...signInApiRoutes(services.signIn));
  registry.add(...mcpRoutes({ commands: services.slashCommands, sandbox: services.sandbox, parser: services.queryParser, maxBodyBytes: services.config.WSM_MAX_BODY_BYTES }));
  registry.add(...secretsRoutes(services.secrets));
  registry.add(...registryRoutes(services.hostedRegistry, { maxUploadBytes: services.config.WSM_MAX_UPLOAD_BYTES }));
  registry.add(...sparqlRoutes(services.sandbox, services.workspaces, services.config.WSM_MAX_BODY_BYTES, services.queryParser));
  return registry;
}

/**
 * Wiring only: middleware, routes, docs, error handling. Answers the
 * server's request listener: a request of an API route (found in the
 * radix tree of `ApiRegistry.mount`) goes straight to its route, every
 * other request to the Express app.
 */
export function createApp(services: Services, options: {
  /** The API's requests wait while connections are being accepted (http/accept-first.ts); the server reports each accept to it. */
  acceptFirst?: AcceptFirst;
} = {}): RequestListener {
  const { config, logger } = services;
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  const logRequest = requestLogger(logger, (res, err) => (err || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'warn' : 'info'));
  const countRequest = requestMetrics();
  app.use(logRequest);
  app.use(countRequest);

  const registry = buildRegistry(services);
  const openapi = registry.openapi({ title: 'Workspace management service', version: '1.0.0', license: { name: 'Apache-2.0', identifier: 'Apache-2.0' } });
  const authenticate = async (req: Request): Promise<AuthContext> => {
    // An API key instead of a bearer token (docs/iam.md, "API keys"); a bearer token wins when both are sent.
    const apiKey = req.headers['x-api-key'];
    if (req.headers.authorization === undefined && typeof apiKey === 'string') return services.apiKeys.verify(apiKey);
    // services.verify remembers verified tokens until their expiry (src/auth/tokens.ts).
    const auth = await services.verify(bearerToken(req.headers.authorization));
    // Most requests change nothing: the user record already says what the token says.
    if (!await services.users.isCurrent(auth.username, auth.profile)) await services.users.upsert(auth.username, auth.profile);
    return auth;
  };

  const router = express.Router();
  const authorize = async (auth: AuthContext, access: Access, segment: string | undefined): Promise<WorkspaceAccess | undefined> => {
    if (access === 'system-admin') {
      if (!auth.systemAdmin) throw forbidden('Only system administrators may do this');
      return undefined;
    }
    if (segment === undefined) throw new Error('a route declaring workspace access needs a {workspace} parameter');
    return access === 'admin' ? services.workspaces.requireAdmin(auth, segment) : services.workspaces.requireMember(auth, segment);
  };
  const dispatcher = registry.mount(router, { jsonLimit: config.WSM_MAX_BODY_BYTES, authenticate, authorize });

  // Anonymous, and tells nothing but whether the service answers and can
  // save changes: 503 while the store cannot make writes durable
  // (docs/store.md, "Durability").
  app.get('/health', (_req, res) => {
    const store = services.store.health?.();
    if (store && !store.writable) {
      res.setHeader('Retry-After', String(store.retryAfterSeconds ?? 1));
      const message = store.readable === false
        ? 'The service cannot reach its storage'
        : 'The service answers reads but cannot save changes: its storage cannot be written';
      res.status(503).json({ success: false, error: { code: 'STORE_UNAVAILABLE', message } });
      return;
    }
    res.json({ success: true, data: { status: 'ok' } });
  });

  const store = services.store;
  // Placement (docs/cluster.md, "Placement"): a request naming a workspace another instance holds is forwarded there.
  const routing = placementRouting(services);
  const metrics = serviceMetrics({
    quads: () => services.store.size(),
    storeVersion: () => services.store.version,
    sandbox: () => services.sandbox.stats(),
    ...(store instanceof ClusterStore ? { cluster: { residency: () => store.residencyStats(), lagRecords: () => store.lagRecords(), counts: () => ({ headLookups: store.headLookups, headConflicts: store.headConflicts, ...store.appends }), placement: () => placementFigures(store, routing) } } : {}),
  });
  app.get('/metrics', (req, res, next) => {
    authenticate(req).then(async (auth) => {
      if (!auth.systemAdmin) throw forbidden('Only system administrators may read the metrics');
      const { contentType, body } = await renderMetrics(metrics);
      res.type(contentType).send(body);
    }).catch(next);
  });

  app.get('/api/v1/openapi.json', (_req, res) => { res.json(openapi); });
  // Swagger UI's page has inline style blocks and sets style attributes.
  const docsPolicy = pagePolicy("style-src 'self' 'unsafe-inline'");
  const docsHeaders: RequestHandler = (_req, res, next) => { res.setHeader('Content-Security-Policy', docsPolicy); next(); };
  app.use('/docs', docsHeaders, swaggerUi.serve, swaggerUi.setup(openapi, { customSiteTitle: 'Workspace service API' }));
  // The web console: static files, bundled on first request (src/console/assets.ts).
  app.use(consoleRouter());
  // Sign-in: discovery documents, the sign-in page, /userinfo and the OpenID provider's endpoints (src/sign-in).
  app.use(signInRouter({ config, signIn: services.signIn, users: services.users, authenticate }));

  app.use(router);
  // Unknown paths still need a valid token, so probing reveals nothing.
  app.use((req, _res, next) => { authenticate(req).then(() => next(), next); });
  // A path of the API with another method: 405 naming the methods it has (RFC 9110, section 15.5.6).
  app.use((req, res, next) => {
    const allow = dispatcher.allowed(req);
    if (allow.length === 0) return next();
    res.setHeader('Allow', allow.join(', '));
    next(new AppError('METHOD_NOT_ALLOWED', `${req.method} is not a method of ${req.path}; it answers ${allow.join(', ')}`));
  });
  app.use(notFoundHandler);
  const handleError = errorHandler(logger, challengeFor({ config, signIn: services.signIn }));
  app.use(handleError);

  /** The end of an API route's chain: its error, or (no middleware answered) a 404, answered as the app would. */
  const finish = (req: Request, res: Response) => {
    const fail = (err: unknown): void => {
      try {
        handleError(err, req, res, () => {});
      } catch {
        if (!res.headersSent) res.status(500).end();
        else res.destroy();
      }
    };
    return (err?: unknown): void => {
      if (err === undefined) void notFoundHandler(req, res, fail);
      else fail(err);
    };
  };
  const listener: RequestListener = (incoming, outgoing) => {
    setSecurityHeaders(outgoing);
    const found = dispatcher.find(incoming);
    if (!found) {
      app(incoming, outgoing);
      return;
    }
    // The API's routes skip the app's router (its layers cost a tenth of a cached read's time): what Express's
    // app.handle sets before its router runs, then the app's two first middlewares, then the route.
    const req = incoming as Request;
    const res = outgoing as Response;
    req.res = res;
    res.req = req;
    Object.setPrototypeOf(req, app.request);
    Object.setPrototypeOf(res, app.response);
    res.locals ??= Object.create(null) as Record<string, unknown>;
    req.originalUrl ??= req.url;
    req.baseUrl = '';
    const done = finish(req, res);
    // One whose client left while it waited is not run (its log line says it was aborted).
    const run = () => { if (!res.destroyed) dispatcher.run(found, req, res, done); };
    const { acceptFirst } = options;
    logRequest(req, res, () => countRequest(req, res, acceptFirst ? () => acceptFirst.run(run) : run));
  };
  if (!(services.store instanceof ClusterStore)) return listener;
  // Placement (docs/cluster.md): a request naming a workspace another instance holds goes there.
  const routed: RequestListener = routing ? (incoming, outgoing) => routing.route(incoming, outgoing, () => listener(incoming, outgoing)) : listener;
  // A store whose replica may lag behind other instances checks the log before reading: once per request
  // (src/store/read-session.ts). Only there: the session's context costs every promise a little.
  return (incoming, outgoing) => { inReadSession(() => routed(incoming, outgoing)); };
}

function placementFigures(store: ClusterStore, routing: ReturnType<typeof placementRouter> | undefined): PlacementFigures | undefined {
  if (!store.placement || !routing) return undefined;
  const { forwarded, failed, connections, retries, handovers } = routing.stats;
  return { ...store.placement.counts(), forwarded, forwardFailures: failed, forwardConnections: connections, forwardRetries: retries, handovers };
}

/** With WSM_CLUSTER_PLACEMENT=lease, what sends a request to its workspace's owner; else undefined. */
function placementRouting(services: Services): ReturnType<typeof placementRouter> | undefined {
  const store = services.store;
  if (!(store instanceof ClusterStore) || !store.placement) return undefined;
  const routing = placementRouter({
    placement: store.placement, logger: services.logger, available: () => store.health().writable,
    resolve: async (segment) => (await services.workspaces.find(segment))?.id,
  });
  services.closers.push(() => routing.close());
  return routing;
}
