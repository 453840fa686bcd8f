import { expect } from 'chai';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { tinyPackage } from '../helpers/packages.js';
import { uploadAndWait, waitForCommand, type CommandJson } from '../helpers/lifecycle.js';
import { sparql, iri, raw } from '../../src/rdf/sparql.js';

const EX = 'https://example.org/spec/';
const UNKNOWN = '00000000-0000-4000-8000-000000000000';
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/** A matrix as its package's Turtle says it: roles (rdfs:label) and agents (iam:hasRole). */
interface MatrixSpec {
  uri: string;
  roles: Array<{ uri: string; label: string; description?: string }>;
  agents: Array<{ uri: string; label: string; description?: string; roles: string[] }>;
}

/** Matrix A: two roles and an agent holding one of them. */
const matrixA: MatrixSpec = {
  uri: `${EX}sales`,
  roles: [
    { uri: `${EX}sales#Editor`, label: 'Editor', description: 'Edits sales data' },
    { uri: `${EX}sales#Viewer`, label: 'Viewer' },
  ],
  agents: [{ uri: `${EX}sales#Bot`, label: 'Sales bot', description: 'Answers sales questions', roles: [`${EX}sales#Viewer`] }],
};
/** A matrix defining only a role; installed before matrix B and uninstalled after, so that role is defined by nobody. */
const matrixGhost: MatrixSpec = { uri: `${EX}nowhere`, roles: [{ uri: `${EX}nowhere#Ghost`, label: 'Ghost' }], agents: [] };
/** Matrix B: a role, and an agent holding a role of matrix A, its own role and a role nobody defines (once the ghost package is gone). */
const matrixB: MatrixSpec = {
  uri: `${EX}audit`,
  roles: [{ uri: `${EX}audit#Auditor`, label: 'Auditor' }],
  agents: [{ uri: `${EX}audit#Checker`, label: 'Checker', roles: [`${EX}sales#Editor`, `${EX}audit#Auditor`, `${EX}nowhere#Ghost`] }],
};

function matrixTurtle(spec: MatrixSpec): string {
  const text = (s: string) => JSON.stringify(s);
  const lines = [
    '@prefix mtx: <https://poliglot.io/os/spec/matrix#> .',
    '@prefix iam: <https://poliglot.io/os/spec/iam#> .',
    '@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .',
    `<${spec.uri}> a mtx:Matrix ; rdfs:label ${text(spec.uri)} .`,
  ];
  for (const r of spec.roles) {
    lines.push(`<${r.uri}> a iam:Role ; rdfs:label ${text(r.label)}${r.description ? ` ; rdfs:comment ${text(r.description)}` : ''} .`);
  }
  for (const a of spec.agents) {
    lines.push(`<${a.uri}> a iam:Agent ; rdfs:label ${text(a.label)}${a.description ? ` ; rdfs:comment ${text(a.description)}` : ''}${a.roles.map((r) => ` ; iam:hasRole <${r}>`).join('')} .`);
  }
  return lines.join('\n');
}

/** Installs (P2) a tiny package holding one matrix and asserts the command completed. */
async function installMatrix(t: TestServer, token: string, ws: string, name: string, spec: MatrixSpec, version = '1.0.0'): Promise<CommandJson> {
  const archive = await tinyPackage({ name, version, matrices: [{ name: 'main', uri: spec.uri, turtle: matrixTurtle(spec) }] });
  const cmd = await uploadAndWait(t, token, ws, archive);
  expect(cmd.status, `install ${name} ${version}: ${JSON.stringify(cmd)}`).to.equal('completed');
  return cmd;
}

/** Uninstalls (P6) a package and asserts the command completed. */
async function uninstallPackage(t: TestServer, token: string, ws: string, name: string): Promise<void> {
  const res = await t.http.delete(`/api/v1/packages/${ws}/${name}`).set(bearer(token));
  expect(res.status, JSON.stringify(res.body)).to.equal(202);
  expect((await waitForCommand(t, token, ws, res.body.data.id)).status).to.equal('completed');
}

interface Installed {
  matrixId: string;
  roleIds: Record<string, string>;
  agentIds: Record<string, string>;
  /** Principal ids of the agents, by agent URI. */
  agentPrincipalIds: Record<string, string>;
}

/** The ids the service answers for an installed matrix's roles, agents and agent principals (through I9, I12, I14, I11). */
async function idsOf(t: TestServer, token: string, ws: string, spec: MatrixSpec): Promise<Installed> {
  const get = async (path: string) => {
    const res = await t.http.get(`/api/v1/iam/${ws}${path}`).set(bearer(token));
    expect(res.status, path).to.equal(200);
    return res.body.data;
  };
  const roles = (await get('/roles?pageSize=100')).items as Array<{ id: string; uri: string; matrixId: string | null }>;
  const agents = (await get('/agents?pageSize=100')).items as Array<{ id: string; uri: string; matrixId: string }>;
  const out: Installed = { matrixId: '', roleIds: {}, agentIds: {}, agentPrincipalIds: {} };
  for (const r of spec.roles) {
    const found = roles.find((x) => x.uri === r.uri);
    expect(found, r.uri).to.exist;
    out.roleIds[r.uri] = found!.id;
    out.matrixId = found!.matrixId!;
  }
  for (const a of spec.agents) {
    const found = agents.find((x) => x.uri === a.uri);
    expect(found, a.uri).to.exist;
    out.agentIds[a.uri] = found!.id;
    const [first] = await get(`/agents/${found!.id}/roles`) as Array<{ id: string }>;
    const holders = await get(`/roles/${first!.id}/assignees`) as Array<{ id: string; type: string; actor: { id: string } }>;
    out.agentPrincipalIds[a.uri] = holders.find((p) => p.type === 'AGENT' && p.actor.id === found!.id)!.id;
  }
  return out;
}

interface Tokens { root: string; owner: string; member: string; outsider: string }

describe('identity and access (I1-I14)', () => {
  let t: TestServer;
  let tokens: Tokens;
  let ws: { id: string; slug: string };
  let a: Installed;
  let b: Installed;
  const userIds: Record<string, string> = {};
  let adminRoleId: string;
  const url = (rest: string) => `/api/v1/iam/acme${rest}`;
  const role = (uri: string) => a.roleIds[uri] ?? b.roleIds[uri]!;
  const editor = () => role(`${EX}sales#Editor`);
  const viewer = () => role(`${EX}sales#Viewer`);
  const auditor = () => role(`${EX}audit#Auditor`);
  const botPrincipal = () => a.agentPrincipalIds[`${EX}sales#Bot`]!;
  const bot = () => a.agentIds[`${EX}sales#Bot`]!;
  const checker = () => b.agentIds[`${EX}audit#Checker`]!;

  /** no token 401, outsider 404, member 403: nothing changes. */
  async function refusedToNonAdmins(method: 'post' | 'delete', path: string) {
    const none = await t.http[method](path);
    expect(none.status, `${method} ${path} without token`).to.equal(401);
    expect(none.headers['www-authenticate']).to.match(/^Bearer/);
    const outsider = await t.http[method](path).set(bearer(tokens.outsider));
    expect(outsider.status, `${method} ${path} by outsider`).to.equal(404);
    expect(outsider.body.error.code).to.equal('NOT_FOUND');
    const member = await t.http[method](path).set(bearer(tokens.member));
    expect(member.status, `${method} ${path} by member`).to.equal(403);
    expect(member.body.error.code).to.equal('FORBIDDEN');
  }

  async function rolesOf(userId: string, token = tokens.owner): Promise<string[]> {
    const res = await t.http.get(url(`/users/${userId}/roles`)).set(bearer(token));
    expect(res.status).to.equal(200);
    return res.body.data.map((r: { id: string }) => r.id);
  }

  before(async () => {
    t = await startTestServer();
    ({ tokens, workspace: ws } = await seedWorkspace(t, 'acme'));
    await installMatrix(t, tokens.owner, 'acme', 'sales', matrixA);
    await installMatrix(t, tokens.owner, 'acme', 'nowhere', matrixGhost);
    await installMatrix(t, tokens.owner, 'acme', 'audit', matrixB);
    await uninstallPackage(t, tokens.owner, 'acme', 'nowhere');
    a = await idsOf(t, tokens.owner, 'acme', matrixA);
    b = await idsOf(t, tokens.owner, 'acme', matrixB);
    const users = await t.http.get(url('/users')).set(bearer(tokens.owner));
    for (const u of users.body.data.items) userIds[u.username] = u.id;
    const outsider = await t.http.get('/api/v1/workspaces').set(bearer(tokens.outsider));
    expect(outsider.status).to.equal(200);
    userIds['acme-outsider'] = (await t.server.services.users.get({ username: 'acme-outsider' }))!.id;
    const roles = await t.http.get(url('/roles')).set(bearer(tokens.owner));
    adminRoleId = roles.body.data.items[0].id;
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  describe('users (I5-I8)', () => {
    it('I5 lists the member users as a page, ordered by username', async () => {
      const res = await t.http.get(url('/users')).set(bearer(tokens.member));
      expect(res.status).to.equal(200);
      expect(res.body.success).to.equal(true);
      const { items, ...paging } = res.body.data;
      expect(paging).to.deep.equal({ page: 1, pageSize: 20, totalItems: 2, totalPages: 1 });
      expect(items.map((u: { username: string }) => u.username)).to.deep.equal(['acme-member', 'acme-owner']);
      expect(items[1]).to.deep.include({ email: 'acme-owner@example.org', firstName: 'Olive', lastName: 'Owner', website: null, emailVerified: false });
      expect(Object.keys(items[1]).sort()).to.deep.equal(['createdAt', 'email', 'emailVerified', 'firstName', 'id', 'lastName', 'updatedAt', 'username', 'website']);
      expect(items[1].createdAt).to.match(ISO);
    });

    it('I5 answers by workspace id too, and to a system admin who is not a member (not listed)', async () => {
      const res = await t.http.get(`/api/v1/iam/${ws.id}/users`).set(bearer(tokens.root));
      expect(res.status).to.equal(200);
      expect(res.body.data.items.map((u: { username: string }) => u.username)).to.not.include('root');
    });

    it('I5 refuses bad paging values (400) and hides the workspace from outsiders (404), without a token 401', async () => {
      for (const q of ['page=0', 'page=-1', 'page=abc', 'pageSize=0', 'pageSize=101', 'pageSize=2.5', 'page=99999999999']) {
        const res = await t.http.get(url(`/users?${q}`)).set(bearer(tokens.owner));
        expect(res.status, q).to.equal(400);
        expect(res.body.error.code).to.equal('BAD_REQUEST');
        expect(res.body.error.message, q).to.match(/page/i);
      }
      expect((await t.http.get(url('/users')).set(bearer(tokens.outsider))).status).to.equal(404);
      expect((await t.http.get('/api/v1/iam/nope/users').set(bearer(tokens.root))).status).to.equal(404);
      expect((await t.http.get(url('/users'))).status).to.equal(401);
    });

    it('I5 pages: page beyond the end is empty with the totals', async () => {
      const res = await t.http.get(url('/users?page=2&pageSize=1')).set(bearer(tokens.owner));
      expect(res.body.data).to.deep.include({ page: 2, pageSize: 1, totalItems: 2, totalPages: 2 });
      expect(res.body.data.items.map((u: { username: string }) => u.username)).to.deep.equal(['acme-owner']);
      const past = await t.http.get(url('/users?page=3&pageSize=1')).set(bearer(tokens.owner));
      expect(past.body.data).to.deep.equal({ items: [], page: 3, pageSize: 1, totalItems: 2, totalPages: 2 });
    });

    it('I6 answers a member user, 404 for a user who is not a member and for unknown ids', async () => {
      const res = await t.http.get(url(`/users/${userIds['acme-owner']}`)).set(bearer(tokens.member));
      expect(res.status).to.equal(200);
      expect(res.body.data).to.include({ id: userIds['acme-owner'], username: 'acme-owner' });
      for (const id of [userIds['acme-outsider'], UNKNOWN, 'not-a-uuid']) {
        const missing = await t.http.get(url(`/users/${id}`)).set(bearer(tokens.owner));
        expect(missing.status, id).to.equal(404);
        expect(missing.body.error.message).to.match(/not a member/);
      }
      expect((await t.http.get(url(`/users/${userIds['acme-owner']}`)).set(bearer(tokens.outsider))).status).to.equal(404);
    });

    it('I7 lists the roles of a user: the owner holds the built-in administrator role', async () => {
      const res = await t.http.get(url(`/users/${userIds['acme-owner']}/roles`)).set(bearer(tokens.member));
      expect(res.status).to.equal(200);
      expect(res.body.data).to.have.length(1);
      expect(res.body.data[0]).to.include({ id: adminRoleId, uri: 'https://w3id.org/wsm/ns#WorkspaceAdministrator', matrixId: null });
      expect(await rolesOf(userIds['acme-member']!)).to.deep.equal([]);
      expect((await t.http.get(url(`/users/${userIds['acme-outsider']}/roles`)).set(bearer(tokens.owner))).status).to.equal(404);
      expect((await t.http.get(url(`/users/${UNKNOWN}/roles`)).set(bearer(tokens.owner))).status).to.equal(404);
      expect((await t.http.get(url(`/users/${userIds['acme-owner']}/roles`)).set(bearer(tokens.outsider))).status).to.equal(404);
    });

    it('I8 answers the caller\'s USER principal with the User as actor', async () => {
      const res = await t.http.get(url('/users/me/principal')).set(bearer(tokens.member));
      expect(res.status).to.equal(200);
      const p = res.body.data;
      expect(p).to.include({ type: 'USER', workspaceId: ws.id });
      expect(p.id).to.match(/^[0-9a-f-]{36}$/);
      expect(p.createdAt).to.match(ISO);
      expect(p.actor).to.include({ id: userIds['acme-member'], username: 'acme-member' });
      const owner = await t.http.get(`/api/v1/iam/${ws.id}/users/me/principal`).set(bearer(tokens.owner));
      expect(owner.body.data.id).to.not.equal(p.id);
    });

    it('I8 answers 404 to a system admin who is not a member, and to outsiders', async () => {
      const root = await t.http.get(url('/users/me/principal')).set(bearer(tokens.root));
      expect(root.status).to.equal(404);
      expect(root.body.error.message).to.match(/not a member/);
      expect((await t.http.get(url('/users/me/principal')).set(bearer(tokens.outsider))).status).to.equal(404);
      expect((await t.http.get(url('/users/me/principal'))).status).to.equal(401);
    });
  });

  describe('roles and agents (I9-I14)', () => {
    it('I9 lists the built-in role first, then the matrix roles by label', async () => {
      const res = await t.http.get(url('/roles')).set(bearer(tokens.member));
      expect(res.status).to.equal(200);
      const { items, ...paging } = res.body.data;
      expect(paging).to.deep.equal({ page: 1, pageSize: 20, totalItems: 4, totalPages: 1 });
      expect(items.map((r: { label: string }) => r.label)).to.deep.equal(['Workspace administrator', 'Auditor', 'Editor', 'Viewer']);
      expect(items[0]).to.include({ id: adminRoleId, matrixId: null });
      const ed = items.find((r: { label: string }) => r.label === 'Editor');
      expect(ed).to.deep.equal({
        id: editor(), uri: `${EX}sales#Editor`, label: 'Editor', description: 'Edits sales data', matrixId: a.matrixId,
        createdAt: ed.createdAt, updatedAt: ed.updatedAt,
      });
      expect(ed.createdAt).to.match(ISO);
      expect(items.find((r: { label: string }) => r.label === 'Viewer').description).to.equal(null);
      expect(items.find((r: { label: string }) => r.label === 'Auditor').matrixId).to.equal(b.matrixId);
    });

    it('I9 pages, and refuses bad values and filters with 400', async () => {
      const res = await t.http.get(url('/roles?page=2&pageSize=3')).set(bearer(tokens.owner));
      expect(res.body.data).to.deep.include({ page: 2, pageSize: 3, totalItems: 4, totalPages: 2 });
      expect(res.body.data.items.map((r: { label: string }) => r.label)).to.deep.equal(['Viewer']);
      for (const q of ['pageSize=500', 'page=0', 'assignee=bob', 'principal=1234']) {
        const bad = await t.http.get(url(`/roles?${q}`)).set(bearer(tokens.owner));
        expect(bad.status, q).to.equal(400);
      }
      expect((await t.http.get(url('/roles')).set(bearer(tokens.outsider))).status).to.equal(404);
      expect((await t.http.get('/api/v1/iam/nope/roles').set(bearer(tokens.owner))).status).to.equal(404);
      expect((await t.http.get(url('/roles')).set(bearer(tokens.root))).status).to.equal(200);
    });

    it('I9 narrows by assignee (user id) and principal (principal id, agents with their specification roles)', async () => {
      const byOwner = await t.http.get(url(`/roles?assignee=${userIds['acme-owner']}`)).set(bearer(tokens.owner));
      expect(byOwner.body.data.items.map((r: { id: string }) => r.id)).to.deep.equal([adminRoleId]);
      expect(byOwner.body.data.totalItems).to.equal(1);
      const byMember = await t.http.get(url(`/roles?assignee=${userIds['acme-member']}`)).set(bearer(tokens.owner));
      expect(byMember.body.data).to.deep.include({ items: [], totalItems: 0, totalPages: 0 });
      const byBot = await t.http.get(url(`/roles?principal=${botPrincipal()}`)).set(bearer(tokens.owner));
      expect(byBot.body.data.items.map((r: { id: string }) => r.id)).to.deep.equal([viewer()]);
      const checkerPrincipal = b.agentPrincipalIds[`${EX}audit#Checker`];
      const byChecker = await t.http.get(url(`/roles?principal=${checkerPrincipal}`)).set(bearer(tokens.owner));
      expect(byChecker.body.data.items.map((r: { label: string }) => r.label)).to.deep.equal(['Auditor', 'Editor']);
      const ownerPrincipal = (await t.http.get(url('/users/me/principal')).set(bearer(tokens.owner))).body.data.id;
      const both = await t.http.get(url(`/roles?principal=${ownerPrincipal}&assignee=${userIds['acme-owner']}`)).set(bearer(tokens.owner));
      expect(both.body.data.items.map((r: { id: string }) => r.id)).to.deep.equal([adminRoleId]);
      const nobody = await t.http.get(url(`/roles?principal=${UNKNOWN}`)).set(bearer(tokens.owner));
      expect(nobody.body.data.totalItems).to.equal(0);
    });

    it('I10 answers one role; 404 for unknown ids and outsiders', async () => {
      const res = await t.http.get(url(`/roles/${auditor()}`)).set(bearer(tokens.member));
      expect(res.status).to.equal(200);
      expect(res.body.data).to.include({ id: auditor(), label: 'Auditor', uri: `${EX}audit#Auditor`, matrixId: b.matrixId });
      const admin = await t.http.get(url(`/roles/${adminRoleId}`)).set(bearer(tokens.member));
      expect(admin.body.data).to.include({ label: 'Workspace administrator', matrixId: null });
      for (const id of [UNKNOWN, 'x', bot()]) {
        const missing = await t.http.get(url(`/roles/${id}`)).set(bearer(tokens.owner));
        expect(missing.status, id).to.equal(404);
        expect(missing.body.error.message).to.match(/Role/);
      }
      expect((await t.http.get(url(`/roles/${auditor()}`)).set(bearer(tokens.outsider))).status).to.equal(404);
    });

    it('I11 lists the principals holding a role: users by assignment, agents by specification', async () => {
      const admins = await t.http.get(url(`/roles/${adminRoleId}/assignees`)).set(bearer(tokens.member));
      expect(admins.status).to.equal(200);
      expect(admins.body.data).to.have.length(1);
      expect(admins.body.data[0]).to.include({ type: 'USER', workspaceId: ws.id });
      expect(admins.body.data[0].actor.username).to.equal('acme-owner');
      const editors = await t.http.get(url(`/roles/${editor()}/assignees`)).set(bearer(tokens.member));
      expect(editors.body.data).to.have.length(1);
      const p = editors.body.data[0];
      expect(p).to.include({ id: b.agentPrincipalIds[`${EX}audit#Checker`], type: 'AGENT', workspaceId: ws.id });
      expect(p.actor).to.include({ id: checker(), uri: `${EX}audit#Checker`, label: 'Checker', matrixId: b.matrixId });
      expect(p.createdAt).to.match(ISO);
      expect((await t.http.get(url(`/roles/${UNKNOWN}/assignees`)).set(bearer(tokens.owner))).status).to.equal(404);
      expect((await t.http.get(url(`/roles/${editor()}/assignees`)).set(bearer(tokens.outsider))).status).to.equal(404);
    });

    it('I12 lists the agents as a page; 400 on bad paging, 404 for outsiders', async () => {
      const res = await t.http.get(url('/agents')).set(bearer(tokens.member));
      expect(res.status).to.equal(200);
      expect(res.body.data).to.deep.include({ page: 1, pageSize: 20, totalItems: 2, totalPages: 1 });
      expect(res.body.data.items.map((x: { label: string }) => x.label)).to.deep.equal(['Checker', 'Sales bot']);
      expect(res.body.data.items[1]).to.include({ id: bot(), uri: `${EX}sales#Bot`, description: 'Answers sales questions', matrixId: a.matrixId });
      const second = await t.http.get(url('/agents?pageSize=1&page=2')).set(bearer(tokens.owner));
      expect(second.body.data).to.deep.include({ totalItems: 2, totalPages: 2 });
      expect(second.body.data.items.map((x: { id: string }) => x.id)).to.deep.equal([bot()]);
      expect((await t.http.get(url('/agents?pageSize=0')).set(bearer(tokens.owner))).status).to.equal(400);
      expect((await t.http.get(url('/agents')).set(bearer(tokens.outsider))).status).to.equal(404);
      expect((await t.http.get('/api/v1/iam/nope/agents').set(bearer(tokens.owner))).status).to.equal(404);
    });

    it('I13 answers one agent; 404 for unknown ids (a role id names no agent)', async () => {
      const res = await t.http.get(url(`/agents/${checker()}`)).set(bearer(tokens.member));
      expect(res.status).to.equal(200);
      expect(res.body.data).to.include({ id: checker(), label: 'Checker', matrixId: b.matrixId, description: null });
      for (const id of [UNKNOWN, editor(), 'zzz']) {
        expect((await t.http.get(url(`/agents/${id}`)).set(bearer(tokens.owner))).status, id).to.equal(404);
      }
      expect((await t.http.get(url(`/agents/${checker()}`)).set(bearer(tokens.outsider))).status).to.equal(404);
    });

    it('I14 lists an agent\'s specification roles, across matrices, skipping roles nobody defines', async () => {
      const res = await t.http.get(url(`/agents/${checker()}/roles`)).set(bearer(tokens.member));
      expect(res.status).to.equal(200);
      expect(res.body.data.map((r: { id: string }) => r.id)).to.deep.equal([auditor(), editor()]);
      const botRoles = await t.http.get(url(`/agents/${bot()}/roles`)).set(bearer(tokens.member));
      expect(botRoles.body.data.map((r: { id: string }) => r.id)).to.deep.equal([viewer()]);
      expect((await t.http.get(url(`/agents/${UNKNOWN}/roles`)).set(bearer(tokens.owner))).status).to.equal(404);
      expect((await t.http.get(url(`/agents/${bot()}/roles`)).set(bearer(tokens.outsider))).status).to.equal(404);
    });
  });

  describe('role assignments (I1-I4)', () => {
    it('I1 is refused without a token (401), to outsiders (404) and members (403)', async () => {
      await refusedToNonAdmins('post', url(`/roles/${editor()}/assignees/${userIds['acme-member']}`));
      expect(await rolesOf(userIds['acme-member']!)).to.deep.equal([]);
    });

    it('I1 assigns a role to a member (administrator), then 409 when assigned again', async () => {
      const res = await t.http.post(url(`/roles/${editor()}/assignees/${userIds['acme-member']}`)).set(bearer(tokens.owner));
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.equal({ success: true, data: 'Role "Editor" assigned to user "acme-member"' });
      expect(await rolesOf(userIds['acme-member']!)).to.deep.equal([editor()]);
      const again = await t.http.post(url(`/roles/${editor()}/assignees/${userIds['acme-member']}`)).set(bearer(tokens.owner));
      expect(again.status).to.equal(409);
      expect(again.body.error.code).to.equal('CONFLICT');
      expect(again.body.error.message).to.match(/already has the role "Editor"/);
      const holders = await t.http.get(url(`/roles/${editor()}/assignees`)).set(bearer(tokens.owner));
      expect(holders.body.data.map((p: { type: string }) => p.type)).to.deep.equal(['USER', 'AGENT']);
      const filtered = await t.http.get(url(`/roles?assignee=${userIds['acme-member']}`)).set(bearer(tokens.owner));
      expect(filtered.body.data.items.map((r: { id: string }) => r.id)).to.deep.equal([editor()]);
    });

    it('I1 by a system admin who is not a member succeeds', async () => {
      const res = await t.http.post(url(`/roles/${viewer()}/assignees/${userIds['acme-member']}`)).set(bearer(tokens.root));
      expect(res.status).to.equal(200);
      expect(await rolesOf(userIds['acme-member']!)).to.deep.equal([editor(), viewer()]);
    });

    it('I1 answers 404 for an unknown role or a user who is not a member, and changes nothing', async () => {
      const unknownRole = await t.http.post(url(`/roles/${UNKNOWN}/assignees/${userIds['acme-member']}`)).set(bearer(tokens.owner));
      expect(unknownRole.status).to.equal(404);
      expect(unknownRole.body.error.message).to.match(/Role/);
      const agentAsRole = await t.http.post(url(`/roles/${bot()}/assignees/${userIds['acme-member']}`)).set(bearer(tokens.owner));
      expect(agentAsRole.status).to.equal(404);
      for (const id of [userIds['acme-outsider'], UNKNOWN, 'me']) {
        const res = await t.http.post(url(`/roles/${auditor()}/assignees/${id}`)).set(bearer(tokens.owner));
        expect(res.status, id).to.equal(404);
        expect(res.body.error.message).to.match(/not a member/);
      }
      const holders = await t.http.get(url(`/roles/${auditor()}/assignees`)).set(bearer(tokens.owner));
      expect(holders.body.data.map((p: { type: string }) => p.type)).to.deep.equal(['AGENT']);
    });

    it('I2 is refused without a token (401), to outsiders (404) and members (403)', async () => {
      await refusedToNonAdmins('delete', url(`/roles/${viewer()}/assignees/${userIds['acme-member']}`));
      expect(await rolesOf(userIds['acme-member']!)).to.include(viewer());
    });

    it('I2 removes a role from a user (administrator and system admin), then 404 for the missing assignment', async () => {
      const res = await t.http.delete(url(`/roles/${viewer()}/assignees/${userIds['acme-member']}`)).set(bearer(tokens.owner));
      expect(res.status).to.equal(200);
      expect(res.body.data).to.equal('Role "Viewer" removed from user "acme-member"');
      const again = await t.http.delete(url(`/roles/${viewer()}/assignees/${userIds['acme-member']}`)).set(bearer(tokens.owner));
      expect(again.status).to.equal(404);
      expect(again.body.error.message).to.match(/no assignment/);
      const byRoot = await t.http.delete(url(`/roles/${editor()}/assignees/${userIds['acme-member']}`)).set(bearer(tokens.root));
      expect(byRoot.status).to.equal(200);
      expect(await rolesOf(userIds['acme-member']!)).to.deep.equal([]);
    });

    it('I2 answers 404 for an unknown role or user', async () => {
      expect((await t.http.delete(url(`/roles/${UNKNOWN}/assignees/${userIds['acme-owner']}`)).set(bearer(tokens.owner))).status).to.equal(404);
      expect((await t.http.delete(url(`/roles/${adminRoleId}/assignees/${UNKNOWN}`)).set(bearer(tokens.owner))).status).to.equal(404);
      expect((await t.http.delete(url(`/roles/${adminRoleId}/assignees/${userIds['acme-outsider']}`)).set(bearer(tokens.owner))).status).to.equal(404);
    });

    it('assigning the administrator role makes a member an administrator at once; removing it takes that back', async () => {
      const before = await t.http.post(url(`/roles/${auditor()}/assignees/${userIds['acme-owner']}`)).set(bearer(tokens.member));
      expect(before.status).to.equal(403);
      const grant = await t.http.post(url(`/roles/${adminRoleId}/assignees/${userIds['acme-member']}`)).set(bearer(tokens.owner));
      expect(grant.status).to.equal(200);
      const byMember = await t.http.post(url(`/roles/${auditor()}/assignees/${userIds['acme-owner']}`)).set(bearer(tokens.member));
      expect(byMember.status).to.equal(200);
      const admins = await t.http.get(url(`/roles/${adminRoleId}/assignees`)).set(bearer(tokens.owner));
      expect(admins.body.data.map((p: { actor: { username: string } }) => p.actor.username)).to.deep.equal(['acme-member', 'acme-owner']);
      // The owner is always an administrator: its role cannot be removed, even by another administrator.
      const ownerRole = await t.http.delete(url(`/roles/${adminRoleId}/assignees/${userIds['acme-owner']}`)).set(bearer(tokens.member));
      expect(ownerRole.status).to.equal(409);
      expect(ownerRole.body.error.message).to.match(/owner/);
      const revoke = await t.http.delete(url(`/roles/${adminRoleId}/assignees/${userIds['acme-member']}`)).set(bearer(tokens.owner));
      expect(revoke.status).to.equal(200);
      const after = await t.http.delete(url(`/roles/${auditor()}/assignees/${userIds['acme-owner']}`)).set(bearer(tokens.member));
      expect(after.status).to.equal(403);
      expect((await t.http.delete(url(`/roles/${auditor()}/assignees/${userIds['acme-owner']}`)).set(bearer(tokens.owner))).status).to.equal(200);
    });

    it('I3 is refused without a token (401), to outsiders (404) and members (403)', async () => {
      await refusedToNonAdmins('post', url(`/roles/${auditor()}/assignees/principals/${botPrincipal()}`));
    });

    it('I3 assigns a role to an agent\'s principal; 409 again, and 409 for a role of its specification', async () => {
      const res = await t.http.post(url(`/roles/${auditor()}/assignees/principals/${botPrincipal()}`)).set(bearer(tokens.owner));
      expect(res.status).to.equal(200);
      expect(res.body.data).to.equal('Role "Auditor" assigned to agent "Sales bot"');
      const roles = await t.http.get(url(`/agents/${bot()}/roles`)).set(bearer(tokens.member));
      expect(roles.body.data.map((r: { id: string }) => r.id)).to.deep.equal([auditor(), viewer()]);
      const holders = await t.http.get(url(`/roles/${auditor()}/assignees`)).set(bearer(tokens.member));
      expect(holders.body.data.map((p: { actor: { label: string } }) => p.actor.label)).to.deep.equal(['Checker', 'Sales bot']);
      const again = await t.http.post(url(`/roles/${auditor()}/assignees/principals/${botPrincipal()}`)).set(bearer(tokens.owner));
      expect(again.status).to.equal(409);
      const spec = await t.http.post(url(`/roles/${viewer()}/assignees/principals/${botPrincipal()}`)).set(bearer(tokens.owner));
      expect(spec.status).to.equal(409);
      expect(spec.body.error.message).to.match(/specification/);
    });

    it('I3 assigns a role to a user\'s principal (system admin)', async () => {
      const principal = (await t.http.get(url('/users/me/principal')).set(bearer(tokens.member))).body.data.id;
      const res = await t.http.post(url(`/roles/${viewer()}/assignees/principals/${principal}`)).set(bearer(tokens.root));
      expect(res.status).to.equal(200);
      expect(res.body.data).to.equal('Role "Viewer" assigned to user "acme-member"');
      expect(await rolesOf(userIds['acme-member']!)).to.deep.equal([viewer()]);
      // The same assignment through I1 is a conflict: it is one assignment.
      expect((await t.http.post(url(`/roles/${viewer()}/assignees/${userIds['acme-member']}`)).set(bearer(tokens.owner))).status).to.equal(409);
    });

    it('I3 answers 404 for an unknown role or principal', async () => {
      expect((await t.http.post(url(`/roles/${UNKNOWN}/assignees/principals/${botPrincipal()}`)).set(bearer(tokens.owner))).status).to.equal(404);
      for (const id of [UNKNOWN, bot(), userIds['acme-member'], 'nope']) {
        const res = await t.http.post(url(`/roles/${editor()}/assignees/principals/${id}`)).set(bearer(tokens.owner));
        expect(res.status, id).to.equal(404);
        expect(res.body.error.message).to.match(/Principal/);
      }
    });

    it('I4 is refused without a token (401), to outsiders (404) and members (403)', async () => {
      await refusedToNonAdmins('delete', url(`/roles/${auditor()}/assignees/principals/${botPrincipal()}`));
      const roles = await t.http.get(url(`/agents/${bot()}/roles`)).set(bearer(tokens.member));
      expect(roles.body.data.map((r: { id: string }) => r.id)).to.include(auditor());
    });

    it('I4 removes an assigned role from an agent; a specification role is not an assignment (404)', async () => {
      const spec = await t.http.delete(url(`/roles/${viewer()}/assignees/principals/${botPrincipal()}`)).set(bearer(tokens.owner));
      expect(spec.status).to.equal(404);
      expect(spec.body.error.message).to.match(/specification/);
      const res = await t.http.delete(url(`/roles/${auditor()}/assignees/principals/${botPrincipal()}`)).set(bearer(tokens.owner));
      expect(res.status).to.equal(200);
      expect(res.body.data).to.equal('Role "Auditor" removed from agent "Sales bot"');
      const again = await t.http.delete(url(`/roles/${auditor()}/assignees/principals/${botPrincipal()}`)).set(bearer(tokens.owner));
      expect(again.status).to.equal(404);
      const roles = await t.http.get(url(`/agents/${bot()}/roles`)).set(bearer(tokens.member));
      expect(roles.body.data.map((r: { id: string }) => r.id)).to.deep.equal([viewer()]);
    });

    it('I4 removes a role from a user principal (system admin); 404 for unknown role or principal', async () => {
      const principal = (await t.http.get(url('/users/me/principal')).set(bearer(tokens.member))).body.data.id;
      expect((await t.http.delete(url(`/roles/${UNKNOWN}/assignees/principals/${principal}`)).set(bearer(tokens.root))).status).to.equal(404);
      expect((await t.http.delete(url(`/roles/${viewer()}/assignees/principals/${UNKNOWN}`)).set(bearer(tokens.root))).status).to.equal(404);
      const res = await t.http.delete(url(`/roles/${viewer()}/assignees/principals/${principal}`)).set(bearer(tokens.root));
      expect(res.status).to.equal(200);
      expect(await rolesOf(userIds['acme-member']!)).to.deep.equal([]);
    });

    it('I4 on the owner\'s administrator role is 409', async () => {
      const principal = (await t.http.get(url('/users/me/principal')).set(bearer(tokens.owner))).body.data.id;
      const res = await t.http.delete(url(`/roles/${adminRoleId}/assignees/principals/${principal}`)).set(bearer(tokens.owner));
      expect(res.status).to.equal(409);
      expect(await rolesOf(userIds['acme-owner']!)).to.deep.equal([adminRoleId]);
    });
  });

  describe('reinstall and vanished roles', () => {
    it('drops the assignments of an uninstalled package\'s roles and agents; a reinstall gives the same ids, without them', async () => {
      const member = userIds['acme-member']!;
      expect((await t.http.post(url(`/roles/${editor()}/assignees/${member}`)).set(bearer(tokens.owner))).status).to.equal(200);
      expect((await t.http.post(url(`/roles/${auditor()}/assignees/${member}`)).set(bearer(tokens.owner))).status).to.equal(200);
      expect((await t.http.post(url(`/roles/${adminRoleId}/assignees/principals/${botPrincipal()}`)).set(bearer(tokens.owner))).status).to.equal(200);
      await uninstallPackage(t, tokens.owner, 'acme', 'sales');

      expect(await rolesOf(member)).to.deep.equal([auditor()]);
      const filtered = await t.http.get(url(`/roles?assignee=${member}`)).set(bearer(tokens.owner));
      expect(filtered.body.data).to.deep.include({ totalItems: 1 });
      const all = await t.http.get(url('/roles')).set(bearer(tokens.owner));
      expect(all.body.data.items.map((r: { label: string }) => r.label)).to.deep.equal(['Workspace administrator', 'Auditor']);
      expect((await t.http.get(url(`/roles/${editor()}`)).set(bearer(tokens.owner))).status).to.equal(404);
      expect((await t.http.delete(url(`/roles/${editor()}/assignees/${member}`)).set(bearer(tokens.owner))).status).to.equal(404);
      // The agent is gone: its principal no longer holds the administrator role, and the checker lost its Editor role.
      const admins = await t.http.get(url(`/roles/${adminRoleId}/assignees`)).set(bearer(tokens.owner));
      expect(admins.body.data.map((p: { type: string }) => p.type)).to.deep.equal(['USER']);
      expect((await t.http.get(url(`/agents/${bot()}`)).set(bearer(tokens.owner))).status).to.equal(404);
      expect((await t.http.post(url(`/roles/${auditor()}/assignees/principals/${botPrincipal()}`)).set(bearer(tokens.owner))).status).to.equal(404);
      const checkerRoles = await t.http.get(url(`/agents/${checker()}/roles`)).set(bearer(tokens.owner));
      expect(checkerRoles.body.data.map((r: { id: string }) => r.id)).to.deep.equal([auditor()]);
      const agents = await t.http.get(url('/agents')).set(bearer(tokens.owner));
      expect(agents.body.data).to.deep.include({ totalItems: 1 });

      const reinstall = await installMatrix(t, tokens.owner, 'acme', 'sales', matrixA);
      expect(reinstall.commandType).to.equal('INSTALL');
      const again = await idsOf(t, tokens.owner, 'acme', matrixA);
      expect(again).to.deep.equal(a);
      // The assignments went with the uninstall: neither the member's Editor nor the bot's administrator role is back.
      expect(await rolesOf(member)).to.deep.equal([auditor()]);
      const admins2 = await t.http.get(url(`/roles/${adminRoleId}/assignees`)).set(bearer(tokens.owner));
      expect(admins2.body.data.map((p: { type: string }) => p.type)).to.deep.equal(['USER']);
      const checkerRoles2 = await t.http.get(url(`/agents/${checker()}/roles`)).set(bearer(tokens.owner));
      expect(checkerRoles2.body.data.map((r: { id: string }) => r.id)).to.deep.equal([auditor(), editor()]);
      // So they can be made again (a 409 would mean they had stayed).
      expect((await t.http.post(url(`/roles/${adminRoleId}/assignees/principals/${botPrincipal()}`)).set(bearer(tokens.owner))).status).to.equal(200);
      expect((await t.http.post(url(`/roles/${editor()}/assignees/${member}`)).set(bearer(tokens.owner))).status).to.equal(200);
    });

    it('lists a role defined by two matrices once', async () => {
      await installMatrix(t, tokens.owner, 'acme', 'dup', { uri: `${EX}dup`, roles: [{ uri: `${EX}audit#Auditor`, label: 'Auditor' }], agents: [] });
      const all = await t.http.get(url('/roles')).set(bearer(tokens.owner));
      expect(all.body.data.totalItems).to.equal(4);
      const auditors = all.body.data.items.filter((r: { uri: string }) => r.uri === `${EX}audit#Auditor`);
      expect(auditors.map((r: { id: string }) => r.id)).to.deep.equal([auditor()]);
      // Uninstalling one of the two keeps the role and its assignments: the other matrix still defines it.
      await uninstallPackage(t, tokens.owner, 'acme', 'dup');
      expect(await rolesOf(userIds['acme-member']!)).to.deep.equal([auditor(), editor()]);
      expect((await t.http.get(url(`/roles/${auditor()}`)).set(bearer(tokens.owner))).status).to.equal(200);
    });

    it('reads roles and agents only from derived graphs, never from a specification graph a package wrote', async () => {
      const { store, graphs } = t.server.services;
      const forged = graphs.resource('role', UNKNOWN);
      const specGraph = graphs.matrix(ws.id, a.matrixId);
      const wsIri = graphs.resource('workspace', ws.id);
      const forgedAgent = graphs.resource('agent', UNKNOWN);
      await store.update(sparql`PREFIX wsm: <https://w3id.org/wsm/ns#>
        INSERT DATA { GRAPH ${iri(specGraph)} {
          ${iri(forged)} a wsm:Role ; wsm:id "${raw(UNKNOWN)}" ; wsm:uri <${raw(EX)}forged> ; wsm:label "Forged" ; wsm:workspace ${iri(wsIri)} ;
            wsm:createdAt "2020-01-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> ; wsm:updatedAt "2020-01-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .
          ${iri(forgedAgent)} a wsm:Agent ; wsm:id "${raw(UNKNOWN)}" ; wsm:uri <${raw(EX)}forgedAgent> ; wsm:workspace ${iri(wsIri)} ;
            wsm:createdAt "2020-01-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> ; wsm:updatedAt "2020-01-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .
          ${iri(graphs.resource('agent', bot()))} wsm:role ${iri(graphs.resource('role', auditor()))} .
        } }`, [specGraph]);
      const all = await t.http.get(url('/roles')).set(bearer(tokens.owner));
      expect(all.body.data.items.map((r: { label: string }) => r.label)).to.not.include('Forged');
      expect((await t.http.get(url(`/roles/${UNKNOWN}`)).set(bearer(tokens.owner))).status).to.equal(404);
      expect((await t.http.get(url(`/agents/${UNKNOWN}`)).set(bearer(tokens.owner))).status).to.equal(404);
      const agents = await t.http.get(url('/agents')).set(bearer(tokens.owner));
      expect(agents.body.data.totalItems).to.equal(2);
      // The bot holds Viewer by its specification and the built-in role by an assignment (test above), not Auditor.
      const botRoles = await t.http.get(url(`/agents/${bot()}/roles`)).set(bearer(tokens.owner));
      expect(botRoles.body.data.map((r: { id: string }) => r.id)).to.deep.equal([adminRoleId, viewer()]);
      // Reinstalling replaces the specification graph: the forged records go.
      const reinstall = await installMatrix(t, tokens.owner, 'acme', 'sales', matrixA);
      expect(reinstall.commandType).to.equal('REINSTALL');
      expect(await store.ask(sparql`ASK { GRAPH ${iri(specGraph)} { ?s <https://w3id.org/wsm/ns#id> "${raw(UNKNOWN)}" } }`)).to.equal(false);
      expect((await t.http.get(url(`/agents/${bot()}/roles`)).set(bearer(tokens.owner))).body.data.map((r: { id: string }) => r.id))
        .to.deep.equal([adminRoleId, viewer()]);
    });

    it('drops the assignments of a role an UPDATE removes, and keeps those of the roles it keeps', async () => {
      const member = userIds['acme-member']!;
      expect((await t.http.post(url(`/roles/${viewer()}/assignees/${member}`)).set(bearer(tokens.owner))).status).to.equal(200);
      expect(await rolesOf(member)).to.deep.equal([auditor(), editor(), viewer()]);
      // 1.1.0 drops the Viewer role; the bot holds Editor instead.
      const withoutViewer: MatrixSpec = {
        uri: matrixA.uri,
        roles: [matrixA.roles[0]!],
        agents: [{ ...matrixA.agents[0]!, roles: [`${EX}sales#Editor`] }],
      };
      const update = await installMatrix(t, tokens.owner, 'acme', 'sales', withoutViewer, '1.1.0');
      expect(update.commandType).to.equal('UPDATE');
      expect(await rolesOf(member)).to.deep.equal([auditor(), editor()]);
      expect((await t.http.get(url(`/roles/${viewer()}`)).set(bearer(tokens.owner))).status).to.equal(404);
      const kept = await idsOf(t, tokens.owner, 'acme', withoutViewer);
      expect(kept.roleIds[`${EX}sales#Editor`]).to.equal(editor());
      expect(kept.agentPrincipalIds).to.deep.equal(a.agentPrincipalIds);
      // The bot's principal stays, and so does its assignment.
      const botRoles = await t.http.get(url(`/agents/${bot()}/roles`)).set(bearer(tokens.owner));
      expect(botRoles.body.data.map((r: { id: string }) => r.id)).to.deep.equal([adminRoleId, editor()]);
      // Viewer comes back with 1.2.0, with its old id but not its assignment.
      expect((await installMatrix(t, tokens.owner, 'acme', 'sales', matrixA, '1.2.0')).commandType).to.equal('UPDATE');
      expect((await t.http.get(url(`/roles/${viewer()}`)).set(bearer(tokens.owner))).status).to.equal(200);
      expect(await rolesOf(member)).to.deep.equal([auditor(), editor()]);
    });

    it('keeps workspaces apart: another workspace sees none of these roles, agents or users', async () => {
      const other = await seedWorkspace(t, 'other');
      const roles = await t.http.get('/api/v1/iam/other/roles').set(bearer(other.tokens.owner));
      expect(roles.body.data.items.map((r: { matrixId: string | null }) => r.matrixId)).to.deep.equal([null]);
      expect(roles.body.data.items[0].id).to.not.equal(adminRoleId);
      const agents = await t.http.get('/api/v1/iam/other/agents').set(bearer(other.tokens.owner));
      expect(agents.body.data.totalItems).to.equal(0);
      expect((await t.http.get(`/api/v1/iam/other/roles/${auditor()}`).set(bearer(other.tokens.owner))).status).to.equal(404);
      expect((await t.http.get(`/api/v1/iam/other/users/${userIds['acme-member']}`).set(bearer(other.tokens.owner))).status).to.equal(404);
      expect((await t.http.post(`/api/v1/iam/other/roles/${auditor()}/assignees/principals/${botPrincipal()}`).set(bearer(other.tokens.owner))).status).to.equal(404);
      // acme's owner is not a member of "other".
      expect((await t.http.get('/api/v1/iam/other/roles').set(bearer(tokens.owner))).status).to.equal(404);
    });
  });
});

describe('identity and access: the last administrator', () => {
  let t: TestServer;
  before(async () => { t = await startTestServer(); });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('refuses to remove the administrator role from the last administrator (409), through I2 and I4', async () => {
    const { tokens, workspace } = await seedWorkspace(t, 'solo');
    expect((await t.http.put('/api/v1/workspaces/solo/members/sam').set(bearer(tokens.owner)).send({ admin: true })).status).to.equal(200);
    const sam = await t.token('sam');
    // A system administrator removes the owner from the workspace (a fellow administrator may not): sam is now the only administrator.
    expect((await t.http.delete('/api/v1/workspaces/solo/members/solo-owner').set(bearer(tokens.root))).status).to.equal(200);
    const adminRole = (await t.http.get('/api/v1/iam/solo/roles').set(bearer(sam))).body.data.items[0];
    expect(adminRole.matrixId).to.equal(null);
    const samPrincipal = (await t.http.get('/api/v1/iam/solo/users/me/principal').set(bearer(sam))).body.data;
    const byUser = await t.http.delete(`/api/v1/iam/solo/roles/${adminRole.id}/assignees/${samPrincipal.actor.id}`).set(bearer(sam));
    expect(byUser.status).to.equal(409);
    expect(byUser.body.error.message).to.match(/last administrator/);
    const byPrincipal = await t.http.delete(`/api/v1/iam/solo/roles/${adminRole.id}/assignees/principals/${samPrincipal.id}`).set(bearer(tokens.root));
    expect(byPrincipal.status).to.equal(409);
    // Still an administrator.
    expect((await t.http.put('/api/v1/workspaces/solo/members/tia').set(bearer(sam)).send({})).status).to.equal(200);
    expect(workspace.slug).to.equal('solo');

    // The owner, added back as a plain member, holds the built-in role by ownership.
    const ownerId = (await t.http.get('/api/v1/workspaces/solo').set(bearer(sam))).body.data.owner.id;
    expect((await t.http.get(`/api/v1/iam/solo/users/${ownerId}/roles`).set(bearer(sam))).status).to.equal(404);
    expect((await t.http.put('/api/v1/workspaces/solo/members/solo-owner').set(bearer(sam)).send({})).status).to.equal(200);
    const ownerRoles = await t.http.get(`/api/v1/iam/solo/users/${ownerId}/roles`).set(bearer(sam));
    expect(ownerRoles.body.data.map((r: { id: string }) => r.id)).to.deep.equal([adminRole.id]);
    const holders = await t.http.get(`/api/v1/iam/solo/roles/${adminRole.id}/assignees`).set(bearer(sam));
    expect(holders.body.data.map((p: { actor: { username: string } }) => p.actor.username)).to.deep.equal(['sam', 'solo-owner']);
    const filtered = await t.http.get(`/api/v1/iam/solo/roles?assignee=${ownerId}`).set(bearer(sam));
    expect(filtered.body.data.totalItems).to.equal(1);
    const assign = await t.http.post(`/api/v1/iam/solo/roles/${adminRole.id}/assignees/${ownerId}`).set(bearer(sam));
    expect(assign.status).to.equal(409);
    expect(assign.body.error.message).to.match(/owner/);
    const remove = await t.http.delete(`/api/v1/iam/solo/roles/${adminRole.id}/assignees/${ownerId}`).set(bearer(sam));
    expect(remove.status).to.equal(409);
    expect(remove.body.error.message).to.match(/owner/);
    // sam is no longer the last administrator and may step down.
    const stepDown = await t.http.delete(`/api/v1/iam/solo/roles/${adminRole.id}/assignees/${samPrincipal.actor.id}`).set(bearer(sam));
    expect(stepDown.status).to.equal(200);
    expect((await t.http.put('/api/v1/workspaces/solo/members/uma').set(bearer(sam)).send({})).status).to.equal(403);
  });
});

describe('identity and access: concurrency and restart', () => {
  let t: TestServer;
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('answers concurrent identical assignments with one 200 and 409 for the rest, and keeps assignments across a restart', async () => {
    t = await startTestServer();
    const { tokens, workspace } = await seedWorkspace(t, 'race');
    expect(workspace.slug).to.equal('race');
    await installMatrix(t, tokens.owner, 'race', 'sales', matrixA);
    const fixture = await idsOf(t, tokens.owner, 'race', matrixA);
    const editorId = fixture.roleIds[`${EX}sales#Editor`]!;
    const member = (await t.server.services.users.get({ username: 'race-member' }))!;
    const path = `/api/v1/iam/race/roles/${editorId}/assignees/${member.id}`;
    const answers = await Promise.all(Array.from({ length: 6 }, () => t.http.post(path).set(bearer(tokens.owner))));
    expect(answers.map((r) => r.status).sort()).to.deep.equal([200, 409, 409, 409, 409, 409]);
    const botPrincipal = fixture.agentPrincipalIds[`${EX}sales#Bot`]!;
    expect((await t.http.post(`/api/v1/iam/race/roles/${editorId}/assignees/principals/${botPrincipal}`).set(bearer(tokens.owner))).status).to.equal(200);

    await t.close();
    t = await startTestServer({}, t.dataDir);
    const roles = await t.http.get(`/api/v1/iam/race/users/${member.id}/roles`).set(bearer(tokens.owner));
    expect(roles.status).to.equal(200);
    expect(roles.body.data.map((r: { id: string }) => r.id)).to.deep.equal([editorId]);
    const holders = await t.http.get(`/api/v1/iam/race/roles/${editorId}/assignees`).set(bearer(tokens.member));
    expect(holders.body.data.map((p: { type: string }) => p.type)).to.deep.equal(['USER', 'AGENT']);
  });
});

describe('identity and access: paging over many members', () => {
  let t: TestServer;
  let owner: string;
  before(async () => {
    t = await startTestServer();
    const root = await t.token('root', { systemAdmin: true });
    owner = await t.token('big-owner');
    expect((await t.http.post('/api/v1/workspaces').set(bearer(root)).send({ slug: 'big', owner: 'big-owner' })).status).to.equal(201);
    const names = Array.from({ length: 249 }, (_, i) => `user-${String(i).padStart(3, '0')}`);
    for (let i = 0; i < names.length; i += 25) {
      const batch = await Promise.all(names.slice(i, i + 25).map((n) => t.http.put(`/api/v1/workspaces/big/members/${n}`).set(bearer(owner)).send({})));
      for (const res of batch) expect(res.status).to.equal(200);
    }
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('pages 250 members: totals, page sizes, the last page, and no user twice', async () => {
    const first = await t.http.get('/api/v1/iam/big/users').set(bearer(owner));
    expect(first.body.data).to.deep.include({ page: 1, pageSize: 20, totalItems: 250, totalPages: 13 });
    expect(first.body.data.items).to.have.length(20);
    const last = await t.http.get('/api/v1/iam/big/users?page=13').set(bearer(owner));
    expect(last.body.data.items).to.have.length(10);
    expect(last.body.data.items.at(-1).username).to.equal('user-248');
    const seen: string[] = [];
    for (let p = 1; p <= 3; p++) {
      const res = await t.http.get(`/api/v1/iam/big/users?page=${p}&pageSize=100`).set(bearer(owner));
      expect(res.body.data).to.deep.include({ page: p, pageSize: 100, totalItems: 250, totalPages: 3 });
      expect(res.body.data.items).to.have.length(p < 3 ? 100 : 50);
      seen.push(...res.body.data.items.map((u: { username: string }) => u.username));
    }
    expect(new Set(seen).size).to.equal(250);
    expect(seen).to.deep.equal([...seen].sort());
    expect(seen[0]).to.equal('big-owner');
    const beyond = await t.http.get('/api/v1/iam/big/users?page=4&pageSize=100').set(bearer(owner));
    expect(beyond.body.data).to.deep.equal({ items: [], page: 4, pageSize: 100, totalItems: 250, totalPages: 3 });
  });
});
