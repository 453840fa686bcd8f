import { expect } from 'chai';
import { bearer, seedWorkspace, startTestServer, removeDir, type TestServer } from '../helpers/server.js';
import { examplePackage } from '../helpers/packages.js';
import { upload, uploadAndWait, waitForCommand } from '../helpers/lifecycle.js';

/**
 * IAM over real installs: the example packages are uploaded through P2 and
 * their roles, agents and principals are read back through I9-I14; role
 * assignments survive an UPDATE and go with an uninstall.
 */
describe('IAM over installed example packages', function () {
  this.timeout(60_000);
  let t: TestServer;
  let ws: string;
  let owner: string;
  let member: string;
  let memberId: string;

  const get = (token: string, path: string) => t.http.get(`/api/v1/iam/${ws}${path}`).set(bearer(token));
  const roleByLabel = async (label: string) => {
    const res = await get(owner, '/roles?pageSize=100');
    expect(res.status).to.equal(200);
    return (res.body.data.items as Array<{ id: string; name?: string; label?: string }>)
      .find((r) => (r.label ?? r.name) === label);
  };
  const agentByLabel = async (label: string) => {
    const res = await get(owner, '/agents?pageSize=100');
    expect(res.status).to.equal(200);
    return (res.body.data.items as Array<{ id: string; label?: string; name?: string }>).find((a) => (a.label ?? a.name) === label);
  };

  before(async () => {
    t = await startTestServer();
    const seeded = await seedWorkspace(t, 'iam-real');
    ws = seeded.workspace.slug;
    owner = seeded.tokens.owner;
    member = seeded.tokens.member;
    const me = await t.http.get(`/api/v1/iam/${ws}/users/me/principal`).set(bearer(member));
    expect(me.status).to.equal(200);
    memberId = me.body.data.actor.id;
    const cmd = await uploadAndWait(t, owner, ws, await examplePackage('project-tracking-1.0.0'));
    expect(cmd.status, JSON.stringify(cmd)).to.equal('completed');
  });
  after(async () => {
    await t.close();
    removeDir(t.dataDir);
  });

  it('lists the built-in role and every role of the installed matrix (I9, I10)', async () => {
    const res = await get(member, '/roles?pageSize=100');
    expect(res.status).to.equal(200);
    const labels = (res.body.data.items as Array<Record<string, unknown>>).map((r) => r.label ?? r.name);
    expect(labels).to.include.members(['Project lead', 'Contributor', 'Stakeholder']);
    expect(res.body.data.totalItems).to.equal(4);
    const builtIn = (res.body.data.items as Array<{ matrixId: string | null }>).filter((r) => r.matrixId === null);
    expect(builtIn).to.have.length(1);
    const lead = await roleByLabel('Project lead');
    const one = await get(member, `/roles/${lead!.id}`);
    expect(one.status).to.equal(200);
    expect(one.body.data.id).to.equal(lead!.id);
    expect(one.body.data.matrixId).to.be.a('string');
  });

  it('lists the agents with AGENT principals holding their specification roles (I12, I13, I14, I11)', async () => {
    const triager = await agentByLabel('Task triager');
    expect(triager, 'Task triager agent').to.exist;
    const one = await get(member, `/agents/${triager!.id}`);
    expect(one.status).to.equal(200);
    const roles = await get(member, `/agents/${triager!.id}/roles`);
    expect(roles.status).to.equal(200);
    expect((roles.body.data as Array<Record<string, unknown>>).map((r) => r.label ?? r.name)).to.deep.equal(['Project lead']);
    const lead = await roleByLabel('Project lead');
    const holders = await get(member, `/roles/${lead!.id}/assignees`);
    expect(holders.status).to.equal(200);
    const agents = (holders.body.data as Array<{ type: string; actor: { id: string } }>).filter((p) => p.type === 'AGENT');
    expect(agents.map((p) => p.actor.id)).to.deep.equal([triager!.id]);
  });

  it('keeps an assignment across an UPDATE of the package and drops it with the uninstall (I1, I7)', async () => {
    const contributor = await roleByLabel('Contributor');
    const assign = await t.http.post(`/api/v1/iam/${ws}/roles/${contributor!.id}/assignees/${memberId}`).set(bearer(owner));
    expect(assign.status, JSON.stringify(assign.body)).to.equal(200);
    expect(assign.body.data).to.be.a('string');
    const again = await t.http.post(`/api/v1/iam/${ws}/roles/${contributor!.id}/assignees/${memberId}`).set(bearer(owner));
    expect(again.status).to.equal(409);

    const update = await uploadAndWait(t, owner, ws, await examplePackage('project-tracking-1.1.0'));
    expect(update.status).to.equal('completed');
    expect(update.commandType).to.equal('UPDATE');
    expect((await roleByLabel('Contributor'))!.id).to.equal(contributor!.id);
    expect(await roleByLabel('Quality reviewer')).to.exist;
    const reviewAssistant = await agentByLabel('Review assistant');
    expect(reviewAssistant).to.exist;
    let mine = await get(member, `/users/${memberId}/roles`);
    expect(mine.status).to.equal(200);
    expect((mine.body.data as Array<{ id: string }>).map((r) => r.id)).to.include(contributor!.id);

    const removal = await t.http.delete(`/api/v1/packages/${ws}/project-tracking`).set(bearer(owner));
    expect(removal.status).to.equal(202);
    const done = await waitForCommand(t, owner, ws, removal.body.data.id);
    expect(done.status).to.equal('completed');
    mine = await get(member, `/users/${memberId}/roles`);
    expect(mine.status).to.equal(200);
    expect(mine.body.data).to.deep.equal([]);
    const roles = await get(member, '/roles');
    expect(roles.body.data.totalItems).to.equal(1);
    const agents = await get(member, '/agents');
    expect(agents.body.data.totalItems).to.equal(0);
    expect((await get(member, `/agents/${reviewAssistant!.id}`)).status).to.equal(404);

    // Installing it again brings the same ids back, without the assignment.
    const reinstall = await upload(t, owner, ws, await examplePackage('project-tracking-1.0.0'));
    expect(reinstall.status).to.equal(202);
    expect((await waitForCommand(t, owner, ws, reinstall.body.data.id)).status).to.equal('completed');
    expect((await roleByLabel('Contributor'))!.id).to.equal(contributor!.id);
    expect((await get(member, `/users/${memberId}/roles`)).body.data).to.deep.equal([]);
  });
});
