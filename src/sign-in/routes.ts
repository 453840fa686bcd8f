import { readFileSync } from 'node:fs';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { AuthContext } from '../auth/context.js';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import type { UserService } from '../users/service.js';
import { resourceOf, INTERACTION_PATH, CONSOLE_CLIENT_ID } from './provider.js';
import { renderMessagePage, renderSignInPage } from './pages.js';
import type { SignInService } from './service.js';

const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/**
 * Paths the OpenID provider answers itself (any other path is the
 * service's, and needs a token like every unknown path). Signing in as
 * someone else in a browser signed in already ends that session through
 * the provider's logout confirmation.
 */
const PROVIDER_PATHS = /^\/(oauth2\/(auth(\/[\w-]+)?|token|revoke|sessions\/logout(\/confirm|\/success)?)|\.well-known\/(openid-configuration|jwks\.json))$/;

/** The sign-in page's policy: no script; the form may go to this service and, after it, to the client's redirect. */
const pagePolicy = (formTargets: string[]) => [
  "default-src 'none'", "style-src 'self'", "img-src 'self'", "frame-ancestors 'none'", "base-uri 'none'",
  `form-action 'self'${formTargets.map((t) => ` ${t}`).join('')}`,
].join('; ');

/**
 * The policy of the provider's own answers. Its pages (the library's, with
 * no user text: a session switch that submits itself, the logout
 * confirmation) carry inline scripts and styles, and their forms end at
 * this service or a loopback client.
 */
const PROVIDER_POLICY = [
  "default-src 'none'", "script-src 'unsafe-inline'", "style-src 'self' 'unsafe-inline'", "img-src 'self'", "frame-ancestors 'none'", "base-uri 'none'",
  "form-action 'self' http://127.0.0.1:* http://localhost:*",
].join('; ');

const sendPage = (res: Response, status: number, html: string, formTargets: string[] = []): void => {
  res.status(status).set({
    'Content-Type': 'text/html; charset=utf-8',
    'Content-Security-Policy': pagePolicy(formTargets),
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
  }).send(html);
};

export interface SignInRouteDeps {
  config: Config;
  signIn: SignInService;
  users: UserService;
  /** The service's credential check (bearer token or API key), as every endpoint runs it. */
  authenticate: (req: Request) => Promise<AuthContext>;
}

/** The issuer people and clients sign in at: this service's provider, or the upstream issuer. */
export const issuerOf = (deps: Pick<SignInRouteDeps, 'config' | 'signIn'>): string | undefined =>
  deps.config.WSM_OIDC_ISSUER ?? deps.signIn.provider?.issuer;

/**
 * The `WWW-Authenticate` of a 401: on the MCP endpoint it names the
 * protected-resource metadata (RFC 9728, as MCP clients expect), elsewhere
 * plain `Bearer`.
 */
export function challengeFor(deps: Pick<SignInRouteDeps, 'config' | 'signIn'>): (req: Request) => string {
  return (req) => {
    const base = deps.signIn.provider?.issuer ?? deps.config.WSM_PUBLIC_URL ?? `${req.protocol}://${req.get('host') ?? 'localhost'}`;
    const mcp = /^\/mcp\/[^/?]+/.exec(req.path);
    if (!mcp) return 'Bearer';
    return `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource${encodeURI(mcp[0])}"`;
  };
}

/**
 * Sign-in's routes, all without a token: the ecosystem's discovery
 * document, the protected-resource metadata, the sign-in page, `/userinfo`
 * (with a token), and the provider's own endpoints (`/oauth2/...`, its
 * discovery and keys).
 */
export function signInRouter(deps: SignInRouteDeps): Router {
  const { config, signIn } = deps;
  const router = express.Router({ strict: true });
  const base = (req: Request): string => signIn.provider?.issuer ?? config.WSM_PUBLIC_URL ?? `${req.protocol}://${req.get('host') ?? 'localhost'}`;

  router.get('/.well-known/poliglot.json', (req, res) => {
    res.json({
      deployment_name: config.WSM_DEPLOYMENT_NAME,
      deployment_version: PACKAGE_VERSION,
      oauth: { issuer: issuerOf(deps) ?? base(req), cli_client_id: config.WSM_CLI_CLIENT_ID },
      ...(config.WSM_MIN_CLI_VERSION ? { min_cli_version: config.WSM_MIN_CLI_VERSION } : {}),
    });
  });

  const resourceMetadata = (req: Request, res: Response) => {
    const root = base(req);
    const suffix = (req.params as { rest?: string[] }).rest;
    res.json({
      resource: suffix ? `${root}/${suffix.map(encodeURIComponent).join('/')}` : resourceOf(root),
      authorization_servers: [issuerOf(deps) ?? root],
      bearer_methods_supported: ['header'],
      resource_name: config.WSM_DEPLOYMENT_NAME,
    });
  };
  router.get('/.well-known/oauth-protected-resource', resourceMetadata);
  router.get('/.well-known/oauth-protected-resource/*rest', resourceMetadata);

  router.get('/userinfo', (req, res, next) => {
    deps.authenticate(req).then(async (auth) => {
      const user = await deps.users.get({ username: auth.username });
      const name = [user?.firstName, user?.lastName].filter(Boolean).join(' ');
      res.set('Cache-Control', 'no-store').json({
        sub: auth.username,
        preferred_username: auth.username,
        wsm_system_admin: auth.systemAdmin,
        ...(user?.email ? { email: user.email, email_verified: user.emailVerified } : {}),
        ...(user?.firstName ? { given_name: user.firstName } : {}),
        ...(user?.lastName ? { family_name: user.lastName } : {}),
        ...(name ? { name } : {}),
        ...(user?.website ? { website: user.website } : {}),
      });
    }).catch(next);
  });

  if (!signIn.local) {
    // People sign in at the upstream issuer: its authorization endpoint, with the request as it came.
    router.get(['/oauth2/auth', '/sign-in'], (req, res, next) => {
      upstreamAuthorizationEndpoint(config).then((endpoint) => {
        const url = new URL(endpoint);
        const query = req.originalUrl.indexOf('?');
        if (query >= 0) url.search = req.originalUrl.slice(query);
        res.redirect(302, url.href);
      }).catch((err: unknown) => next(new AppError('SERVICE_UNAVAILABLE', `Sign-in goes to ${config.WSM_OIDC_ISSUER}, which cannot be reached now: ${err instanceof Error ? err.message : String(err)}`)));
    });
    return router;
  }

  const form = express.urlencoded({ extended: false, limit: '8kb', parameterLimit: 10 });
  router.get(`${INTERACTION_PATH}:uid`, (req, res, next) => { showSignIn(deps, req, res).catch(next); });
  router.post(`${INTERACTION_PATH}:uid`, form, (req, res, next) => { submitSignIn(deps, req, res).catch(next); });

  router.use((req: Request, res: Response, next: NextFunction) => {
    const running = signIn.provider;
    if (!running || !PROVIDER_PATHS.test(req.path)) { next(); return; }
    // The provider's own pages (the logout confirmation) post a form to this service, which redirects on to a client.
    res.setHeader('Content-Security-Policy', PROVIDER_POLICY);
    void running.handle(req, res);
  });
  return router;
}

type Interaction = Awaited<ReturnType<NonNullable<SignInService['provider']>['provider']['interactionDetails']>>;

/** The interaction of this browser, or a page saying it is gone (expired, another browser, already finished). */
async function interactionOf(deps: SignInRouteDeps, req: Request, res: Response): Promise<Interaction | undefined> {
  const running = deps.signIn.provider!;
  try {
    const interaction = await running.provider.interactionDetails(req, res);
    if (interaction.uid !== (req.params as { uid: string }).uid) throw new Error('another sign-in is under way in this browser');
    return interaction;
  } catch {
    sendPage(res, 400, renderMessagePage('Sign-in expired', 'This sign-in is no longer under way (it expired, finished, or began in another browser).',
      'Start again from the application you were signing in to.'));
    return undefined;
  }
}

const clientName = (clientId: string): string => (clientId === CONSOLE_CLIENT_ID ? 'the workspace console' : clientId);

/** Where the form's answer may finally go: the client's redirect (loopback for the command-line client). */
const formTargets = (interaction: Interaction): string[] => {
  const redirect = interaction.params.redirect_uri;
  const origin = typeof redirect === 'string' ? URL.parse(redirect)?.origin : undefined;
  return origin && origin !== 'null' ? [origin] : [];
};

/** Who is signed in already in this browser (a command-line client asks them to confirm: RFC 8252 clients get no silent sign-in). */
const signedInAs = (interaction: Interaction): string | undefined =>
  interaction.prompt.name === 'consent' ? interaction.session?.accountId : undefined;

const formOf = (interaction: Interaction, extra: { username?: string; error?: string } = {}) => ({
  action: `${INTERACTION_PATH}${interaction.uid}`, client: clientName(String(interaction.params.client_id)), signedInAs: signedInAs(interaction), ...extra,
});

async function showSignIn(deps: SignInRouteDeps, req: Request, res: Response): Promise<void> {
  const interaction = await interactionOf(deps, req, res);
  if (!interaction) return;
  sendPage(res, 200, renderSignInPage(formOf(interaction)), formTargets(interaction));
}

/** The grant of what the service's own clients ask for: no consent page (they act for the person on this service only). */
async function grantFor(provider: NonNullable<SignInService['provider']>['provider'], interaction: Interaction, accountId: string): Promise<string> {
  const clientId = String(interaction.params.client_id);
  // The browser's grant for this client, unless someone else signs in now.
  const existing = interaction.grantId ? await provider.Grant.find(interaction.grantId) : undefined;
  const grant = existing?.accountId === accountId ? existing : new provider.Grant({ clientId, accountId });
  const { scope, resource } = interaction.params as { scope?: unknown; resource?: unknown };
  grant.addOIDCScope(typeof scope === 'string' ? scope : 'openid');
  grant.addOIDCClaims(['sub', 'preferred_username', 'name', 'given_name', 'family_name', 'website', 'email', 'email_verified']);
  const requested = (Array.isArray(resource) ? resource as unknown[] : [resource]).filter((r): r is string => typeof r === 'string');
  for (const r of [resourceOf(provider.issuer), ...requested]) grant.addResourceScope(r, 'api');
  return grant.save();
}

async function submitSignIn(deps: SignInRouteDeps, req: Request, res: Response): Promise<void> {
  const interaction = await interactionOf(deps, req, res);
  if (!interaction) return;
  const { provider } = deps.signIn.provider!;
  const body = (req.body ?? {}) as Record<string, unknown>;
  if (body.cancel !== undefined) {
    await provider.interactionFinished(req, res, { error: 'access_denied', error_description: 'The person cancelled the sign-in' }, { mergeWithLastSubmission: false });
    return;
  }
  const current = signedInAs(interaction);
  if (body.continue !== undefined && current) {
    await provider.interactionFinished(req, res, { consent: { grantId: await grantFor(provider, interaction, current) } }, { mergeWithLastSubmission: true });
    return;
  }
  const username = typeof body.username === 'string' ? body.username.trim() : '';
  const password = typeof body.password === 'string' ? body.password : '';
  const again = (status: number, error: string) => sendPage(res, status, renderSignInPage(formOf(interaction, { username, error })), formTargets(interaction));
  if (!username || !password || username.length > 256 || password.length > 1024) { again(400, 'Enter your user name and password.'); return; }
  const address = req.socket.remoteAddress ?? 'unknown';
  const { attempts, accounts } = deps.signIn;
  const wait = attempts.waitFor(username, address);
  if (wait > 0) {
    res.set('Retry-After', String(Math.ceil(wait / 1000)));
    again(429, `Too many failed sign-ins; try again in ${Math.ceil(wait / 60_000)} minute(s).`);
    return;
  }
  const account = await accounts.verify(username, password);
  if (!account) {
    attempts.failed(username, address);
    again(401, 'The user name or password is not right.');
    return;
  }
  attempts.succeeded(username);
  // Signing in is the person's interaction: what the client asked for is granted with it.
  const grantId = await grantFor(provider, interaction, account.username);
  await provider.interactionFinished(req, res, { login: { accountId: account.username }, consent: { grantId } }, { mergeWithLastSubmission: false });
}

let upstream: Promise<string> | undefined;

/** The upstream issuer's authorization endpoint, from its discovery document (read once). */
function upstreamAuthorizationEndpoint(config: Config): Promise<string> {
  upstream ??= (async () => {
    const url = `${config.WSM_OIDC_ISSUER!.replace(/\/$/, '')}/.well-known/openid-configuration`;
    const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
    const doc = res.ok ? await res.json() as { authorization_endpoint?: unknown } : {};
    if (typeof doc.authorization_endpoint !== 'string') throw new Error(`the upstream issuer's discovery document (${url}) names no authorization_endpoint`);
    return doc.authorization_endpoint;
  })().catch((err: unknown) => { upstream = undefined; throw err; });
  return upstream;
}
