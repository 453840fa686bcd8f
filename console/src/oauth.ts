import { sha256 } from '@noble/hashes/sha2.js';
import { setCredential } from './api.js';

/**
 * Signing in through the service's sign-in page: OAuth 2 authorization code
 * with PKCE (S256) as the public client `wsm-console`, whose redirect is
 * this page. The verifier and state wait in this tab's sessionStorage while
 * the browser is away; the access token becomes the console's credential,
 * as a pasted token would. SHA-256 comes from a library, so plain http
 * origins (where `crypto.subtle` is missing) work too.
 */
const CLIENT_ID = 'wsm-console';
const PENDING = 'wsm-console-oauth';

interface Discovery { authorization_endpoint: string; token_endpoint: string }

const base64url = (bytes: Uint8Array): string =>
  btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');

const redirectUri = (): string => `${location.origin}/console/`;

/** The provider's discovery document, or null when the service signs in nowhere itself (an upstream issuer). */
export async function discovery(): Promise<Discovery | null> {
  try {
    const res = await fetch('/.well-known/openid-configuration', { headers: { Accept: 'application/json' } });
    if (!res.ok) return null;
    const doc = await res.json() as Partial<Discovery>;
    return typeof doc.authorization_endpoint === 'string' && typeof doc.token_endpoint === 'string' ? doc as Discovery : null;
  } catch {
    return null;
  }
}

/** Leaves for the sign-in page. */
export function beginSignIn(endpoints: Discovery): void {
  const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
  const state = base64url(crypto.getRandomValues(new Uint8Array(16)));
  sessionStorage.setItem(PENDING, JSON.stringify({ verifier, state, token: endpoints.token_endpoint }));
  const url = new URL(endpoints.authorization_endpoint);
  url.search = new URLSearchParams({
    client_id: CLIENT_ID,
    response_type: 'code',
    redirect_uri: redirectUri(),
    scope: 'openid profile email',
    code_challenge: base64url(sha256(new TextEncoder().encode(verifier))),
    code_challenge_method: 'S256',
    state,
  }).toString();
  location.assign(url.href);
}

/**
 * On the way back (`?code=...&state=...` or `?error=...`): exchanges the
 * code and keeps the access token. Answers null when this load is no
 * return from sign-in, else what to tell the person (empty: signed in).
 */
export async function finishSignIn(): Promise<string | null> {
  const params = new URLSearchParams(location.search);
  if (!params.has('code') && !params.has('error')) return null;
  const pending = JSON.parse(sessionStorage.getItem(PENDING) ?? 'null') as { verifier: string; state: string; token: string } | null;
  sessionStorage.removeItem(PENDING);
  history.replaceState(null, '', `${location.pathname}#/sign-in`);
  if (params.has('error')) return `Sign-in ended: ${params.get('error_description') ?? params.get('error')}`;
  if (!pending || params.get('state') !== pending.state) return 'Sign-in ended: this answer belongs to no sign-in of this tab; sign in again.';
  const res = await fetch(pending.token, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
    body: new URLSearchParams({
      grant_type: 'authorization_code', client_id: CLIENT_ID, code: params.get('code') ?? '', redirect_uri: redirectUri(), code_verifier: pending.verifier,
    }),
  });
  const answer = await res.json().catch(() => ({})) as { access_token?: string; error?: string; error_description?: string };
  if (!res.ok || !answer.access_token) return `Sign-in failed: ${answer.error_description ?? answer.error ?? res.statusText}`;
  setCredential({ kind: 'token', value: answer.access_token });
  history.replaceState(null, '', `${location.pathname}#/workspaces`);
  return '';
}
