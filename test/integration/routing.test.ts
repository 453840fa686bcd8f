import { expect } from 'chai';
import express from 'express';
import { z } from 'zod';
import { ApiRegistry, defineRoute, firstMatchDiffers } from '../../src/http/api.js';
import { bearer, type TestServer, withSeededServer, type Tokens } from '../helpers/server.js';

/**
 * The API's routes are found by a radix tree in front of Express's router
 * (src/http/api.ts, `mount`); a path is matched as Express matches it.
 */
describe('routing', () => {
  let t: TestServer;
  let tokens: Tokens;
  withSeededServer('acme', (s) => ({ t, tokens } = s));

  it('matches paths case-insensitively, with a trailing slash, and with percent-encoded segments', async () => {
    for (const path of ['/api/v1/workspaces/acme', '/API/V1/Workspaces/acme', '/api/v1/workspaces/acme/', '/api/v1/workspaces/%61cme', '/api/v1/workspaces/acme?x=1']) {
      const res = await t.http.get(path).set(bearer(tokens.member));
      expect(res.status, path).to.equal(200);
      expect(res.body.data.slug, path).to.equal('acme');
    }
  });

  it('answers 404 for an empty segment and an unknown path, after authentication', async () => {
    for (const [method, path] of [['get', '/api/v1/workspaces//members/x'], ['get', '/api/v1/nothing'], ['patch', '/api/v1/nothing']] as const) {
      const res = await t.http[method](path).set(bearer(tokens.member));
      expect(res.status, `${method} ${path}`).to.equal(404);
      expect(res.body.error.code).to.equal('NOT_FOUND');
      const anonymous = await t.http[method](path);
      expect(anonymous.status, `anonymous ${method} ${path}`).to.equal(401);
    }
  });

  it('answers a wrong method of a path 405 with Allow naming its methods, after authentication', async () => {
    for (const path of ['/api/v1/workspaces/acme', '/API/V1/Workspaces/acme/']) {
      const res = await t.http.patch(path).set(bearer(tokens.member));
      expect(res.status, path).to.equal(405);
      expect(res.headers.allow).to.equal('GET, HEAD');
      expect(res.body.error.code).to.equal('METHOD_NOT_ALLOWED');
      expect((await t.http.patch(path)).status, `anonymous PATCH ${path}`).to.equal(401);
    }
  });

  it('prefers a static segment declared first over a parameter (users/me/principal beside users/{userId}/roles)', async () => {
    const principal = await t.http.get('/api/v1/iam/acme/users/me/principal').set(bearer(tokens.member));
    expect(principal.status).to.equal(200);
    const users = await t.http.get('/api/v1/iam/acme/users').set(bearer(tokens.member));
    const id = (users.body.data.items as Array<{ id: string; username: string }>).find((u) => u.username === 'acme-member')!.id;
    const user = await t.http.get(`/api/v1/iam/acme/users/${id}`).set(bearer(tokens.member));
    expect(user.status).to.equal(200);
    expect(user.body.data.username).to.equal('acme-member');
    const roles = await t.http.get(`/api/v1/iam/acme/users/${id}/roles`).set(bearer(tokens.member));
    expect(roles.status).to.equal(200);
    expect(roles.body.data).to.be.an('array');
    const notMe = await t.http.get('/api/v1/iam/acme/users/me/roles').set(bearer(tokens.member));
    expect(notMe.status, 'me is read as a user id beside roles').to.equal(404);
  });

  it('answers HEAD on a GET route without a body', async () => {
    const res = await t.http.head('/api/v1/workspaces/acme').set(bearer(tokens.member));
    expect(res.status).to.equal(200);
    expect(res.text ?? '').to.equal('');
  });

  it('labels request metrics by the route pattern', async () => {
    await t.http.get('/api/v1/workspaces/acme').set(bearer(tokens.member));
    const res = await t.http.get('/metrics').set(bearer(tokens.root));
    expect(res.text).to.match(/wsm_http_requests_total\{[^}]*route="\/api\/v1\/workspaces\/:workspace"[^}]*\} [1-9]/);
  });
});

describe('routing: declaration order', () => {
  const route = (path: string) => defineRoute({
    method: 'get', path, summary: path, tag: 't', params: z.object({}).passthrough(), responses: { 200: { description: 'ok' } },
    handler: async () => ({ data: path }),
  });

  it('refuses a parameter route declared before a static one it would shadow', () => {
    const registry = new ApiRegistry();
    registry.add(route('/a/{id}/x'), route('/a/me/x'));
    expect(firstMatchDiffers(registry.routes)?.map((r) => r.path)).to.deep.equal(['/a/{id}/x', '/a/me/x']);
    expect(() => registry.mount(express.Router(), { jsonLimit: 1000, authenticate: async () => { throw new Error('unused'); }, authorize: async () => undefined }))
      .to.throw(/shadowed/);
  });

  it('accepts the static route first, and routes of other lengths or methods', () => {
    const registry = new ApiRegistry();
    registry.add(route('/a/me/x'), route('/a/{id}/x'), route('/a/{id}'), route('/b/{id}/x'), route('/c/{id}/me/{x}'), route('/c/{id}/{y}/me'));
    expect(firstMatchDiffers(registry.routes)).to.equal(null);
  });
});
