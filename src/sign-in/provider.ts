import Provider, { errors, type Configuration, type KoaContextWithOIDC, type ClientMetadata } from 'oidc-provider';
import type { StoreAdapterFactory } from './store-adapter.js';
import { SIGNING_ALG, type SignInKeys } from './keys.js';
import { renderProviderError } from './pages.js';

/** The console's client: a public web client whose redirect is the console's page. */
export const CONSOLE_CLIENT_ID = 'wsm-console';
/** The paths of the command-line client's loopback redirects; any port is accepted (RFC 8252, section 7.3). */
export const CLI_REDIRECT_URIS = ['http://127.0.0.1/callback', 'http://localhost/callback', 'http://[::1]/callback'];
/** Where the provider sends a browser to sign in: `/sign-in/{uid}` (src/sign-in/routes.ts). */
export const INTERACTION_PATH = '/sign-in/';
/** The scope a resource (the API) grants: access tokens carry no finer rights; the caller's roles decide. */
const API_SCOPE = 'api';

/** What the provider needs to know of a user: their claims, or undefined when they may not sign in. */
export type AccountClaims = (username: string) => Promise<Record<string, unknown> & { sub: string; wsm_system_admin: boolean } | undefined>;

export interface ProviderSettings {
  /** The service's public address, without a trailing slash: the issuer, the API's audience. */
  issuer: string;
  cliClientId: string;
  accessTokenTtl: number;
  keys: SignInKeys;
  adapters: StoreAdapterFactory;
  claims: AccountClaims;
}

/** The resource identifier of the whole service (every endpoint is one resource server). */
export const resourceOf = (issuer: string): string => `${issuer}/`;

/**
 * The OpenID provider (`oidc-provider`): authorization code with PKCE (S256)
 * for public clients, refresh tokens, and JWT access tokens (RFC 9068) for
 * the service, whose `aud` is the issuer and whose claims are those of the
 * service's own tokens (`preferred_username`, `wsm_system_admin`). People
 * sign in on `/sign-in/{uid}`; first-party clients get their grant without a
 * consent page. `/userinfo` is the service's own route (it answers for
 * access tokens with an audience, which the library's does not).
 */
export function createProvider(settings: ProviderSettings): Provider {
  const { issuer } = settings;
  const resource = resourceOf(issuer);
  const common: Partial<ClientMetadata> = {
    token_endpoint_auth_method: 'none',
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    id_token_signed_response_alg: SIGNING_ALG,
  };
  const config: Configuration = {
    adapter: (name: string) => settings.adapters.adapter(name),
    jwks: { keys: settings.keys.jwks as NonNullable<Configuration['jwks']>['keys'] },
    cookies: { keys: settings.keys.cookieKeys },
    clients: [
      { ...common, client_id: settings.cliClientId, application_type: 'native', redirect_uris: CLI_REDIRECT_URIS },
      { ...common, client_id: CONSOLE_CLIENT_ID, application_type: 'web', redirect_uris: [`${issuer}/console/`] },
    ],
    clientDefaults: { id_token_signed_response_alg: SIGNING_ALG },
    responseTypes: ['code'],
    pkce: { required: () => true },
    scopes: ['openid', 'offline_access', 'profile', 'email', API_SCOPE],
    claims: {
      openid: ['sub'],
      profile: ['preferred_username', 'name', 'given_name', 'family_name', 'website'],
      email: ['email', 'email_verified'],
    },
    conformIdTokenClaims: false,
    routes: {
      authorization: '/oauth2/auth',
      token: '/oauth2/token',
      jwks: '/.well-known/jwks.json',
      revocation: '/oauth2/revoke',
      userinfo: '/userinfo',
      end_session: '/oauth2/sessions/logout',
    },
    discovery: { userinfo_endpoint: `${issuer}/userinfo` },
    features: {
      devInteractions: { enabled: false },
      userinfo: { enabled: false },
      rpInitiatedLogout: { enabled: false },
      revocation: { enabled: true },
      pushedAuthorizationRequests: { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => resource,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx, indicator) => {
          if (indicator !== resource && !indicator.startsWith(resource)) throw new errors.InvalidTarget(`the only resource here is ${resource} (and the addresses under it)`);
          return {
            scope: API_SCOPE,
            audience: issuer,
            accessTokenFormat: 'jwt',
            accessTokenTTL: settings.accessTokenTtl,
            jwt: { sign: { alg: SIGNING_ALG } },
          };
        },
      },
    },
    ttl: {
      AccessToken: settings.accessTokenTtl,
      AuthorizationCode: 60,
      IdToken: settings.accessTokenTtl,
      Interaction: 3600,
      Session: 14 * 86_400,
      Grant: 30 * 86_400,
      RefreshToken: 30 * 86_400,
    },
    // Sign-in is for the service's own clients, so refresh tokens come with every code, offline_access or not.
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    expiresWithSession: async () => false,
    // Browsers send Origin on the console's POSTs: only this origin is let through (the command-line client is no browser).
    clientBasedCORS: (_ctx, origin) => origin === new URL(issuer).origin,
    interactions: { url: async (_ctx, interaction) => `${INTERACTION_PATH}${interaction.uid}` },
    findAccount: async (_ctx, sub) => {
      const claims = await settings.claims(sub);
      if (!claims) return undefined;
      return { accountId: sub, claims: async () => claims };
    },
    extraTokenClaims: async (_ctx, token) => {
      if (token.kind !== 'AccessToken' || !token.accountId) return undefined;
      const claims = await settings.claims(token.accountId);
      if (!claims) throw new errors.InvalidGrant('the account can no longer sign in');
      return { preferred_username: token.accountId, ...(claims.wsm_system_admin ? { wsm_system_admin: true } : {}) };
    },
    loadExistingGrant: async (ctx: KoaContextWithOIDC) => {
      const { client, session, provider } = ctx.oidc;
      if (!client || !session?.accountId) return undefined;
      const grantId = ctx.oidc.result?.consent?.grantId ?? session.grantIdFor(client.clientId);
      if (grantId) {
        const existing = await provider.Grant.find(grantId);
        if (existing) return existing;
      }
      // The service's own clients: what they ask for is granted without a consent page.
      const grant = new provider.Grant({ clientId: client.clientId, accountId: session.accountId });
      grant.addOIDCScope('openid offline_access profile email');
      grant.addOIDCClaims(['sub', 'preferred_username', 'name', 'given_name', 'family_name', 'website', 'email', 'email_verified']);
      grant.addResourceScope(resource, API_SCOPE);
      const requested = ctx.oidc.params?.resource;
      for (const r of Array.isArray(requested) ? requested : typeof requested === 'string' ? [requested] : []) grant.addResourceScope(r as string, API_SCOPE);
      await grant.save();
      return grant;
    },
    renderError: async (ctx, out) => {
      ctx.type = 'html';
      ctx.body = renderProviderError(out);
    },
  };
  const provider = new Provider(issuer, config);
  // Behind a proxy that terminates TLS, the provider must trust X-Forwarded-Proto to see https.
  provider.proxy = issuer.startsWith('https:');
  return provider;
}
