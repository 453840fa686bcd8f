import { expect } from 'chai';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { sparql, iri } from '../../src/rdf/sparql.js';

const ROLES = `PREFIX iam: <https://poliglot.io/os/spec/iam#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
CONSTRUCT { ?r a iam:Role ; rdfs:label ?l } WHERE { ?r a iam:Role . OPTIONAL { ?r rdfs:label ?l } }`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe('slash commands: C1 to C5', () => {
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  let other: Awaited<ReturnType<typeof seedWorkspace>>;
  const base = '/api/v1/commands/acme';
  const create = (token: string, body: Record<string, unknown>, ws = 'acme') =>
    t.http.post(`/api/v1/commands/${ws}`).set(bearer(token)).send(body);

  before(async () => {
    t = await startTestServer();
    ({ tokens } = await seedWorkspace(t, 'acme'));
    other = await seedWorkspace(t, 'other');
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('creates a command owned by the caller: 200 (not 201) with the Slash command shape', async () => {
    const res = await create(tokens.member, {
      alias: 'roles:list-all', description: 'All roles', interpretation: 'A list of roles', scriptType: 'CONSTRUCT', scriptContent: ROLES,
    });
    expect(res.status).to.equal(200);
    expect(res.body.success).to.equal(true);
    const c = res.body.data;
    expect(c.id).to.match(UUID);
    expect(c).to.include({ alias: 'roles:list-all', description: 'All roles', interpretation: 'A list of roles', scriptType: 'CONSTRUCT', scriptContent: ROLES });
    const ws = await t.http.get('/api/v1/workspaces/acme').set(bearer(tokens.member));
    expect(c.workspaceId).to.equal(ws.body.data.id);
    expect(c.owner).to.include({ username: 'acme-member', emailVerified: false });
    expect(c.owner.id).to.match(UUID);
    expect(Object.keys(c.owner).sort()).to.deep.equal(['createdAt', 'email', 'emailVerified', 'firstName', 'id', 'lastName', 'updatedAt', 'username', 'website']);
    expect(c.createdAt).to.match(ISO);
    expect(c.updatedAt).to.equal(c.createdAt);
    // C1 by another member reads the same record.
    const read = await t.http.get(`${base}/${c.id}`).set(bearer(tokens.owner));
    expect(read.status).to.equal(200);
    expect(read.body.data).to.deep.equal(c);
  });

  it('stores description and interpretation as null when not given', async () => {
    const res = await create(tokens.owner, { alias: 'bare', scriptType: 'DESCRIBE', scriptContent: 'DESCRIBE <https://example.org/x>' });
    expect(res.status).to.equal(200);
    expect(res.body.data.description).to.equal(null);
    expect(res.body.data.interpretation).to.equal(null);
  });

  it('lists only the caller\'s own commands (bare array, by alias)', async () => {
    await create(tokens.member, { alias: 'a-first', scriptType: 'CONSTRUCT', scriptContent: ROLES });
    const mine = await t.http.get(base).set(bearer(tokens.member));
    expect(mine.status).to.equal(200);
    expect(mine.body.data).to.be.an('array');
    expect(mine.body.data.map((c: { alias: string }) => c.alias)).to.deep.equal(['a-first', 'roles:list-all']);
    const owners = await t.http.get(base).set(bearer(tokens.owner));
    expect(owners.body.data.map((c: { alias: string }) => c.alias)).to.deep.equal(['bare']);
    const elsewhere = await t.http.get('/api/v1/commands/other').set(bearer(other.tokens.owner));
    expect(elsewhere.body.data).to.deep.equal([]);
  });

  it('refuses bad aliases with a 400 that says what is wrong', async () => {
    const cases: Array<[unknown, RegExp]> = [
      ['/roles', /without a leading slash/],
      ['has space', /only contain letters, digits.*" " is not allowed/],
      ['semi;colon', /";" is not allowed/],
      ['é', /"é" is not allowed/],
      ['', /1 to 64 characters/],
      ['x'.repeat(65), /1 to 64 characters/],
      [42, /alias must be a string/],
    ];
    for (const [alias, message] of cases) {
      const res = await create(tokens.member, { alias, scriptType: 'CONSTRUCT', scriptContent: ROLES });
      expect(res.status, String(alias)).to.equal(400);
      expect(res.body.error.code).to.equal('BAD_REQUEST');
      expect(res.body.error.message, String(alias)).to.match(message);
    }
    const ok = await create(tokens.member, { alias: `A_b-c:${'x'.repeat(58)}`, scriptType: 'CONSTRUCT', scriptContent: ROLES });
    expect(ok.status).to.equal(200);
  });

  it('answers 409 for an alias that exists in the workspace, not for one in another workspace', async () => {
    const dup = await create(tokens.owner, { alias: 'roles:list-all', scriptType: 'CONSTRUCT', scriptContent: ROLES });
    expect(dup.status).to.equal(409);
    expect(dup.body.error.code).to.equal('CONFLICT');
    expect(dup.body.error.message).to.match(/roles:list-all.*already exists/);
    const there = await create(other.tokens.owner, { alias: 'roles:list-all', scriptType: 'CONSTRUCT', scriptContent: ROLES }, 'other');
    expect(there.status).to.equal(200);
  });

  it('requires alias, scriptType and scriptContent, and refuses unknown fields', async () => {
    const none = await create(tokens.member, {});
    expect(none.status).to.equal(400);
    expect(none.body.error.message).to.match(/alias, scriptType, scriptContent are required/);
    const noScript = await create(tokens.member, { alias: 'x1', scriptType: 'CONSTRUCT' });
    expect(noScript.body.error.message).to.match(/scriptContent is required/);
    const extra = await create(tokens.member, { alias: 'x1', scriptType: 'CONSTRUCT', scriptContent: ROLES, colour: 'red' });
    expect(extra.status).to.equal(400);
    expect(extra.body.error.message).to.match(/colour/);
    const type = await create(tokens.member, { alias: 'x1', scriptType: 'SELECT', scriptContent: ROLES });
    expect(type.status).to.equal(400);
    expect(type.body.error.message).to.match(/scriptType must be CONSTRUCT or DESCRIBE/);
  });

  it('refuses scripts that are not valid SPARQL, with line and column', async () => {
    const res = await create(tokens.member, {
      alias: 'broken', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT { ?s ?p ?o }\nWHERE {\n  ?s ?p ?o ]\n}',
    });
    expect(res.status).to.equal(400);
    expect(res.body.error.message).to.match(/scriptContent is not valid SPARQL: line 3, column \d+/);
    expect(res.body.error.details).to.deep.include({ line: 3 });
    expect(res.body.error.details.column).to.be.a('number');
    const empty = await create(tokens.member, { alias: 'broken', scriptType: 'CONSTRUCT', scriptContent: '  ' });
    expect(empty.status).to.equal(400);
    expect(empty.body.error.message).to.match(/scriptContent is empty/);
  });

  it('refuses scripts of the wrong form, updates, LOAD and SERVICE, naming the problem', async () => {
    const cases: Array<[string, string, RegExp]> = [
      ['CONSTRUCT', 'DESCRIBE <https://example.org/x>', /DESCRIBE query but scriptType is CONSTRUCT/],
      ['DESCRIBE', ROLES, /CONSTRUCT query but scriptType is DESCRIBE/],
      ['CONSTRUCT', 'SELECT * WHERE { ?s ?p ?o }', /is a SELECT query; a slash command must be a CONSTRUCT or DESCRIBE/],
      ['CONSTRUCT', 'ASK { ?s ?p ?o }', /is an ASK query; a slash command must be a CONSTRUCT or DESCRIBE/],
      ['CONSTRUCT', 'INSERT DATA { <urn:a> <urn:b> <urn:c> }', /SPARQL update.*not allowed/],
      ['CONSTRUCT', 'DELETE WHERE { ?s ?p ?o }', /SPARQL update.*not allowed/],
      ['CONSTRUCT', 'DROP ALL', /SPARQL update.*not allowed/],
      ['CONSTRUCT', 'LOAD <https://example.org/data.ttl>', /LOAD, which is not allowed/],
      ['CONSTRUCT', 'CONSTRUCT { ?s ?p ?o } WHERE { SERVICE <https://example.org/sparql> { ?s ?p ?o } }', /SERVICE, which is not allowed/],
      ['CONSTRUCT', 'CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o OPTIONAL { SERVICE SILENT <https://example.org/sparql> { ?s ?p ?x } } }', /SERVICE/],
      ['DESCRIBE', 'DESCRIBE ?s WHERE { ?s ?p ?o FILTER EXISTS { SERVICE <https://example.org/sparql> { ?s ?p ?x } } }', /SERVICE/],
    ];
    for (const [scriptType, scriptContent, message] of cases) {
      const res = await create(tokens.member, { alias: 'bad-form', scriptType, scriptContent });
      expect(res.status, scriptContent).to.equal(400);
      expect(res.body.error.message, scriptContent).to.match(message);
    }
    const mine = await t.http.get(base).set(bearer(tokens.member));
    expect(mine.body.data.map((c: { alias: string }) => c.alias)).to.not.include('bad-form');
  });

  it('hides other workspaces\' commands (404) and everything from outsiders (404)', async () => {
    const theirs = await create(other.tokens.owner, { alias: 'theirs', scriptType: 'CONSTRUCT', scriptContent: ROLES }, 'other');
    const id = theirs.body.data.id as string;
    expect((await t.http.get(`${base}/${id}`).set(bearer(tokens.owner))).status).to.equal(404);
    expect((await t.http.put(`${base}/${id}`).set(bearer(tokens.owner)).send({ description: 'x' })).status).to.equal(404);
    expect((await t.http.delete(`${base}/${id}`).set(bearer(tokens.owner))).status).to.equal(404);
    expect((await t.http.get(`${base}/not-a-uuid`).set(bearer(tokens.owner))).status).to.equal(404);
    expect((await t.http.get(base).set(bearer(tokens.outsider))).status).to.equal(404);
    expect((await create(tokens.outsider, { alias: 'x', scriptType: 'CONSTRUCT', scriptContent: ROLES })).status).to.equal(404);
    const still = await t.http.get(`/api/v1/commands/other/${id}`).set(bearer(other.tokens.owner));
    expect(still.status).to.equal(200);
  });

  describe('update (C2) and delete (C3)', () => {
    let id: string;
    let created: { createdAt: string; updatedAt: string };
    before(async () => {
      const res = await create(tokens.member, { alias: 'editable', description: 'before', scriptType: 'CONSTRUCT', scriptContent: ROLES });
      ({ id } = res.body.data);
      created = res.body.data;
    });

    it('updates any subset of the fields and bumps updatedAt', async () => {
      await new Promise((r) => setTimeout(r, 5));
      const res = await t.http.put(`${base}/${id}`).set(bearer(tokens.member)).send({ description: 'after', interpretation: 'read it slowly' });
      expect(res.status).to.equal(200);
      expect(res.body.data).to.include({ alias: 'editable', description: 'after', interpretation: 'read it slowly', scriptContent: ROLES });
      expect(res.body.data.createdAt).to.equal(created.createdAt);
      expect(Date.parse(res.body.data.updatedAt)).to.be.greaterThan(Date.parse(created.updatedAt));
      const renamed = await t.http.put(`${base}/${id}`).set(bearer(tokens.member)).send({ alias: 'edited:v2' });
      expect(renamed.status).to.equal(200);
      expect(renamed.body.data).to.include({ alias: 'edited:v2', description: 'after' });
      const cleared = await t.http.put(`${base}/${id}`).set(bearer(tokens.member)).send({ description: null });
      expect(cleared.body.data.description).to.equal(null);
      const same = await t.http.put(`${base}/${id}`).set(bearer(tokens.member)).send({ alias: 'edited:v2' });
      expect(same.status).to.equal(200);
    });

    it('applies the create checks: alias rules, 409 on a clash, script form and syntax; nothing changes on a refusal', async () => {
      const before = (await t.http.get(`${base}/${id}`).set(bearer(tokens.member))).body.data;
      const clash = await t.http.put(`${base}/${id}`).set(bearer(tokens.member)).send({ alias: 'bare' });
      expect(clash.status).to.equal(409);
      const slash = await t.http.put(`${base}/${id}`).set(bearer(tokens.member)).send({ alias: '/edited' });
      expect(slash.status).to.equal(400);
      expect(slash.body.error.message).to.match(/leading slash/);
      const form = await t.http.put(`${base}/${id}`).set(bearer(tokens.member)).send({ scriptType: 'DESCRIBE' });
      expect(form.status).to.equal(400);
      expect(form.body.error.message).to.match(/CONSTRUCT query but scriptType is DESCRIBE/);
      const syntax = await t.http.put(`${base}/${id}`).set(bearer(tokens.member)).send({ scriptContent: 'CONSTRUCT {', description: 'nope' });
      expect(syntax.status).to.equal(400);
      expect(syntax.body.error.message).to.match(/line 1, column/);
      const update = await t.http.put(`${base}/${id}`).set(bearer(tokens.member)).send({ scriptContent: 'CLEAR ALL' });
      expect(update.status).to.equal(400);
      const after = (await t.http.get(`${base}/${id}`).set(bearer(tokens.member))).body.data;
      expect(after).to.deep.equal(before);
      const both = await t.http.put(`${base}/${id}`).set(bearer(tokens.member))
        .send({ scriptType: 'DESCRIBE', scriptContent: 'PREFIX iam: <https://poliglot.io/os/spec/iam#>\nDESCRIBE ?r WHERE { ?r a iam:Role }' });
      expect(both.status).to.equal(200);
      expect(both.body.data.scriptType).to.equal('DESCRIBE');
    });

    it('lets only the owner or an administrator update or delete (403 otherwise)', async () => {
      const carol = await t.token('carol');
      await t.http.put('/api/v1/workspaces/acme/members/carol').set(bearer(tokens.owner)).send({});
      const byCarol = await t.http.put(`${base}/${id}`).set(bearer(carol)).send({ description: 'hijack' });
      expect(byCarol.status).to.equal(403);
      expect(byCarol.body.error.code).to.equal('FORBIDDEN');
      expect((await t.http.delete(`${base}/${id}`).set(bearer(carol))).status).to.equal(403);
      // Carol may still read and list (her list is empty).
      expect((await t.http.get(`${base}/${id}`).set(bearer(carol))).status).to.equal(200);
      expect((await t.http.get(base).set(bearer(carol))).body.data).to.deep.equal([]);
      const byAdmin = await t.http.put(`${base}/${id}`).set(bearer(tokens.owner)).send({ description: 'by the admin' });
      expect(byAdmin.status).to.equal(200);
      expect(byAdmin.body.data.owner.username).to.equal('acme-member');
      const byRoot = await t.http.put(`${base}/${id}`).set(bearer(tokens.root)).send({ description: 'by the system admin' });
      expect(byRoot.status).to.equal(200);
    });

    it('deletes (data is a string); afterwards 404', async () => {
      const res = await t.http.delete(`${base}/${id}`).set(bearer(tokens.member));
      expect(res.status).to.equal(200);
      expect(res.body.data).to.be.a('string');
      expect((await t.http.get(`${base}/${id}`).set(bearer(tokens.member))).status).to.equal(404);
      expect((await t.http.delete(`${base}/${id}`).set(bearer(tokens.member))).status).to.equal(404);
      expect((await t.http.put(`${base}/${id}`).set(bearer(tokens.member)).send({})).status).to.equal(404);
      const graph = t.server.services.graphs.resource('slash-command', id);
      expect(await t.server.services.store.ask(sparql`ASK { GRAPH ?g { ${iri(graph)} ?p ?o } }`)).to.equal(false);
    });
  });
});
