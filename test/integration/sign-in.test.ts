import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startTestServer, removeDir, bearer, tempDir, type TestServer } from '../helpers/server.js';
import { freePort } from '../helpers/ports.js';
import { artifactDir, CHROMIUM_FLAGS, findChromium } from '../helpers/browser.js';

/**
 * Signing in as the ecosystem's command-line client does: discovery, the
 * authorization code with PKCE through the sign-in page (a person in
 * headless Chromium), the code exchange and a refresh at the token
 * endpoint, then the API with the access token. The client is written here,
 * with its loopback redirect, as the command-line client would run it.
 */
const CLI = 'plgt';

/** A loopback redirect listener: answers each arrival and keeps its query. */
async function loopback(): Promise<{ uri: string; port: number; next(): Promise<URLSearchParams>; close(): Promise<void> }> {
  const waiting: Array<(q: URLSearchParams) => void> = [];
  const arrived: URLSearchParams[] = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    res.writeHead(200, { 'Content-Type': 'text/plain' }).end('Signed in; you may close this window.');
    if (url.pathname !== '/callback') return;
    const w = waiting.shift();
    if (w) w(url.searchParams);
    else arrived.push(url.searchParams);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    uri: `http://127.0.0.1:${port}/callback`,
    port,
    next: () => new Promise((resolve, reject) => {
      const a = arrived.shift();
      if (a) { resolve(a); return; }
      const timer = setTimeout(() => reject(new Error('the browser did not come back to the loopback redirect within 60 s')), 60_000);
      waiting.push((q) => { clearTimeout(timer); resolve(q); });
    }),
    close: () => new Promise((resolve) => { server.close(() => resolve()); server.closeAllConnections(); }),
  };
}

const pkce = () => {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
};

describe('sign-in: OpenID provider, sign-in page, PKCE client (headless Chromium)', function () {
  this.timeout(180_000);
  let t: TestServer;
  let browser: Browser;
  let page: Page;
  let root: string;
  let port: number;
  let dataDir: string;
  let shots: string;
  let cb: Awaited<ReturnType<typeof loopback>>;

  const start = () => startTestServer({ PORT: String(port) }, dataDir);
  const discovery = async () => (await t.http.get('/.well-known/openid-configuration')).body as Record<string, string>;
  const token = async (form: Record<string, string>) => {
    const res = await fetch(`${t.url}/oauth2/token`, { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form) });
    return { status: res.status, body: await res.json() as Record<string, string> };
  };
  /** Opens the authorization endpoint as the client would send the person there. */
  const authorize = (challenge: string, extra: Record<string, string> = {}) => {
    const q = new URLSearchParams({
      client_id: CLI, response_type: 'code', redirect_uri: cb.uri, scope: 'openid offline_access profile',
      code_challenge: challenge, code_challenge_method: 'S256', state: 'st-1', ...extra,
    });
    return `${t.url}/oauth2/auth?${q}`;
  };
  const fillSignIn = async (username: string, password: string) => {
    await page.waitForSelector('#password');
    await page.fill('#username', username);
    await page.fill('#password', password);
    await page.click('#sign-in');
  };
  /** A whole sign-in of `username`: answers the code and the verifier. */
  const signIn = async (username: string, password: string) => {
    const { verifier, challenge } = pkce();
    await page.goto(authorize(challenge));
    await fillSignIn(username, password);
    const back = await cb.next();
    await page.waitForURL(/\/callback\?/);
    expect(back.get('state')).to.equal('st-1');
    expect(back.get('iss')).to.equal(t.url);
    return { code: back.get('code')!, verifier };
  };
  const exchange = (code: string, verifier: string) =>
    token({ grant_type: 'authorization_code', client_id: CLI, code, redirect_uri: cb.uri, code_verifier: verifier });

  before(async function () {
    const executablePath = findChromium();
    if (!executablePath) {
      if (process.env.CI === 'true') throw new Error('Chromium not found at /usr/bin/chromium: install it (apt-get install -y chromium) or set CHROMIUM_PATH');
      console.log('    skipped: no Chromium at /usr/bin/chromium (apt-get install -y chromium to run the sign-in tests)');
      this.skip();
    }
    port = await freePort();
    dataDir = tempDir();
    t = await start();
    root = await t.token('root', { systemAdmin: true });
    for (const [user, admin] of [['alice', false], ['bob', false], ['ops', true]] as const) {
      const set = await t.http.put(`/api/v1/users/${user}/password`).set(bearer(root)).send({ password: `${user}-secret-pw`, systemAdmin: admin });
      expect(set.status, JSON.stringify(set.body)).to.equal(200);
    }
    expect((await t.http.post('/api/v1/workspaces').set(bearer(root)).send({ slug: 'acme', owner: 'alice' })).status).to.equal(201);
    cb = await loopback();
    shots = artifactDir('sign-in');
    browser = await chromium.launch({ executablePath, args: CHROMIUM_FLAGS, headless: true });
    page = await browser.newPage();
  });

  afterEach(async function () {
    if (this.currentTest?.state === 'failed' && page) {
      console.log(`    (page at ${page.url()}: ${(await page.textContent('body').catch(() => '')) ?? ''})`.slice(0, 600));
      await page.screenshot({ path: path.join(shots, `failed-${this.currentTest.title.replace(/\W+/g, '-').slice(0, 60)}.png`) });
    }
  });

  after(async () => {
    await browser?.close();
    await cb?.close();
    await t?.close();
    if (dataDir) removeDir(dataDir);
  });

  it('answers the ecosystem\'s discovery document and the provider\'s, without a token', async () => {
    const doc = await t.http.get('/.well-known/poliglot.json');
    expect(doc.status).to.equal(200);
    expect(doc.body).to.deep.include({ deployment_name: 'Workspace service', oauth: { issuer: t.url, cli_client_id: CLI } });
    expect(doc.body.deployment_version).to.match(/^\d+\.\d+\.\d+/);
    const oidc = await discovery();
    expect(oidc).to.include({
      issuer: t.url, authorization_endpoint: `${t.url}/oauth2/auth`, token_endpoint: `${t.url}/oauth2/token`, userinfo_endpoint: `${t.url}/userinfo`,
    });
    expect(oidc.code_challenge_methods_supported).to.deep.equal(['S256']);
  });

  it('signs in through the page with a password (a wrong one first), exchanges the code, refreshes, and calls the API', async () => {
    const { verifier, challenge } = pkce();
    await page.goto(authorize(challenge));
    await page.waitForURL(/\/sign-in\/[\w-]+$/);
    expect(await page.$('script')).to.equal(null);
    await fillSignIn('alice', 'not-her-password');
    await page.waitForSelector('#sign-in-error');
    expect(await page.textContent('#sign-in-error')).to.match(/not right/);
    await page.screenshot({ path: path.join(shots, 'sign-in-refused.png') });
    await page.fill('#password', 'alice-secret-pw');
    await page.click('#sign-in');
    const back = await cb.next();
    expect(back.get('state')).to.equal('st-1');
    const code = back.get('code')!;

    // A wrong verifier: the protocol's invalid_grant.
    const wrong = await exchange(code, pkce().verifier);
    expect(wrong.status).to.equal(400);
    expect(wrong.body.error).to.equal('invalid_grant');

    const tokens = await exchange(code, verifier);
    expect(tokens.status, JSON.stringify(tokens.body)).to.equal(200);
    expect(tokens.body).to.include.keys('access_token', 'refresh_token', 'id_token');
    const claims = decodeJwt(tokens.body.access_token!);
    expect(claims).to.include({ iss: t.url, aud: t.url, preferred_username: 'alice', sub: 'alice' });
    expect(claims.wsm_system_admin).to.equal(undefined);

    const ws = await t.http.get('/api/v1/workspaces/acme').set(bearer(tokens.body.access_token!));
    expect(ws.status, JSON.stringify(ws.body)).to.equal(200);
    // Alice's token is no system administrator's.
    expect((await t.http.get('/metrics').set(bearer(tokens.body.access_token!))).status).to.equal(403);

    const info = await t.http.get('/userinfo').set(bearer(tokens.body.access_token!));
    expect(info.status).to.equal(200);
    expect(info.body).to.include({ sub: 'alice', preferred_username: 'alice', wsm_system_admin: false });

    const refreshed = await token({ grant_type: 'refresh_token', client_id: CLI, refresh_token: tokens.body.refresh_token! });
    expect(refreshed.status, JSON.stringify(refreshed.body)).to.equal(200);
    expect(refreshed.body.access_token).to.not.equal(tokens.body.access_token);
    expect((await t.http.get('/api/v1/workspaces/acme').set(bearer(refreshed.body.access_token!))).status).to.equal(200);

    // The code again: refused, and the grant it came from is revoked with it (its refresh tokens too).
    const reused = await exchange(code, verifier);
    expect(reused.status).to.equal(400);
    expect(reused.body.error).to.equal('invalid_grant');
    const afterReuse = await token({ grant_type: 'refresh_token', client_id: CLI, refresh_token: refreshed.body.refresh_token! });
    expect(afterReuse.body.error).to.equal('invalid_grant');
  });

  it('gives a system administrator\'s sign-in the system administrator\'s claim', async () => {
    const { code, verifier } = await signIn('ops', 'ops-secret-pw');
    const tokens = await exchange(code, verifier);
    expect(decodeJwt(tokens.body.access_token!).wsm_system_admin).to.equal(true);
    expect((await t.http.get('/metrics').set(bearer(tokens.body.access_token!))).status).to.equal(200);
    expect((await t.http.get('/userinfo').set(bearer(tokens.body.access_token!))).body).to.include({ preferred_username: 'ops', wsm_system_admin: true });
  });

  it('refuses an unregistered redirect, a request without PKCE and an unknown client with the protocol\'s errors', async () => {
    const { challenge } = pkce();
    for (const uri of ['http://evil.example/callback', `http://127.0.0.1:${cb.port}/elsewhere`, 'https://127.0.0.1/callback']) {
      const res = await fetch(authorize(challenge, { redirect_uri: uri }), { redirect: 'manual' });
      expect(res.status, uri).to.equal(400);
      expect(await res.text()).to.contain('invalid_redirect_uri');
    }
    // Any port of a loopback redirect is accepted (RFC 8252): the answer is a redirect to the sign-in page.
    const otherPort = await fetch(authorize(challenge, { redirect_uri: 'http://127.0.0.1:1/callback' }), { redirect: 'manual' });
    expect(otherPort.status).to.equal(303);
    expect(otherPort.headers.get('location')).to.match(/^\/sign-in\//);

    const noPkce = await fetch(authorize(challenge, { code_challenge: '' }), { redirect: 'manual' });
    expect(noPkce.status).to.equal(303);
    const to = new URL(noPkce.headers.get('location')!);
    expect(to.origin + to.pathname).to.equal(cb.uri);
    expect(to.searchParams.get('error')).to.equal('invalid_request');
    const plain = new URL((await fetch(authorize(challenge, { code_challenge_method: 'plain' }), { redirect: 'manual' })).headers.get('location')!);
    expect(plain.searchParams.get('error')).to.equal('invalid_request');

    const unknown = await fetch(authorize(challenge, { client_id: 'nobody' }), { redirect: 'manual' });
    expect(unknown.status).to.equal(400);
    expect(await unknown.text()).to.contain('invalid_client');
  });

  it('limits failed sign-ins per user: past five, even the right password is refused for a while', async () => {
    const { challenge } = pkce();
    await page.goto(authorize(challenge));
    for (let i = 0; i < 5; i++) {
      await fillSignIn('bob', `wrong-${i}-password`);
      await page.waitForSelector('#sign-in-error');
      expect(await page.textContent('#sign-in-error')).to.match(/not right/);
    }
    await fillSignIn('bob', 'bob-secret-pw');
    await page.waitForSelector('#sign-in-error');
    expect(await page.textContent('#sign-in-error')).to.match(/Too many failed sign-ins/);
    // Another user from the same address is not held by bob's count.
    await fillSignIn('alice', 'alice-secret-pw');
    expect((await cb.next()).get('code')).to.be.a('string');
    // The browser lands on the redirect after the client heard it: let it, so the next test's navigation is not cut by it.
    await page.waitForURL(/\/callback\?/);
  });

  it('asks again in a browser already signed in: the command-line client gets the page, with "Continue as" the user', async () => {
    const { verifier, challenge } = pkce();
    await page.goto(authorize(challenge));
    await page.waitForSelector('#continue');
    expect(await page.textContent('#signed-in-as')).to.equal('alice');
    await page.click('#continue');
    const back = await cb.next();
    const tokens = await exchange(back.get('code')!, verifier);
    expect(decodeJwt(tokens.body.access_token!).preferred_username).to.equal('alice');
  });

  it('refuses a token that names the provider as issuer but is signed by another key', async () => {
    const { SignJWT, generateKeyPair } = await import('jose');
    const { privateKey } = await generateKeyPair('ES256');
    const forged = await new SignJWT({ preferred_username: 'ops', wsm_system_admin: true })
      .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt' }).setIssuer(t.url).setAudience(t.url).setSubject('ops')
      .setIssuedAt().setExpirationTime('5m').sign(privateKey);
    const res = await t.http.get('/api/v1/workspaces').set(bearer(forged));
    expect(res.status).to.equal(401);
    expect(res.body.error.message).to.match(/no key of the issuer matches|signature/);
  });

  it('answers /userinfo for tokens of wsm token and API keys too, which keep working everywhere', async () => {
    const minted = await t.token('carol', { email: 'carol@example.org' });
    const info = await t.http.get('/userinfo').set(bearer(minted));
    expect(info.status).to.equal(200);
    expect(info.body).to.include({ sub: 'carol', email: 'carol@example.org' });
    const key = await t.http.post('/api/v1/users/me/keys').set(bearer(minted)).send({ name: 'k', expiresIn: 'SEVEN_DAYS' });
    expect(key.status).to.equal(201);
    expect((await t.http.get('/api/v1/workspaces').set('X-Api-Key', key.body.data.key)).status).to.equal(200);
    expect((await t.http.get('/userinfo').set('X-Api-Key', key.body.data.key)).body).to.include({ sub: 'carol' });
    expect((await t.http.get('/userinfo')).status).to.equal(401);
    expect((await t.http.get('/api/v1/workspaces').set(bearer(root))).status).to.equal(200);
  });

  it('keeps its keys and grants through a restart: a refresh token and an access token of before still work', async () => {
    const { code, verifier } = await signIn('alice', 'alice-secret-pw');
    const tokens = await exchange(code, verifier);
    const keysBefore = (await t.http.get('/.well-known/jwks.json')).body as unknown;
    await t.close();
    t = await start();
    expect((await t.http.get('/.well-known/jwks.json')).body).to.deep.equal(keysBefore);
    expect((await t.http.get('/api/v1/workspaces/acme').set(bearer(tokens.body.access_token!))).status).to.equal(200);
    const refreshed = await token({ grant_type: 'refresh_token', client_id: CLI, refresh_token: tokens.body.refresh_token! });
    expect(refreshed.status, JSON.stringify(refreshed.body)).to.equal(200);
    expect((await t.http.get('/api/v1/workspaces/acme').set(bearer(refreshed.body.access_token!))).status).to.equal(200);
  });

  it('points the MCP endpoint\'s 401 at the protected-resource metadata, which names the issuer', async () => {
    const res = await t.http.post('/mcp/acme').send({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    expect(res.status).to.equal(401);
    const header = res.headers['www-authenticate']!;
    const url = /resource_metadata="([^"]+)"/.exec(header)?.[1];
    expect(url).to.equal(`${t.url}/.well-known/oauth-protected-resource/mcp/acme`);
    const meta = (await fetch(url!)).json() as Promise<{ resource: string; authorization_servers: string[] }>;
    expect(await meta).to.deep.include({ resource: `${t.url}/mcp/acme`, authorization_servers: [t.url] });
    const rootMeta = await t.http.get('/.well-known/oauth-protected-resource');
    expect(rootMeta.body.authorization_servers).to.deep.equal([t.url]);
  });

  it('signs the console in through the same page ("Sign in"), keeping the token paste beside it', async () => {
    const context = await browser.newContext();
    const console = await context.newPage();
    try {
      await console.goto(`${t.url}/console/`);
      await console.waitForSelector('#sign-in-oauth');
      expect(await console.$('#credential')).to.not.equal(null);
      await console.click('#sign-in-oauth');
      await console.waitForSelector('#password');
      await console.fill('#username', 'alice');
      await console.fill('#password', 'alice-secret-pw');
      await console.click('#sign-in');
      await console.waitForSelector('#workspaces a.workspace-link').catch(async (err: unknown) => {
        await console.screenshot({ path: path.join(shots, 'failed-console.png') });
        throw new Error(`${String(err)}\n(the console shows: ${await console.textContent('body')} at ${console.url()})`);
      });
      expect(await console.textContent('#workspaces')).to.contain('acme');
      await console.screenshot({ path: path.join(shots, 'console-signed-in.png') });
    } finally {
      await context.close();
    }
  });
});
