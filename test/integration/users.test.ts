import { expect } from 'chai';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer, withSeededServer, type Tokens, type SeededWorkspace } from '../helpers/server.js';
import { iri, raw, sparql } from '../../src/rdf/sparql.js';

/** The user record kept from token claims, as the per-request authentication step maintains it. */
describe('user records from token claims', () => {
  let t: TestServer;
  let tokens: Tokens;
  let workspace: SeededWorkspace;
  withSeededServer('acme', (s) => ({ t, tokens, workspace } = s));

  const ownerOf = async (token: string) => {
    const res = await t.http.get(`/api/v1/workspaces/${workspace.slug}`).set(bearer(token));
    expect(res.status).to.equal(200);
    const user = await t.http.get(`/api/v1/iam/${workspace.slug}/users/${res.body.data.owner.id}`).set(bearer(token));
    expect(user.status).to.equal(200);
    return user.body.data;
  };

  it('writes nothing when a request carries the claims already stored', async () => {
    await ownerOf(tokens.owner);
    const before = t.server.services.store.version;
    for (let i = 0; i < 3; i++) await ownerOf(tokens.owner);
    // A fresh token with the same claims is no different.
    const again = await t.token('acme-owner', { email: 'acme-owner@example.org', firstName: 'Olive', lastName: 'Owner' });
    await ownerOf(again);
    expect(t.server.services.store.version).to.equal(before);
  });

  it('writes the profile when the claims change, and then again nothing', async () => {
    const changed = await t.token('acme-owner', { email: 'olive@example.org', firstName: 'Olive', lastName: 'Owner' });
    const before = t.server.services.store.version;
    const user = await ownerOf(changed);
    expect(user).to.include({ username: 'acme-owner', email: 'olive@example.org', firstName: 'Olive', lastName: 'Owner' });
    const after = t.server.services.store.version;
    expect(after).to.be.greaterThan(before);
    await ownerOf(changed);
    expect(t.server.services.store.version).to.equal(after);
  });

  it('applies the claims again after an administrator changed the record', async () => {
    const claims = await t.token('acme-owner', { email: 'olive@example.org', firstName: 'Olive', lastName: 'Owner' });
    const put = await t.http.put(`/api/v1/workspaces/${workspace.slug}/members/acme-owner`).set(bearer(tokens.root)).send({ email: 'other@example.org' });
    expect(put.status).to.equal(200);
    expect(put.body.data.email).to.equal('other@example.org');
    expect((await ownerOf(claims)).email).to.equal('olive@example.org');
  });

  it('finds a user by username and by id, and nothing for an unknown id or a non-UUID', async () => {
    const users = t.server.services.users;
    const owner = await users.get({ username: 'acme-owner' });
    expect(owner).to.include({ username: 'acme-owner', firstName: 'Olive' });
    expect(await users.get({ id: owner!.id })).to.deep.equal(owner);
    expect(await users.get({ id: owner!.id.toUpperCase() })).to.deep.equal(owner);
    expect(await users.get({ username: 'nobody' })).to.equal(null);
    expect(await users.get({ id: '00000000-0000-4000-8000-000000000000' })).to.equal(null);
    expect(await users.get({ id: 'not-a-uuid' })).to.equal(null);
  });
});

/** I5 keeps the member order between writes (MemberOrder): every kind of write that changes the membership shows. */
describe('member list order across writes', () => {
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  before(async () => {
    t = await startTestServer();
    ({ tokens } = await seedWorkspace(t, 'acme'));
    await seedWorkspace(t, 'other');
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  const list = async (query = '') => {
    const res = await t.http.get(`/api/v1/iam/acme/users${query}`).set(bearer(tokens.owner));
    expect(res.status).to.equal(200);
    return res.body.data as { items: Array<{ username: string; email: string | null }>; totalItems: number; totalPages: number };
  };
  const names = async (query = '') => (await list(query)).items.map((u) => u.username);
  const put = async (workspace: string, username: string, body: Record<string, unknown> = {}) => {
    const res = await t.http.put(`/api/v1/workspaces/${workspace}/members/${username}`).set(bearer(tokens.root)).send(body);
    expect(res.status).to.equal(200);
  };

  it('orders by username in code point order and pages through it', async () => {
    for (const u of ['bob', 'Zed', 'alice', 'émile', 'carol']) await put('acme', u);
    expect(await names()).to.deep.equal(['Zed', 'acme-member', 'acme-owner', 'alice', 'bob', 'carol', 'émile']);
    expect(await names('?page=2&pageSize=3')).to.deep.equal(['alice', 'bob', 'carol']);
    const last = await list('?page=3&pageSize=3');
    expect(last.items.map((u) => u.username)).to.deep.equal(['émile']);
    expect(last).to.include({ totalItems: 7, totalPages: 3 });
    expect((await list('?page=4&pageSize=3')).items).to.deep.equal([]);
  });

  it('shows a member added or removed after the list was read', async () => {
    expect(await names()).to.not.include('aaron');
    await put('acme', 'aaron');
    expect((await names()).slice(0, 4)).to.deep.equal(['Zed', 'aaron', 'acme-member', 'acme-owner']);
    expect((await list()).totalItems).to.equal(8);
    expect((await t.http.delete('/api/v1/workspaces/acme/members/aaron').set(bearer(tokens.root))).status).to.equal(200);
    expect(await names()).to.not.include('aaron');
    expect((await list()).totalItems).to.equal(7);
  });

  it('is not disturbed by members of another workspace, and shows profile changes', async () => {
    const before = await names();
    await put('other', 'aardvark');
    expect(await names()).to.deep.equal(before);
    await put('acme', 'bob', { email: 'bob@example.org' });
    expect((await list()).items.find((u) => u.username === 'bob')!.email).to.equal('bob@example.org');
  });

  it('lists the workspaces of a member of several, by slug, and none after leaving them', async () => {
    await put('other', 'zoe');
    await put('acme', 'zoe');
    const zoe = await t.token('zoe');
    const slugs = async () => ((await t.http.get('/api/v1/workspaces').set(bearer(zoe))).body.data as Array<{ slug: string }>).map((w) => w.slug);
    expect(await slugs()).to.deep.equal(['acme', 'other']);
    expect((await t.http.delete('/api/v1/workspaces/acme/members/zoe').set(bearer(tokens.root))).status).to.equal(200);
    expect(await slugs()).to.deep.equal(['other']);
  });

  it('shows a membership removed by a write made outside the services, which declares the IAM graph', async () => {
    expect(await names()).to.include('carol');
    const users = t.server.services.users;
    const carol = iri(users.userIri(users.idOf('carol')));
    const acme = (await t.server.services.workspaces.find('acme'))!;
    const iam = t.server.services.graphs.iam(acme.id);
    await t.server.services.store.update(sparql`PREFIX wsm: <https://w3id.org/wsm/ns#>
      DELETE { GRAPH ${iri(iam)} { ?p ?pp ?po } } WHERE { GRAPH ${iri(iam)} { ?p wsm:actor ${raw(carol.__sparql)} ; wsm:workspace ?w ; ?pp ?po } }`, [iam]);
    expect(await names()).to.not.include('carol');
    expect((await list()).totalItems).to.equal(6);
  });
});

/** The per-request reads are memoized between writes (ReadCache): a write shows on the very next request. */
describe('access checks right after writes', () => {
  let t: TestServer;
  let tokens: Tokens;
  withSeededServer('acme', (s) => ({ t, tokens } = s));

  const status = async (token: string, method: 'get' | 'put', path: string) => (await t.http[method](path).set(bearer(token)).send(method === 'put' ? {} : undefined)).status;

  it('sees a granted and a revoked administrator role, and a removed membership, at once', async () => {
    const dave = await t.token('dave');
    expect(await status(dave, 'get', '/api/v1/workspaces/acme')).to.equal(404);
    expect(await status(dave, 'get', '/api/v1/workspaces/acme')).to.equal(404);
    expect((await t.http.put('/api/v1/workspaces/acme/members/dave').set(bearer(tokens.owner)).send({ admin: true })).status).to.equal(200);
    expect(await status(dave, 'get', '/api/v1/workspaces/acme')).to.equal(200);
    expect(await status(dave, 'put', '/api/v1/workspaces/acme/members/erin')).to.equal(200);
    expect((await t.http.put('/api/v1/workspaces/acme/members/dave').set(bearer(tokens.owner)).send({ admin: false })).status).to.equal(200);
    expect(await status(dave, 'put', '/api/v1/workspaces/acme/members/frank')).to.equal(403);
    expect(await status(dave, 'get', '/api/v1/workspaces/acme')).to.equal(200);
    expect((await t.http.delete('/api/v1/workspaces/acme/members/dave').set(bearer(tokens.owner))).status).to.equal(200);
    expect(await status(dave, 'get', '/api/v1/workspaces/acme')).to.equal(404);
  });

  it('answers records a caller cannot change through the shared cache', async () => {
    const users = t.server.services.users;
    const owner = (await users.get({ username: 'acme-owner' }))!;
    expect(Object.isFrozen(owner)).to.equal(true);
    expect(await users.get({ username: 'acme-owner' })).to.equal(owner);
  });
});

describe('verified tokens', () => {
  let t: TestServer;
  before(async () => { t = await startTestServer(); });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('refuses a token once it has expired, though it was accepted (and remembered) before', async function () {
    this.timeout(20_000);
    const token = await t.token('shortlived', { ttlSeconds: 1 });
    expect((await t.http.get('/api/v1/workspaces').set(bearer(token))).status).to.equal(200);
    expect((await t.http.get('/api/v1/workspaces').set(bearer(token))).status).to.equal(200);
    await new Promise((r) => setTimeout(r, 7_000)); // past expiry and the verifier's 5 s clock tolerance
    const res = await t.http.get('/api/v1/workspaces').set(bearer(token));
    expect(res.status).to.equal(401);
    expect(res.body.error.message).to.match(/expired/);
  });
});
