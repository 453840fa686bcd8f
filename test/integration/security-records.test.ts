import { expect } from 'chai';
import { bearer, removeDir, seedWorkspace, startTestServer, tempDir, type TestServer } from '../helpers/server.js';
import { tinyPackage, sampleMatrixTurtle } from '../helpers/packages.js';
import { uploadAndWait, workspaceDump, waitForCommand, eventsOf } from '../helpers/lifecycle.js';
import { installMatrices, uninstallPackage } from '../helpers/installs.js';

/**
 * Issue 12, acceptance 1 and 3: package and extension content cannot pass
 * for one of the service's records. Content using the service's vocabulary,
 * its resource IRIs or the built-in administrator role is refused naming the
 * statement; records are read only from the service's own graphs, so even
 * content that got into a matrix graph is never taken for one; recovery at
 * start skips what it cannot read.
 */
const WSM = 'https://w3id.org/wsm/ns#';
const BASE = 'https://workspaces.local/';
const MATRIX = 'https://example.org/packages/forger/main';

function forgedCommandTurtle(subject: string, id: string, workspaceIri: string): string {
  return `${sampleMatrixTurtle(MATRIX)}
<${subject}> a <${WSM}LifecycleCommand> ; <${WSM}id> "${id}" ; <${WSM}status> "pending" ;
  <${WSM}workspace> <${workspaceIri}> ; <${WSM}packageName> "victim-pkg" ; <${WSM}version> "1.0.0" ;
  <${WSM}commandType> "INSTALL" ;
  <${WSM}createdAt> "2020-01-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> ;
  <${WSM}updatedAt> "2020-01-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .
`;
}

describe('Security: the service\'s records cannot be forged by package or extension content', function () {
  this.timeout(120_000);
  let dataDir: string;
  let t: TestServer;
  let tokens: { root: string; owner: string };
  let victimTokens: { owner: string };
  let victimWs: { id: string; slug: string };
  let attackerWs: { id: string; slug: string };
  let victimCommandId: string;

  before(async () => {
    dataDir = tempDir();
    t = await startTestServer({}, dataDir);
    const victim = await seedWorkspace(t, 'victim');
    const attacker = await seedWorkspace(t, 'attacker');
    victimWs = victim.workspace;
    attackerWs = attacker.workspace;
    victimTokens = { owner: victim.tokens.owner };
    tokens = { root: attacker.tokens.root, owner: attacker.tokens.owner };
    const done = await uploadAndWait(t, victimTokens.owner, 'victim', await tinyPackage({ name: 'victim-pkg' }));
    expect(done.status).to.equal('completed');
    victimCommandId = done.id;
  });

  after(async () => {
    await t.close();
    removeDir(dataDir);
  });

  const victimIri = () => `${BASE}id/workspace/${victimWs.id}`;

  it('refuses a package whose matrix holds a forged lifecycle command (id "not a uuid"), naming the statement', async () => {
    const archive = await tinyPackage({ name: 'forger', matrices: [{ name: 'main', uri: MATRIX, turtle: forgedCommandTurtle(`${BASE}id/command/forged`, 'not a uuid', victimIri()) }] });
    const command = await uploadAndWait(t, tokens.owner, 'attacker', archive);
    expect(command.status).to.equal('failed');
    const report = await t.http.get(`/api/v1/packages/attacker/commands/${command.id}/validation-report`).set(bearer(tokens.owner));
    expect(report.status).to.equal(200);
    const messages = (report.body.data.violations as Array<{ message: string }>).map((r) => r.message);
    expect(messages.some((m) => m.includes(`<${WSM}LifecycleCommand>`) && m.includes('statement'))).to.equal(true, messages.join('\n'));
    expect(messages.some((m) => m.includes(`<${BASE}id/command/forged>`))).to.equal(true);
  });

  it('refuses the variant with a real UUID aimed at the victim\'s completed command', async () => {
    const archive = await tinyPackage({ name: 'forger', matrices: [{ name: 'main', uri: MATRIX, turtle: forgedCommandTurtle(`${BASE}id/command/${victimCommandId}`, victimCommandId, victimIri()) }] });
    const command = await uploadAndWait(t, tokens.owner, 'attacker', archive);
    expect(command.status).to.equal('failed');
    const events = await eventsOf(t, tokens.owner, 'attacker', command.id);
    expect(events.some((e) => e.level === 'ERROR')).to.equal(true);
  });

  it('refuses a package that declares the built-in administrator role or a resource IRI of the service', async () => {
    for (const turtle of [
      `${sampleMatrixTurtle(MATRIX)}\n<${WSM}WorkspaceAdministrator> a <https://poliglot.io/os/spec/iam#Role> ; <http://www.w3.org/2000/01/rdf-schema#label> "Admin" .\n`,
      `${sampleMatrixTurtle(MATRIX)}\n<${MATRIX}#x> <http://www.w3.org/2000/01/rdf-schema#seeAlso> <${BASE}id/role/anything> .\n`,
    ]) {
      const command = await uploadAndWait(t, tokens.owner, 'attacker', await tinyPackage({ name: 'forger', matrices: [{ name: 'main', uri: MATRIX, turtle }] }));
      expect(command.status).to.equal('failed');
    }
    const pkg = await t.http.get('/api/v1/packages/attacker/forger').set(bearer(tokens.owner));
    expect(pkg.status).to.equal(404);
  });

  it('refuses an extension using the service\'s vocabulary, 400 naming the statement', async () => {
    await installMatrices(t, tokens.owner, 'attacker', 'plain', [{ uri: 'https://example.org/m/plain', turtle: sampleMatrixTurtle('https://example.org/m/plain') }]);
    const turtle = `<https://example.org/m/plain#r> a <${WSM}Role> .`;
    const res = await t.http.post(`/api/v1/extensions/attacker?targetMatrix=${encodeURIComponent('https://example.org/m/plain')}&label=x`)
      .set(bearer(tokens.owner)).attach('file', Buffer.from(turtle), { filename: 'x.ttl', contentType: 'text/turtle' });
    expect(res.status).to.equal(400);
    expect(res.body.success).to.equal(false);
    expect(res.body.error.message).to.include(`<https://example.org/m/plain#r> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <${WSM}Role>`);
  });

  it('never takes a record inside a matrix graph for a command: the service restarts and the victim is untouched', async () => {
    // Content that got into a matrix graph by any other way (written here straight into the store).
    const { store, graphs } = t.server.services;
    const matrixGraph = graphs.matrix(attackerWs.id, (await t.http.get('/api/v1/packages/attacker/plain').set(bearer(tokens.owner))).body.data.matrices[0].id);
    const wsg = (ws: string) => `${BASE}id/workspace/${ws}`;
    const forged = forgedCommandTurtle(`${BASE}id/command/${victimCommandId}`, victimCommandId, wsg(victimWs.id))
      + forgedCommandTurtle(`${BASE}id/command/forged`, 'not a uuid', wsg(victimWs.id))
      + forgedCommandTurtle(`${BASE}id/command/forged2`, 'not a uuid', wsg(attackerWs.id));
    await store.write([{ kind: 'load', graph: matrixGraph, format: 'text/turtle', data: forged }]);
    const before = await workspaceDump(t, victimWs.id);
    const victimBefore = (await t.http.get(`/api/v1/packages/victim/commands/${victimCommandId}`).set(bearer(victimTokens.owner))).body.data;
    await t.close();
    t = await startTestServer({}, dataDir);
    expect((await t.http.get('/health')).status).to.equal(200);
    expect(await workspaceDump(t, victimWs.id)).to.deep.equal(before);
    const victimAfter = await waitForCommand(t, victimTokens.owner, 'victim', victimCommandId);
    expect(victimAfter).to.deep.equal(victimBefore);
    expect(victimAfter.status).to.equal('completed');
    // The workspace lists see nothing of the forged records either.
    const list = await t.http.get('/api/v1/packages/victim/victim-pkg/commands').set(bearer(victimTokens.owner));
    expect(list.body.data.map((c: { id: string }) => c.id)).to.deep.equal([victimCommandId]);
  });

  it('skips and logs a real record it cannot read instead of stopping', async () => {
    // A pending command record in the workspace's own packages graph whose id is not a UUID.
    const { store, graphs } = t.server.services;
    await store.write([{ kind: 'load', graph: graphs.packages(attackerWs.id), format: 'text/turtle', data: forgedCommandTurtle(`${BASE}id/command/broken`, 'not a uuid', `${BASE}id/workspace/${attackerWs.id}`) }]);
    const before = await workspaceDump(t, victimWs.id);
    await t.close();
    t = await startTestServer({}, dataDir);
    expect((await t.http.get('/health')).status).to.equal(200);
    expect(await workspaceDump(t, victimWs.id)).to.deep.equal(before);
  });

  it('never removes assignments of the built-in administrator role, even when a derived graph claims it', async () => {
    const roles = await t.http.get('/api/v1/iam/attacker/roles').set(bearer(tokens.owner));
    const adminRole = roles.body.data.items.find((r: { matrixId: string | null }) => r.matrixId === null);
    const users = await t.http.get('/api/v1/iam/attacker/users').set(bearer(tokens.owner));
    const member = users.body.data.items.find((u: { username: string }) => u.username === 'attacker-member');
    const assigned = await t.http.post(`/api/v1/iam/attacker/roles/${adminRole.id}/assignees/${member.id}`).set(bearer(tokens.owner));
    expect(assigned.status, JSON.stringify(assigned.body)).to.equal(200);
    await installMatrices(t, tokens.owner, 'attacker', 'collider', [{ uri: 'https://example.org/m/collider', turtle: sampleMatrixTurtle('https://example.org/m/collider') }]);
    // Make the collider's derived graph declare the built-in role (as a collision would).
    const { store, graphs } = t.server.services;
    const pkg = (await t.http.get('/api/v1/packages/attacker/collider').set(bearer(tokens.owner))).body.data;
    const adminIri = `${BASE}id/role/${adminRole.id}`;
    await store.write([{ kind: 'load', graph: graphs.derived(attackerWs.id, pkg.matrices[0].id), format: 'text/turtle',
      data: `<${adminIri}> a <${WSM}Role> ; <${WSM}uri> <${WSM}WorkspaceAdministrator> .` }]);
    await uninstallPackage(t, tokens.owner, 'attacker', 'collider');
    const held = await t.http.get(`/api/v1/iam/attacker/roles?assignee=${member.id}`).set(bearer(tokens.owner));
    expect(held.status).to.equal(200);
    expect(held.body.data.items.map((r: { id: string }) => r.id)).to.include(adminRole.id);
    // And the member can still act as an administrator.
    const memberToken = await t.token('attacker-member');
    expect((await t.http.get('/api/v1/extensions/attacker').set(bearer(memberToken))).status).to.equal(200);
    const del = await t.http.delete('/api/v1/packages/attacker/plain').set(bearer(memberToken));
    expect(del.status).to.equal(202);
  });
});
