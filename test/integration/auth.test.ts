import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT, generateKeyPair, exportJWK, UnsecuredJWT } from 'jose';
import { startTestServer, removeDir, bearer, type TestServer } from '../helpers/server.js';
import { EMBEDDED_AUDIENCE, EMBEDDED_ISSUER, loadIssuerKey } from '../../src/auth/tokens.js';

function expect401(res: { status: number; headers: Record<string, string>; body: { success: boolean; error: { code: string; message: string } } }) {
  expect(res.status).to.equal(401);
  expect(res.headers['www-authenticate']).to.match(/^Bearer/);
  expect(res.body.success).to.equal(false);
  expect(res.body.error.code).to.equal('UNAUTHORIZED');
  expect(res.body.error.message).to.be.a('string').and.not.empty;
}

describe('authentication (embedded issuer)', () => {
  let t: TestServer;
  before(async () => { t = await startTestServer(); });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('answers /health without a token', async () => {
    const res = await t.http.get('/health');
    expect(res.status).to.equal(200);
    expect(res.body.success).to.equal(true);
  });

  it('accepts a token minted by the embedded issuer', async () => {
    const res = await t.http.get('/api/v1/workspaces').set(bearer(await t.token('alice')));
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({ success: true, data: [] });
  });

  it('refuses a request without a token, also on unknown paths', async () => {
    expect401(await t.http.get('/api/v1/workspaces'));
    expect401(await t.http.get('/api/v1/nowhere'));
  });

  it('refuses malformed headers and tokens', async () => {
    expect401(await t.http.get('/api/v1/workspaces').set('Authorization', 'Basic abc'));
    expect401(await t.http.get('/api/v1/workspaces').set('Authorization', 'Bearer not-a-jwt'));
    expect401(await t.http.get('/api/v1/workspaces').set('Authorization', 'Bearer a.b.c'));
  });

  it('refuses a token signed by another key', async () => {
    const { privateKey } = await generateKeyPair('ES256');
    const jwt = await new SignJWT({ preferred_username: 'mallory', wsm_system_admin: true })
      .setProtectedHeader({ alg: 'ES256' }).setIssuer(EMBEDDED_ISSUER).setAudience(EMBEDDED_AUDIENCE).setExpirationTime('1h').sign(privateKey);
    expect401(await t.http.get('/api/v1/workspaces').set(bearer(jwt)));
  });

  it('refuses alg none', async () => {
    const jwt = new UnsecuredJWT({ preferred_username: 'mallory', wsm_system_admin: true }).setIssuer(EMBEDDED_ISSUER).setAudience(EMBEDDED_AUDIENCE).setExpirationTime('1h').encode();
    expect401(await t.http.get('/api/v1/workspaces').set(bearer(jwt)));
  });

  it('refuses expired, wrong-issuer and wrong-audience tokens', async () => {
    const { privateKey, kid } = await loadIssuerKey(t.dataDir);
    const sign = (iss: string, aud: string, exp: number) => new SignJWT({ preferred_username: 'alice' })
      .setProtectedHeader({ alg: 'ES256', kid }).setIssuer(iss).setAudience(aud).setExpirationTime(exp).sign(privateKey);
    const now = Math.floor(Date.now() / 1000);
    const expired = await t.http.get('/api/v1/workspaces').set(bearer(await sign(EMBEDDED_ISSUER, EMBEDDED_AUDIENCE, now - 120)));
    expect401(expired);
    expect(expired.body.error.message).to.match(/expired/);
    expect401(await t.http.get('/api/v1/workspaces').set(bearer(await sign('https://elsewhere.example', EMBEDDED_AUDIENCE, now + 600))));
    expect401(await t.http.get('/api/v1/workspaces').set(bearer(await sign(EMBEDDED_ISSUER, 'other-audience', now + 600))));
  });
});

describe('authentication (OpenID Connect issuer)', () => {
  let t: TestServer;
  let jwks: http.Server;
  let issuer: string;
  let keys: Awaited<ReturnType<typeof generateKeyPair>>;

  before(async () => {
    keys = await generateKeyPair('RS256');
    const jwk = { ...(await exportJWK(keys.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    jwks = http.createServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    issuer = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/realms/test`;
    t = await startTestServer({
      WSM_OIDC_ISSUER: issuer,
      WSM_OIDC_AUDIENCE: 'wsm-api',
      WSM_OIDC_JWKS_URL: `${issuer}/protocol/openid-connect/certs`,
      WSM_OIDC_ADMIN_CLAIM: 'realm_access.roles',
      WSM_OIDC_ADMIN_VALUE: 'wsm-admin',
    });
  });
  after(async () => { await t.close(); removeDir(t.dataDir); jwks.close(); });

  const sign = (claims: Record<string, unknown>, iss = issuer, aud = 'wsm-api') => new SignJWT(claims)
    .setProtectedHeader({ alg: 'RS256', kid: 'k1' }).setIssuer(iss).setAudience(aud).setExpirationTime('10m').sign(keys.privateKey);

  it('accepts tokens of the issuer and reads the admin claim and profile', async () => {
    const admin = await sign({ preferred_username: 'kc-admin', realm_access: { roles: ['wsm-admin'] } });
    const created = await t.http.post('/api/v1/workspaces').set(bearer(admin)).send({ slug: 'oidc-ws' });
    expect(created.status).to.equal(201);
    const user = await sign({ sub: 'kc-user-1', preferred_username: 'kc-user', email: 'u@example.org', given_name: 'Kay', email_verified: true });
    const added = await t.http.put('/api/v1/workspaces/oidc-ws/members/kc-user').set(bearer(admin)).send({});
    expect(added.status).to.equal(200);
    const res = await t.http.get('/api/v1/workspaces').set(bearer(user));
    expect(res.status).to.equal(200);
    expect(res.body.data.map((w: { slug: string }) => w.slug)).to.deep.equal(['oidc-ws']);
    const notAdmin = await t.http.post('/api/v1/workspaces').set(bearer(user)).send({ slug: 'nope' });
    expect(notAdmin.status).to.equal(403);
  });

  it('refuses embedded-issuer tokens and tokens for another audience', async () => {
    expect401(await t.http.get('/api/v1/workspaces').set(bearer(await t.token('alice'))));
    expect401(await t.http.get('/api/v1/workspaces').set(bearer(await sign({ preferred_username: 'x' }, issuer, 'other'))));
    expect401(await t.http.get('/api/v1/workspaces').set(bearer(await sign({ preferred_username: 'x' }, 'http://127.0.0.1:1/other'))));
  });
});
