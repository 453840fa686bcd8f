import { expect } from 'chai';
import { startTestServer, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';

/*
 * Invariant sites (docs/architecture.md): racing requests fired in
 * parallel over HTTP; exactly the allowed outcome happens. CI also runs
 * these in the test read-delay mode, where every read yields to the others.
 */
describe('invariants under racing requests', function () {
  this.timeout(120_000);
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  let ws: { id: string; slug: string };
  const statuses = (responses: Array<{ status: number }>) => responses.map((r) => r.status).sort((a, b) => a - b);
  const count = (list: number[], status: number) => list.filter((s) => s === status).length;

  before(async () => {
    t = await startTestServer();
    ({ tokens, workspace: ws } = await seedWorkspace(t, 'acme'));
  });
  after(async () => t.close());

  it('20 creates of one alias (C5): exactly one 200, the others 409', async () => {
    const body = { alias: 'raced', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT WHERE { ?s ?p ?o }' };
    const res = await Promise.all(Array.from({ length: 20 }, () => t.http.post('/api/v1/commands/acme').set(bearer(tokens.member)).send(body)));
    const got = statuses(res);
    expect(count(got, 200), JSON.stringify(got)).to.equal(1);
    expect(count(got, 409)).to.equal(19);
    const own = (await t.http.get('/api/v1/commands/acme').set(bearer(tokens.member))).body.data as Array<{ alias: string }>;
    expect(own.filter((c) => c.alias === 'raced')).to.have.length(1);
  });

  it('two renames to one alias (C2): one 200, one 409', async () => {
    const make = async (alias: string) => (await t.http.post('/api/v1/commands/acme').set(bearer(tokens.member))
      .send({ alias, scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT WHERE { ?s ?p ?o }' })).body.data.id as string;
    const [a, b] = [await make('first'), await make('second')];
    const res = await Promise.all([a, b].map((id) => t.http.put(`/api/v1/commands/acme/${id}`).set(bearer(tokens.member)).send({ alias: 'same' })));
    expect(statuses(res)).to.deep.equal([200, 409]);
    const own = (await t.http.get('/api/v1/commands/acme').set(bearer(tokens.member))).body.data as Array<{ alias: string }>;
    expect(own.filter((c) => c.alias === 'same')).to.have.length(1);
  });

  it('20 assignments of one role to one user (I1): exactly one 200, the others 409, one assignment', async () => {
    const roles = (await t.http.get('/api/v1/iam/acme/roles').set(bearer(tokens.owner))).body.data.items as Array<{ id: string; matrixId: string | null }>;
    const adminRole = roles.find((r) => r.matrixId === null)!;
    const memberId = (await t.http.get('/api/v1/iam/acme/users').set(bearer(tokens.owner))).body.data.items
      .find((u: { username: string }) => u.username === 'acme-member').id as string;
    const res = await Promise.all(Array.from({ length: 20 }, () => t.http.post(`/api/v1/iam/acme/roles/${adminRole.id}/assignees/${memberId}`).set(bearer(tokens.root))));
    const got = statuses(res);
    expect(count(got, 200), JSON.stringify(got)).to.equal(1);
    expect(count(got, 409)).to.equal(19);
    const rows = await t.server.services.store.select(`SELECT ?a WHERE { GRAPH <${t.server.services.graphs.iam(ws.id)}> { ?a <https://w3id.org/wsm/ns#role> ?r ; <https://w3id.org/wsm/ns#principal> ?p . ?p <https://w3id.org/wsm/ns#actor> <${t.server.services.users.userIri(memberId)}> } }`);
    expect(rows).to.have.length(1);
    // Two removals of that assignment (I2): one 200, one 404.
    const removed = await Promise.all([0, 1].map(() => t.http.delete(`/api/v1/iam/acme/roles/${adminRole.id}/assignees/${memberId}`).set(bearer(tokens.root))));
    expect(statuses(removed)).to.deep.equal([200, 404]);
  });

  it('two removals of the last two administrators (member DELETE): one 200, one 409, an administrator remains', async () => {
    expect((await t.http.put('/api/v1/workspaces/acme/members/acme-member').set(bearer(tokens.owner)).send({ admin: true })).status).to.equal(200);
    const res = await Promise.all(['acme-owner', 'acme-member'].map((u) => t.http.delete(`/api/v1/workspaces/acme/members/${u}`).set(bearer(tokens.root))));
    expect(statuses(res), JSON.stringify(res.map((r) => r.body))).to.deep.equal([200, 409]);
    const admins = await t.server.services.workspaces.adminUserIds((await t.server.services.workspaces.find('acme'))!);
    expect(admins).to.have.length(1);
  });
});
