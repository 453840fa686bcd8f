import { promises as fs } from 'node:fs';
import path from 'node:path';
import {
  SignJWT, jwtVerify, decodeJwt, createRemoteJWKSet, exportJWK, importJWK, generateKeyPair,
  type JWTPayload, type JWK, type CryptoKey, type JWTVerifyGetKey,
} from 'jose';
import { unauthorized } from '../errors.js';
import type { AuthContext } from './context.js';

/**
 * Bearer tokens are JWTs (docs/iam.md). Two modes:
 * - embedded issuer: an ES256 key pair kept in the data directory signs
 *   tokens made by `wsm token`;
 * - OpenID Connect: tokens of WSM_OIDC_ISSUER, verified against its JWKS.
 * Algorithms are an allow-list; issuer, audience, expiry and not-before are
 * checked by jose.
 */
export const EMBEDDED_ISSUER = 'urn:wsm:embedded-issuer';
export const EMBEDDED_AUDIENCE = 'wsm';
const EMBEDDED_ALG = 'ES256';
const OIDC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];
const KEY_FILE = 'issuer-key.json';

interface StoredKey { privateJwk: JWK; publicJwk: JWK; kid: string }

/** Loads the embedded issuer's key from the data dir, creating it on first use. */
export async function loadIssuerKey(dataDir: string): Promise<{ privateKey: CryptoKey; publicKey: CryptoKey; kid: string }> {
  const file = path.join(dataDir, KEY_FILE);
  let stored: StoredKey;
  try {
    stored = JSON.parse(await fs.readFile(file, 'utf8')) as StoredKey;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    const { privateKey, publicKey } = await generateKeyPair(EMBEDDED_ALG, { extractable: true });
    const kid = crypto.randomUUID();
    stored = { privateJwk: await exportJWK(privateKey), publicJwk: await exportJWK(publicKey), kid };
    await fs.mkdir(dataDir, { recursive: true });
    // Unique per call: two servers of one process (tests) may create it at the same moment.
    const tmp = `${file}.${process.pid}.${crypto.randomUUID()}.tmp`;
    await fs.writeFile(tmp, JSON.stringify(stored), { mode: 0o600, flag: 'wx' });
    try {
      await fs.link(tmp, file); // fails if another process created it meanwhile
    } catch (linkErr) {
      if ((linkErr as NodeJS.ErrnoException).code !== 'EEXIST') throw linkErr;
      stored = JSON.parse(await fs.readFile(file, 'utf8')) as StoredKey;
    } finally {
      await fs.rm(tmp, { force: true });
    }
  }
  return {
    privateKey: (await importJWK(stored.privateJwk, EMBEDDED_ALG)) as CryptoKey,
    publicKey: (await importJWK(stored.publicJwk, EMBEDDED_ALG)) as CryptoKey,
    kid: stored.kid,
  };
}

/**
 * Several instances sign and verify with one key (the cluster store): the
 * key this data directory holds (created when missing) is proposed to
 * `share`, which answers the key every instance agreed on (the first one
 * proposed); when it is another, this directory's key file is replaced by
 * it. Idempotent, and safe for instances starting at the same moment.
 */
export async function adoptSharedIssuerKey(dataDir: string, share: (proposed: string) => Promise<string>): Promise<void> {
  await loadIssuerKey(dataDir);
  const file = path.join(dataDir, KEY_FILE);
  const local = await fs.readFile(file, 'utf8');
  const agreed = await share(local);
  if (agreed === local) return;
  JSON.parse(agreed) as StoredKey;
  const tmp = `${file}.${process.pid}.shared.tmp`;
  await fs.writeFile(tmp, agreed, { mode: 0o600 });
  await fs.rename(tmp, file);
}

export interface MintOptions {
  systemAdmin?: boolean;
  email?: string;
  firstName?: string;
  lastName?: string;
  ttlSeconds: number;
}

/** Signs a token of the embedded issuer. */
export async function mintToken(dataDir: string, username: string, options: MintOptions): Promise<string> {
  const key = await loadIssuerKey(dataDir);
  const claims: JWTPayload = { preferred_username: username };
  if (options.systemAdmin) claims.wsm_system_admin = true;
  if (options.email) claims.email = options.email;
  if (options.firstName) claims.given_name = options.firstName;
  if (options.lastName) claims.family_name = options.lastName;
  return new SignJWT(claims)
    .setProtectedHeader({ alg: EMBEDDED_ALG, kid: key.kid, typ: 'JWT' })
    .setIssuer(EMBEDDED_ISSUER)
    .setAudience(EMBEDDED_AUDIENCE)
    .setSubject(username)
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + options.ttlSeconds)
    .sign(key.privateKey);
}

export interface VerifierSettings {
  dataDir: string;
  oidcIssuer?: string;
  oidcAudience?: string;
  oidcJwksUrl?: string;
  adminClaim: string;
  adminValue: string;
  /** Milliseconds since the epoch; tests move it. Default `Date.now`. */
  clock?: () => number;
  /** Most verified tokens remembered (default 1000; 0 turns the cache off). */
  cacheSize?: number;
  /**
   * The service's own OpenID provider (src/sign-in), once it runs: its
   * access tokens are accepted too, with its issuer as issuer and audience
   * and its keys.
   */
  localIssuer?: () => LocalIssuer | undefined;
}

export interface LocalIssuer {
  issuer: string;
  key: JWTVerifyGetKey;
}

/** Longest a verified token is remembered, even when it expires later. */
const CACHE_MAX_AGE_MS = 5 * 60_000;
/** jose's clockTolerance, in seconds. */
const CLOCK_TOLERANCE_S = 5;

/**
 * Verified tokens, by their exact text, until their expiry: verifying an
 * ES256 signature on every request costs more than the rest of a read. An
 * entry serves only while the clock is before the token's `exp` (and at most
 * CACHE_MAX_AGE_MS after its verification); past that the token goes through
 * full verification again, which refuses it once expired. Only successful
 * verifications are kept, and only of tokens that carry `exp`.
 */
class VerifiedTokens {
  private readonly entries = new Map<string, { context: AuthContext; until: number }>();
  constructor(private readonly size: number) {}

  get(token: string, now: number): AuthContext | undefined {
    const entry = this.entries.get(token);
    if (!entry) return undefined;
    if (now >= entry.until) {
      this.entries.delete(token);
      return undefined;
    }
    return entry.context;
  }

  set(token: string, context: AuthContext, exp: number | undefined, now: number): void {
    if (this.size <= 0 || typeof exp !== 'number') return;
    const until = Math.min(exp * 1000, now + CACHE_MAX_AGE_MS);
    if (until <= now) return;
    if (this.entries.size >= this.size) {
      // Expired ones first; else the oldest entry.
      for (const [key, value] of this.entries) if (now >= value.until) this.entries.delete(key);
      if (this.entries.size >= this.size) this.entries.delete(this.entries.keys().next().value!);
    }
    this.entries.set(token, { context, until });
  }
}

/** A copy, so a caller changing its context cannot change the cached one. */
const copyContext = (c: AuthContext): AuthContext => ({ ...c, profile: { ...c.profile } });

function readClaim(payload: JWTPayload, dotted: string): unknown {
  let value: unknown = payload;
  for (const part of dotted.split('.')) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

const optionalString = (v: unknown): string | undefined => (typeof v === 'string' && v.length > 0 ? v : undefined);

/** In a `u` regular expression only a surrogate that is not half of a pair matches. */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/** Maps verified claims to the caller (docs/iam.md). */
export function contextFromClaims(payload: JWTPayload, adminClaim: string, adminValue: string): AuthContext {
  const username = optionalString(payload.preferred_username) ?? optionalString(payload.sub);
  if (!username) throw unauthorized('The token names no user (neither preferred_username nor sub)');
  if (username.length > 256 || /[\u0000-\u001f]/.test(username) || LONE_SURROGATE.test(username)) throw unauthorized('The token\'s user name is not acceptable');
  const admin = readClaim(payload, adminClaim);
  const systemAdmin = admin === true || admin === 'true' || (Array.isArray(admin) && admin.includes(adminValue));
  return {
    username,
    systemAdmin,
    profile: {
      email: optionalString(payload.email),
      firstName: optionalString(payload.given_name),
      lastName: optionalString(payload.family_name),
      website: optionalString(payload.website),
      emailVerified: typeof payload.email_verified === 'boolean' ? payload.email_verified : undefined,
    },
  };
}

/** Builds the token verifier for the configured mode. */
export async function createVerifier(settings: VerifierSettings): Promise<(token: string) => Promise<AuthContext>> {
  let key: CryptoKey | JWTVerifyGetKey;
  let issuer: string;
  let audience: string | undefined;
  let algorithms: string[];
  if (settings.oidcIssuer) {
    issuer = settings.oidcIssuer;
    audience = settings.oidcAudience;
    algorithms = OIDC_ALGORITHMS;
    const jwksUrl = settings.oidcJwksUrl ?? `${issuer.replace(/\/$/, '')}/protocol/openid-connect/certs`;
    key = createRemoteJWKSet(new URL(jwksUrl), { timeoutDuration: 5000, cooldownDuration: 30_000 });
  } else {
    issuer = EMBEDDED_ISSUER;
    audience = EMBEDDED_AUDIENCE;
    algorithms = [EMBEDDED_ALG];
    key = (await loadIssuerKey(settings.dataDir)).publicKey;
  }
  const clock = settings.clock ?? Date.now;
  const verified = new VerifiedTokens(settings.cacheSize ?? 1000);
  return async (token: string) => {
    const now = clock();
    const known = verified.get(token, now);
    if (known) return copyContext(known);
    let payload: JWTPayload;
    // A token of the service's own provider names its issuer; anything else is checked as before.
    const local = settings.localIssuer?.();
    const fromLocal = local !== undefined && claimedIssuer(token) === local.issuer;
    try {
      ({ payload } = await jwtVerify(token, (fromLocal ? local.key : key) as CryptoKey, {
        // A token without an expiry would be good for ever (issue 12, item 13): `exp` is required.
        ...(fromLocal ? { issuer: local.issuer, audience: local.issuer, algorithms: [EMBEDDED_ALG] } : { issuer, audience, algorithms }),
        requiredClaims: ['exp'], clockTolerance: CLOCK_TOLERANCE_S, ...(settings.clock ? { currentDate: new Date(now) } : {}),
      }));
    } catch (err) {
      const code = (err as { code?: string }).code;
      const reason =
        code === 'ERR_JWT_EXPIRED' ? 'the token has expired'
        : code === 'ERR_JWT_CLAIM_VALIDATION_FAILED' && (err as { claim?: string; reason?: string }).reason === 'missing'
          ? `the token has no ${(err as { claim?: string }).claim} claim${(err as { claim?: string }).claim === 'exp' ? ' (tokens must expire)' : ''}`
        : code === 'ERR_JWT_CLAIM_VALIDATION_FAILED' ? `the token's ${(err as { claim?: string }).claim ?? 'claims'} claim is not accepted`
        : code === 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED' ? 'the token signature is not valid'
        : code === 'ERR_JOSE_ALG_NOT_ALLOWED' ? 'the token algorithm is not allowed'
        : code === 'ERR_JWKS_NO_MATCHING_KEY' ? 'no key of the issuer matches the token'
        : 'the token is malformed or cannot be verified';
      throw unauthorized(`Invalid bearer token: ${reason}`);
    }
    // The provider's tokens say `wsm_system_admin` whatever claim an upstream issuer would use.
    const context = fromLocal ? contextFromClaims(payload, 'wsm_system_admin', 'true') : contextFromClaims(payload, settings.adminClaim, settings.adminValue);
    verified.set(token, context, payload.exp, now);
    return copyContext(context);
  };
}

/** The `iss` a token claims, read before its signature is checked (to pick the key that checks it); undefined when unreadable. */
function claimedIssuer(token: string): string | undefined {
  try {
    const iss = decodeJwt(token).iss;
    return typeof iss === 'string' ? iss : undefined;
  } catch {
    return undefined;
  }
}

/** Reads `Authorization: Bearer <token>`; 401 when missing or malformed. */
export function bearerToken(header: string | undefined): string {
  if (!header) throw unauthorized('Missing Authorization header; send "Authorization: Bearer <token>" or "X-Api-Key: <key>"');
  const match = /^Bearer\s+([A-Za-z0-9._~+/=-]+)\s*$/i.exec(header);
  if (!match) throw unauthorized('Malformed Authorization header; expected "Bearer <token>"');
  return match[1]!;
}
