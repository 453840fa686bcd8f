import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { sparql, iri } from '../../src/rdf/sparql.js';

const DAY = 86_400_000;

describe('API keys (X-Api-Key)', function () {
  this.timeout(60_000);
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  // Every graph of the store through its interface, so the check holds on either store (WSM_TEST_STORE=sparql too).
  const dump = async () => {
    const { store } = t.server.services;
    const graphs = await store.graphNames();
    return (await Promise.all(graphs.map((g) => store.dumpGraph(g)))).join('');
  };
  const makeKey = async (token: string, name = 'ci', expiresIn = 'THIRTY_DAYS') => {
    const res = await t.http.post('/api/v1/users/me/keys').set(bearer(token)).send({ name, expiresIn });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.data as { id: string; name: string; prefix: string; key: string; createdAt: string; expiresAt: string | null };
  };

  before(async () => {
    t = await startTestServer();
    ({ tokens } = await seedWorkspace(t, 'acme'));
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('answers a new key once, with its prefix and expiry; lists keys without them', async () => {
    const made = await makeKey(tokens.member, 'laptop', 'SEVEN_DAYS');
    expect(Object.keys(made).sort()).to.deep.equal(['createdAt', 'expiresAt', 'id', 'key', 'name', 'prefix']);
    expect(made.name).to.equal('laptop');
    expect(made.key.startsWith(`${made.prefix}_`)).to.equal(true);
    expect(made.key.length).to.be.greaterThan(40);
    expect(new Date(made.expiresAt!).getTime() - new Date(made.createdAt).getTime()).to.equal(7 * DAY);
    const never = await makeKey(tokens.member, 'forever', 'NEVER');
    expect(never.expiresAt).to.equal(null);
    for (const [expiresIn, days] of [['FOURTEEN_DAYS', 14], ['NINETY_DAYS', 90]] as const) {
      const k = await makeKey(tokens.member, expiresIn, expiresIn);
      expect(new Date(k.expiresAt!).getTime() - new Date(k.createdAt).getTime()).to.equal(days * DAY);
    }
    const list = await t.http.get('/api/v1/users/me/keys').set(bearer(tokens.member));
    expect(list.status).to.equal(200);
    const laptop = list.body.data.find((k: { id: string }) => k.id === made.id);
    expect(laptop).to.deep.equal({ id: made.id, name: 'laptop', prefix: made.prefix, createdAt: made.createdAt, expiresAt: made.expiresAt, lastUsedAt: null });
    expect(JSON.stringify(list.body)).not.to.contain(made.key);
    // Another user sees none of them.
    const others = await t.http.get('/api/v1/users/me/keys').set(bearer(tokens.outsider));
    expect(others.body.data).to.deep.equal([]);
  });

  it('stores only the key\'s hash', async () => {
    const made = await makeKey(tokens.member);
    const quads = await dump();
    expect(quads).not.to.contain(made.key);
    expect(quads).to.contain(createHash('sha256').update(made.key).digest('hex'));
  });

  it('accepts X-Api-Key instead of a bearer token, as the key\'s owner, and records lastUsedAt', async () => {
    const made = await makeKey(tokens.member);
    const key = { 'X-Api-Key': made.key };
    const workspaces = await t.http.get('/api/v1/workspaces').set(key);
    expect(workspaces.status).to.equal(200);
    expect(workspaces.body.data.map((w: { slug: string }) => w.slug)).to.deep.equal(['acme']);
    const principal = await t.http.get('/api/v1/iam/acme/users/me/principal').set(key);
    expect(principal.status, JSON.stringify(principal.body)).to.equal(200);
    const created = await t.http.post('/api/v1/commands/acme').set(key).send({ alias: 'by-key', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT WHERE { ?s ?p ?o }' });
    expect(created.status).to.equal(200);
    expect(created.body.data.owner.username).to.equal('acme-member');
    // The member is no administrator, with a key as with a token.
    const install = await t.http.delete('/api/v1/packages/acme/anything').set(key);
    expect(install.status).to.equal(403);
    const list = await t.http.get('/api/v1/users/me/keys').set(key);
    const used = list.body.data.find((k: { id: string }) => k.id === made.id);
    expect(used.lastUsedAt).to.be.a('string');
    expect(Date.now() - new Date(used.lastUsedAt).getTime()).to.be.lessThan(60_000);
  });

  it('carries system administration when its maker had it', async () => {
    const rootKey = await makeKey(tokens.root, 'root');
    const created = await t.http.post('/api/v1/workspaces').set('X-Api-Key', rootKey.key).send({ slug: 'by-root-key', owner: 'acme-owner' });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const memberKey = await makeKey(tokens.member, 'member');
    const refused = await t.http.post('/api/v1/workspaces').set('X-Api-Key', memberKey.key).send({ slug: 'by-member-key', owner: 'acme-member' });
    expect(refused.status).to.equal(403);
  });

  it('makes keys only with a bearer token: a key cannot make a key (expiry, revocation and system administration stay with the token)', async () => {
    const weekly = await makeKey(tokens.member, 'weekly', 'SEVEN_DAYS');
    const rootKey = await makeKey(tokens.root, 'root-weekly', 'SEVEN_DAYS');
    const before = (await t.http.get('/api/v1/users/me/keys').set(bearer(tokens.member))).body.data as unknown[];
    for (const [key, expiresIn] of [[weekly.key, 'NEVER'], [rootKey.key, 'NEVER'], [weekly.key, 'SEVEN_DAYS']] as const) {
      const res = await t.http.post('/api/v1/users/me/keys').set('X-Api-Key', key).send({ name: 'child', expiresIn });
      expect(res.status, JSON.stringify(res.body)).to.equal(403);
      expect(res.body.error.message).to.match(/bearer token/);
    }
    const after = (await t.http.get('/api/v1/users/me/keys').set('X-Api-Key', weekly.key)).body.data as unknown[];
    expect(after).to.have.length(before.length);
    // A key still lists and revokes its owner's keys.
    expect((await t.http.delete(`/api/v1/users/me/keys/${weekly.id}`).set('X-Api-Key', weekly.key)).status).to.equal(200);
    expect((await t.http.get('/api/v1/workspaces').set('X-Api-Key', weekly.key)).status).to.equal(401);
  });

  it('keeps at most 100 keys per user: the 101st is refused with 400', async () => {
    const token = await t.token('key-collector');
    for (let i = 0; i < 100; i++) await makeKey(token, `k${i}`);
    const refused = await t.http.post('/api/v1/users/me/keys').set(bearer(token)).send({ name: 'one more', expiresIn: 'NEVER' });
    expect(refused.status).to.equal(400);
    expect(refused.body.error.message).to.match(/at most 100 API keys/);
    const list = (await t.http.get('/api/v1/users/me/keys').set(bearer(token))).body.data as Array<{ id: string }>;
    expect(list).to.have.length(100);
    // Revoking one makes room for one.
    expect((await t.http.delete(`/api/v1/users/me/keys/${list[0]!.id}`).set(bearer(token))).status).to.equal(200);
    await makeKey(token, 'again');
  });

  it('refuses unknown, malformed, revoked and expired keys with 401', async () => {
    const made = await makeKey(tokens.member, 'short-lived');
    const unknown = await t.http.get('/api/v1/workspaces').set('X-Api-Key', `${made.prefix}_${'A'.repeat(43)}`);
    expect(unknown.status).to.equal(401);
    expect(unknown.body.error.message).to.match(/unknown or revoked/);
    const malformed = await t.http.get('/api/v1/workspaces').set('X-Api-Key', 'hello');
    expect(malformed.status).to.equal(401);
    const none = await t.http.get('/api/v1/workspaces');
    expect(none.status).to.equal(401);
    expect(none.body.error.message).to.contain('X-Api-Key');

    // Expired: its expiry moved into the past in the store.
    const store = t.server.services.store;
    const keyIri = t.server.services.graphs.resource('api-key', made.id);
    const system = t.server.services.graphs.system;
    await store.update(sparql`DELETE { GRAPH ${iri(system)} { ${iri(keyIri)} <https://w3id.org/wsm/ns#expiresAt> ?e } }
      INSERT { GRAPH ${iri(system)} { ${iri(keyIri)} <https://w3id.org/wsm/ns#expiresAt> "2020-01-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> } }
      WHERE { GRAPH ${iri(system)} { ${iri(keyIri)} <https://w3id.org/wsm/ns#expiresAt> ?e } }`, [system]);
    const expired = await t.http.get('/api/v1/workspaces').set('X-Api-Key', made.key);
    expect(expired.status).to.equal(401);
    expect(expired.body.error.message).to.match(/expired/);

    const live = await makeKey(tokens.member, 'to-revoke');
    expect((await t.http.get('/api/v1/workspaces').set('X-Api-Key', live.key)).status).to.equal(200);
    // Only its owner can revoke it.
    expect((await t.http.delete(`/api/v1/users/me/keys/${live.id}`).set(bearer(tokens.outsider))).status).to.equal(404);
    expect((await t.http.get('/api/v1/workspaces').set('X-Api-Key', live.key)).status).to.equal(200);
    const revoked = await t.http.delete(`/api/v1/users/me/keys/${live.id}`).set(bearer(tokens.member));
    expect(revoked.status).to.equal(200);
    expect(revoked.body.data).to.contain(live.prefix);
    const after = await t.http.get('/api/v1/workspaces').set('X-Api-Key', live.key);
    expect(after.status).to.equal(401);
    const list = await t.http.get('/api/v1/users/me/keys').set(bearer(tokens.member));
    expect(list.body.data.map((k: { id: string }) => k.id)).not.to.include(live.id);
    expect(await dump()).not.to.contain(createHash('sha256').update(live.key).digest('hex'));
    expect((await t.http.delete(`/api/v1/users/me/keys/${live.id}`).set(bearer(tokens.member))).status).to.equal(404);
  });

  it('refuses a bad name or expiresIn with 400', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ name: 'x', expiresIn: 'FOREVER' }, /expiresIn .*SEVEN_DAYS, FOURTEEN_DAYS, THIRTY_DAYS, NINETY_DAYS, NEVER/],
      [{ name: 'x' }, /expiresIn is required/],
      [{ expiresIn: 'NEVER' }, /name is required/],
      [{ name: '', expiresIn: 'NEVER' }, /name must not be empty/],
      [{ name: 'x'.repeat(101), expiresIn: 'NEVER' }, /at most 100/],
      [{ name: 'x', expiresIn: 'NEVER', key: 'chosen' }, /Invalid request body/],
    ];
    for (const [body, message] of cases) {
      const res = await t.http.post('/api/v1/users/me/keys').set(bearer(tokens.member)).send(body as object);
      expect(res.status, JSON.stringify(body)).to.equal(400);
      expect(res.body.error.message, JSON.stringify(body)).to.match(message);
    }
  });
});
