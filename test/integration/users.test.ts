import { expect } from 'chai';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';

/** The user record kept from token claims, as the per-request authentication step maintains it. */
describe('user records from token claims', () => {
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  let workspace: { id: string; slug: string };
  before(async () => {
    t = await startTestServer();
    ({ tokens, workspace } = await seedWorkspace(t, 'acme'));
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

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
    const owner = users.get({ username: 'acme-owner' });
    expect(owner).to.include({ username: 'acme-owner', firstName: 'Olive' });
    expect(users.get({ id: owner!.id })).to.deep.equal(owner);
    expect(users.get({ id: owner!.id.toUpperCase() })).to.deep.equal(owner);
    expect(users.get({ username: 'nobody' })).to.equal(null);
    expect(users.get({ id: '00000000-0000-4000-8000-000000000000' })).to.equal(null);
    expect(users.get({ id: 'not-a-uuid' })).to.equal(null);
  });
});
