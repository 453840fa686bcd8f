import { createHash, randomBytes } from 'node:crypto';

/**
 * The command-line client's sign-in without a browser: the authorization
 * request with PKCE (S256) and a loopback redirect, the sign-in form posted
 * as a browser would (keeping the provider's cookies), the redirects
 * followed up to the loopback address (never called), the code exchanged.
 * Answers the token endpoint's answer, or the page the form answered when
 * sign-in did not get through.
 */
export async function signInOverHttp(base: string, username: string, password: string, clientId = 'plgt'):
  Promise<{ tokens?: Record<string, string>; status: number; page?: string }> {
  const cookies = new Map<string, string>();
  const call = async (url: string, init: RequestInit = {}) => {
    const res = await fetch(new URL(url, base), {
      ...init, redirect: 'manual', headers: { ...init.headers as Record<string, string>, cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; ') },
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const at = pair!.indexOf('=');
      cookies.set(pair!.slice(0, at), pair!.slice(at + 1));
    }
    return res;
  };
  const verifier = randomBytes(32).toString('base64url');
  const redirectUri = 'http://127.0.0.1:9/callback';
  const query = new URLSearchParams({
    client_id: clientId, response_type: 'code', redirect_uri: redirectUri, scope: 'openid offline_access',
    code_challenge: createHash('sha256').update(verifier).digest('base64url'), code_challenge_method: 'S256', state: 's',
  });
  const started = await call(`/oauth2/auth?${query}`);
  const form = started.headers.get('location')!;
  let res = await call(form, { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ username, password }) });
  if (res.status !== 303) return { status: res.status, page: await res.text() };
  let location = res.headers.get('location')!;
  while (!location.startsWith(redirectUri)) {
    res = await call(location);
    location = res.headers.get('location') ?? '';
    if (!location) return { status: res.status, page: await res.text() };
  }
  const code = new URL(location).searchParams.get('code')!;
  const exchanged = await fetch(new URL('/oauth2/token', base), {
    method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', client_id: clientId, code, redirect_uri: redirectUri, code_verifier: verifier }),
  });
  return { status: exchanged.status, tokens: await exchanged.json() as Record<string, string> };
}
