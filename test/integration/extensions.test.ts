import { expect } from 'chai';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer, withSeededServer, type Tokens } from '../helpers/server.js';
import { tinyPackage } from '../helpers/packages.js';
import { uploadAndWait, waitForCommand, workspaceDump } from '../helpers/lifecycle.js';
import { stableId } from '../../src/rdf/ids.js';
import { PREFIXES } from '../../src/rdf/vocab.js';
import { sparql, iri, raw } from '../../src/rdf/sparql.js';

const EXT = '/api/v1/extensions';
const UNKNOWN_ID = '6d1f3d4e-8c35-4f0e-9f8e-2b7a5d1c9e01';

const ROLE_TTL = `@prefix iam: <https://poliglot.io/os/spec/iam#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
<https://example.org/ext#Auditor> a iam:Role ; rdfs:label "Auditor" .
`;

describe('extensions: access and request checks (X1-X5)', () => {
  let t: TestServer;
  let tokens: Tokens;
  withSeededServer('acme', (s) => ({ t, tokens } = s), { WSM_MAX_BODY_BYTES: String(64 * 1024) });

  const calls = () => [
    { name: 'X1', run: () => t.http.get(`${EXT}/acme/${UNKNOWN_ID}`) },
    { name: 'X2', run: () => t.http.put(`${EXT}/acme/${UNKNOWN_ID}?label=x`) },
    { name: 'X3', run: () => t.http.delete(`${EXT}/acme/${UNKNOWN_ID}`) },
    { name: 'X4', run: () => t.http.get(`${EXT}/acme`) },
    { name: 'X5', run: () => t.http.post(`${EXT}/acme?targetMatrix=https://example.org/m`).attach('file', Buffer.from(ROLE_TTL), 'ext.ttl') },
  ];

  it('answers 401 without a token, with WWW-Authenticate', async () => {
    for (const call of calls()) {
      const res = await call.run();
      expect(res.status, call.name).to.equal(401);
      expect(res.headers['www-authenticate'], call.name).to.match(/^Bearer/);
    }
  });

  it('answers 404 to a caller who is not a member, and for an unknown workspace', async () => {
    for (const call of calls()) {
      const res = await call.run().set(bearer(tokens.outsider));
      expect(res.status, call.name).to.equal(404);
      expect(res.body.error.code, call.name).to.equal('NOT_FOUND');
    }
    const res = await t.http.get(`${EXT}/nowhere`).set(bearer(tokens.owner));
    expect(res.status).to.equal(404);
  });

  it('answers 403 to a member who is not an administrator', async () => {
    for (const call of calls()) {
      const res = await call.run().set(bearer(tokens.member));
      expect(res.status, call.name).to.equal(403);
      expect(res.body.error.code, call.name).to.equal('FORBIDDEN');
    }
  });

  it('describes X1-X5 in the OpenAPI document, with targetMatrix and label as query parameters and form fields', async () => {
    const doc = (await t.http.get('/api/v1/openapi.json')).body;
    const create = doc.paths['/api/v1/extensions/{workspace}'].post;
    expect(create.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`)).to.include.members(['query:targetMatrix', 'query:label']);
    expect(Object.keys(create.requestBody.content['multipart/form-data'].schema.properties)).to.have.members(['file', 'targetMatrix', 'label']);
    expect(Object.keys(doc.paths['/api/v1/extensions/{workspace}/{id}'])).to.have.members(['get', 'put', 'delete']);
  });

  it('lets administrators (owner, system admin) list: an empty array at first', async () => {
    for (const token of [tokens.owner, tokens.root]) {
      const res = await t.http.get(`${EXT}/acme`).set(bearer(token));
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.equal({ success: true, data: [] });
    }
  });

  it('answers 404 for an unknown extension on X1, X2, X3 (also for a malformed id)', async () => {
    for (const id of [UNKNOWN_ID, 'not-a-uuid']) {
      const get = await t.http.get(`${EXT}/acme/${id}`).set(bearer(tokens.owner));
      expect(get.status).to.equal(404);
      expect(get.body.error.message).to.match(/Extension/);
      const put = await t.http.put(`${EXT}/acme/${id}?label=x`).set(bearer(tokens.owner));
      expect(put.status).to.equal(404);
      const del = await t.http.delete(`${EXT}/acme/${id}`).set(bearer(tokens.owner));
      expect(del.status).to.equal(404);
    }
  });

  it('X5 needs targetMatrix (400), an absolute IRI (400), and an installed matrix (404)', async () => {
    const missing = await t.http.post(`${EXT}/acme`).set(bearer(tokens.owner)).attach('file', Buffer.from(ROLE_TTL), 'ext.ttl');
    expect(missing.status).to.equal(400);
    expect(missing.body.error.message).to.match(/targetMatrix is required/);
    const relative = await t.http.post(`${EXT}/acme?targetMatrix=not%20an%20iri`).set(bearer(tokens.owner)).attach('file', Buffer.from(ROLE_TTL), 'ext.ttl');
    expect(relative.status).to.equal(400);
    expect(relative.body.error.message).to.match(/absolute IRI/);
    const unknown = await t.http.post(`${EXT}/acme?targetMatrix=${encodeURIComponent('https://example.org/none')}`)
      .set(bearer(tokens.owner)).attach('file', Buffer.from(ROLE_TTL), 'ext.ttl');
    expect(unknown.status).to.equal(404);
    expect(unknown.body.error.message).to.match(/No matrix with URI <https:\/\/example\.org\/none> is installed/);
    // The form field works like the query parameter.
    const form = await t.http.post(`${EXT}/acme`).set(bearer(tokens.owner))
      .field('targetMatrix', 'https://example.org/none').attach('file', Buffer.from(ROLE_TTL), 'ext.ttl');
    expect(form.status).to.equal(404);
    const list = await t.http.get(`${EXT}/acme`).set(bearer(tokens.owner));
    expect(list.body.data).to.deep.equal([]);
  });

  it('X5 refuses a body that is not multipart (415) and a file over the size limit (413)', async () => {
    const json = await t.http.post(`${EXT}/acme?targetMatrix=https://example.org/none`).set(bearer(tokens.owner)).send({ content: ROLE_TTL });
    expect(json.status).to.equal(415);
    expect(json.body.error.message).to.match(/multipart\/form-data/);
    const big = Buffer.from(`# ${'x'.repeat(70 * 1024)}\n${ROLE_TTL}`);
    const tooLarge = await t.http.post(`${EXT}/acme?targetMatrix=https://example.org/none`).set(bearer(tokens.owner)).attach('file', big, 'big.ttl');
    expect(tooLarge.status).to.equal(413);
    expect(tooLarge.body.error.code).to.equal('PAYLOAD_TOO_LARGE');
  });
});

describe('extensions: Turtle checks at the request (X5)', () => {
  let t: TestServer;
  let tokens: Tokens;
  withSeededServer('acme', (s) => ({ t, tokens } = s));

  const post = (file: Buffer, name = 'ext.ttl', contentType?: string) =>
    t.http.post(`${EXT}/acme?targetMatrix=${encodeURIComponent('https://example.org/none')}`).set(bearer(tokens.owner))
      .attach('file', file, contentType ? { filename: name, contentType } : name);

  it('answers 400 with the line and column of a Turtle syntax error', async () => {
    const broken = `${ROLE_TTL}<https://example.org/ext#X> a iam:Role ;\n  rdfs:label "unterminated .\n`;
    const res = await post(Buffer.from(broken));
    expect(res.status).to.equal(400);
    expect(res.body.error.code).to.equal('BAD_REQUEST');
    expect(res.body.error.message).to.match(/^ext\.ttl: Turtle syntax error at line 5, column 14/);
    expect(res.body.error.details).to.include({ line: 5, column: 14 });
    const undeclared = await post(Buffer.from('<https://example.org/a> a nope:Role .\n'));
    expect(undeclared.status).to.equal(400);
    expect(undeclared.body.error.message).to.match(/line 1, column 27: Undefined prefix "nope:"/);
  });

  it('refuses RDF/XML (400 by content, 415 by declared type), JSON-LD, non-UTF-8 and empty files', async () => {
    const rdfxml = `<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="https://example.org/a"/></rdf:RDF>`;
    const sniffed = await post(Buffer.from(rdfxml), 'ext.ttl');
    expect(sniffed.status).to.equal(400);
    expect(sniffed.body.error.message).to.match(/RDF\/XML/);
    const declared = await post(Buffer.from(rdfxml), 'ext.rdf', 'application/rdf+xml');
    expect(declared.status).to.equal(415);
    expect(declared.body.error.message).to.match(/Turtle/);
    const jsonld = await post(Buffer.from('{"@id": "https://example.org/a"}'), 'ext.ttl');
    expect(jsonld.status).to.equal(400);
    expect(jsonld.body.error.message).to.match(/JSON/);
    const latin1 = await post(Buffer.from([0x3c, 0x61, 0x3e, 0x20, 0xe9, 0xff, 0x0a]), 'ext.ttl');
    expect(latin1.status).to.equal(400);
    expect(latin1.body.error.message).to.match(/UTF-8/);
    const empty = await post(Buffer.from('# nothing here\n@prefix ex: <https://example.org/> .\n'), 'ext.ttl');
    expect(empty.status).to.equal(400);
    expect(empty.body.error.message).to.match(/no triples/);
    const noFile = await t.http.post(`${EXT}/acme?targetMatrix=https://example.org/none`).set(bearer(tokens.owner)).field('label', 'x');
    expect(noFile.status).to.equal(400);
    expect(noFile.body.error.message).to.match(/"file"/);
    const emptyLabel = await post(Buffer.from(ROLE_TTL)).field('label', '  ');
    expect(emptyLabel.status).to.equal(400);
  });
});

// ---------------------------------------------------------------------------
// With real package installs: deployment, re-derivation, rollback, uninstall.
// ---------------------------------------------------------------------------

const TRACKING_URI = 'https://example.org/tracking';
const NOTES_URI = 'https://example.org/notes';
const PREFIX_TTL = `@prefix mtx: <https://poliglot.io/os/spec/matrix#> .
@prefix iam: <https://poliglot.io/os/spec/iam#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix ex: <https://example.org/tracking#> .
`;
const TRACKING_TTL = `${PREFIX_TTL}
<${TRACKING_URI}> a mtx:Matrix ; rdfs:label "Tracking" ; rdfs:comment "Tracks work" .
ex:Reviewer a iam:Role ; rdfs:label "Reviewer" ; rdfs:comment "Reviews work" .
ex:bot a iam:Agent ; rdfs:label "Tracking bot" ; iam:hasRole ex:Reviewer .
`;
const NOTES_TTL = `${PREFIX_TTL}
@prefix nt: <https://example.org/notes#> .
<${NOTES_URI}> a mtx:Matrix ; rdfs:label "Notes" .
nt:Writer a iam:Role ; rdfs:label "Writer" .
`;
/** Adds a role, an agent holding it, and gives the matrix's own agent the new role too. */
const AUDIT_TTL = `${PREFIX_TTL}
# Audit extension
ex:Auditor a iam:Role ; rdfs:label "Auditor" ; rdfs:comment "Audits work" .
ex:auditbot a iam:Agent ; rdfs:label "Audit bot" ; iam:hasRole ex:Auditor .
ex:bot iam:hasRole ex:Auditor .
`;


describe('extensions: deployment with real packages', function () {
  this.timeout(60_000);
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  let workspace: { id: string; slug: string };
  before(async () => {
    t = await startTestServer();
    ({ tokens, workspace } = await seedWorkspace(t, 'acme'));
    const archive = await tinyPackage({
      name: 'tracking',
      matrices: [
        { name: 'tracking', uri: TRACKING_URI, turtle: TRACKING_TTL },
        { name: 'notes', uri: NOTES_URI, turtle: NOTES_TTL },
      ],
    });
    const installed = await uploadAndWait(t, tokens.owner, 'acme', archive);
    expect(installed.status, JSON.stringify(installed)).to.equal('completed');
    const slash = await t.http.post('/api/v1/commands/acme').set(bearer(tokens.owner)).send({
      alias: 'agents', scriptType: 'CONSTRUCT',
      scriptContent: 'PREFIX iam: <https://poliglot.io/os/spec/iam#> CONSTRUCT { ?a a iam:Agent } WHERE { ?a a iam:Agent }',
    });
    expect(slash.status, JSON.stringify(slash.body)).to.equal(200);
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  const store = () => t.server.services.store;
  const graphs = () => t.server.services.graphs;
  const matrixId = (uri: string) => stableId('matrix', workspace.id, uri);
  const derivedGraph = (uri: string) => graphs().derived(workspace.id, matrixId(uri));
  /** Role and agent URIs of a matrix's derived graph, and each agent's role URIs. */
  const derived = async (uri: string) => {
    const g = `<${derivedGraph(uri)}>`;
    const roles = (await store().select(sparql`${raw(PREFIXES)} SELECT ?uri ?label ?m WHERE { GRAPH ${raw(g)} { ?r a wsm:Role ; wsm:uri ?uri ; wsm:label ?label ; wsm:matrix ?m } } ORDER BY ?uri`))
      .map((b) => ({ uri: b.uri!.value, label: b.label!.value, matrix: b.m!.value }));
    const agents = (await store().select(sparql`${raw(PREFIXES)} SELECT ?uri ?principal WHERE { GRAPH ${raw(g)} {
        ?a a wsm:Agent ; wsm:uri ?uri . OPTIONAL { ?p a wsm:Principal ; wsm:principalType "AGENT" ; wsm:actor ?a ; wsm:id ?principal } } } ORDER BY ?uri`))
      .map((b) => ({ uri: b.uri!.value, principal: b.principal?.value ?? null }));
    const hasRole = (await store().select(sparql`${raw(PREFIXES)} SELECT ?agent ?role WHERE { GRAPH ${raw(g)} { ?a a wsm:Agent ; wsm:uri ?agent ; wsm:role ?r } GRAPH ?rg { ?r a wsm:Role ; wsm:uri ?role } } ORDER BY ?agent ?role`))
      .map((b) => `${b.agent!.value} -> ${b.role!.value}`);
    return { roles, agents, hasRole };
  };
  /** Every graph of the workspace (lifecycle command records and logs left out) but the extensions' own. */
  const dumpAll = async () => Object.fromEntries(Object.entries(await workspaceDump(t, workspace.id))
    .filter(([g]) => !g.startsWith(graphs().extensions(workspace.id))));
  /** Roles (I9) and agents (I12) of the workspace as the IAM endpoints list them, and an agent's roles (I14). */
  const iamView = async () => {
    const roles = (await t.http.get('/api/v1/iam/acme/roles?pageSize=100').set(bearer(tokens.member))).body.data.items as Array<{ id: string; uri: string; matrixId: string | null }>;
    const agents = (await t.http.get('/api/v1/iam/acme/agents?pageSize=100').set(bearer(tokens.member))).body.data.items as Array<{ id: string; uri: string; matrixId: string }>;
    const rolesOf = async (agentUri: string) => {
      const agent = agents.find((a) => a.uri === agentUri);
      if (!agent) return null;
      const res = await t.http.get(`/api/v1/iam/acme/agents/${agent.id}/roles`).set(bearer(tokens.member));
      expect(res.status).to.equal(200);
      return (res.body.data as Array<{ uri: string }>).map((r) => r.uri).sort();
    };
    return { roles, agents, rolesOf };
  };
  /** Agents a slash command sees (installed matrices and active extensions only, docs/slash-commands.md). */
  const agentsSeen = async () => {
    const res = await t.http.post('/api/v1/commands/acme/alias/agents/execute').set(bearer(tokens.member)).set('Accept', 'application/n-triples');
    expect(res.status).to.equal(200);
    return res.text.split('\n').filter(Boolean).map((line) => line.split(' ')[0]!.slice(1, -1)).sort();
  };
  const createExtension = (turtle: string, label?: string) => {
    const req = t.http.post(`${EXT}/acme?targetMatrix=${encodeURIComponent(TRACKING_URI)}${label ? `&label=${encodeURIComponent(label)}` : ''}`)
      .set(bearer(tokens.owner));
    return req.attach('file', Buffer.from(turtle), { filename: 'audit.ttl', contentType: 'text/turtle' });
  };
  const getExtension = async (id: string) => (await t.http.get(`${EXT}/acme/${id}`).set(bearer(tokens.owner))).body.data;

  it('X5 answers at once with the extension, inactive, and a queued REDEPLOY that activates it', async () => {
    const before = await derived(TRACKING_URI);
    expect(before.roles.map((r) => r.uri)).to.deep.equal(['https://example.org/tracking#Reviewer']);
    const notesBefore = await store().dumpGraph(derivedGraph(NOTES_URI));
    const res = await createExtension(AUDIT_TTL, 'Audit');
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    const ext = res.body.data;
    expect(ext).to.include({ label: 'Audit', targetMatrixUri: TRACKING_URI, active: false, ownerUsername: 'acme-owner', content: AUDIT_TTL });
    expect(ext.id).to.match(/^[0-9a-f-]{36}$/);
    expect(ext.ownerId).to.match(/^[0-9a-f-]{36}$/);
    expect(ext.targetMatrix).to.deep.equal({ uri: TRACKING_URI });
    expect(ext.owner).to.deep.equal({ id: ext.ownerId, username: 'acme-owner' });
    expect(ext.createdAt).to.match(/Z$/);
    expect(ext.lastCommandId).to.match(/^[0-9a-f-]{36}$/);

    const command = await waitForCommand(t, tokens.owner, 'acme', ext.lastCommandId);
    expect(command).to.include({ commandType: 'REDEPLOY', status: 'completed', packageName: 'tracking' });
    const commands = await t.http.get('/api/v1/packages/acme/tracking/commands').set(bearer(tokens.member));
    expect(commands.body.data[0]).to.include({ id: ext.lastCommandId, commandType: 'REDEPLOY' });
    const events = await t.http.get(`/api/v1/packages/acme/commands/${ext.lastCommandId}/events`).set(bearer(tokens.member));
    expect(events.status).to.equal(200);
    const messages = (events.body.data as Array<{ message: string }>).map((e) => e.message).join('\n');
    expect(messages).to.match(/partial/i);
    expect(messages).to.include(TRACKING_URI);
    const report = await t.http.get(`/api/v1/packages/acme/commands/${ext.lastCommandId}/validation-report`).set(bearer(tokens.member));
    expect(report.status).to.equal(200);
    expect(report.body.data.conforms).to.equal(true);

    const after = await getExtension(ext.id);
    expect(after).to.include({ active: true, content: AUDIT_TTL, lastCommandId: ext.lastCommandId });
    expect(await agentsSeen()).to.deep.equal(['https://example.org/tracking#auditbot', 'https://example.org/tracking#bot']);
    const now = await derived(TRACKING_URI);
    expect(now.roles.map((r) => r.uri)).to.deep.equal(['https://example.org/tracking#Auditor', 'https://example.org/tracking#Reviewer']);
    expect(new Set(now.roles.map((r) => r.matrix))).to.deep.equal(new Set([graphs().resource('matrix', matrixId(TRACKING_URI))]));
    expect(now.agents.map((a) => a.uri)).to.deep.equal(['https://example.org/tracking#auditbot', 'https://example.org/tracking#bot']);
    expect(now.agents.every((a) => a.principal)).to.equal(true);
    expect(now.hasRole).to.deep.equal([
      'https://example.org/tracking#auditbot -> https://example.org/tracking#Auditor',
      'https://example.org/tracking#bot -> https://example.org/tracking#Auditor',
      'https://example.org/tracking#bot -> https://example.org/tracking#Reviewer',
    ]);
    // Partial: the other matrix of the package was not re-derived.
    expect(await store().dumpGraph(derivedGraph(NOTES_URI))).to.equal(notesBefore);
    // Through the IAM endpoints: the role (I9), the agent (I12) with its AGENT principal, and the new iam:hasRole (I14).
    const iam = await iamView();
    const auditor = iam.roles.find((r) => r.uri === 'https://example.org/tracking#Auditor');
    expect(auditor?.matrixId).to.equal(matrixId(TRACKING_URI));
    const auditbot = iam.agents.find((a) => a.uri === 'https://example.org/tracking#auditbot');
    expect(auditbot?.matrixId).to.equal(matrixId(TRACKING_URI));
    expect(await iam.rolesOf('https://example.org/tracking#auditbot')).to.deep.equal(['https://example.org/tracking#Auditor']);
    expect(await iam.rolesOf('https://example.org/tracking#bot')).to.deep.equal(['https://example.org/tracking#Auditor', 'https://example.org/tracking#Reviewer']);
    const holders = await t.http.get(`/api/v1/iam/acme/roles/${auditor!.id}/assignees`).set(bearer(tokens.member));
    expect(holders.status).to.equal(200);
    const agentPrincipals = (holders.body.data as Array<{ type: string; actor: { uri?: string } }>).filter((p) => p.type === 'AGENT').map((p) => p.actor.uri).sort();
    expect(agentPrincipals).to.deep.equal(['https://example.org/tracking#auditbot', 'https://example.org/tracking#bot']);

    const list = await t.http.get(`${EXT}/acme`).set(bearer(tokens.owner));
    expect(list.status).to.equal(200);
    expect(list.body.data).to.have.length(1);
    expect(list.body.data[0]).to.include({ id: ext.id, active: true, content: null });
  });

  it('X2 replaces the Turtle (and label), deactivates, and re-derives: what it no longer adds disappears', async () => {
    const [ext] = (await t.http.get(`${EXT}/acme`).set(bearer(tokens.owner))).body.data;
    const replacement = `${PREFIX_TTL}ex:Inspector a iam:Role ; rdfs:label "Inspector" .\nex:bot iam:hasRole ex:Inspector .\n`;
    const res = await t.http.put(`${EXT}/acme/${ext.id}`).set(bearer(tokens.owner))
      .field('label', 'Inspection').attach('file', Buffer.from(replacement), 'inspection.ttl');
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.data).to.include({ id: ext.id, label: 'Inspection', active: false, content: replacement, createdAt: ext.createdAt });
    expect(res.body.data.lastCommandId).to.not.equal(ext.lastCommandId);
    expect(res.body.data.updatedAt >= ext.updatedAt).to.equal(true);
    const command = await waitForCommand(t, tokens.owner, 'acme', res.body.data.lastCommandId);
    expect(command).to.include({ commandType: 'REDEPLOY', status: 'completed' });
    expect(await getExtension(ext.id)).to.include({ active: true, label: 'Inspection', content: replacement });
    const now = await derived(TRACKING_URI);
    expect(now.roles.map((r) => r.uri)).to.deep.equal(['https://example.org/tracking#Inspector', 'https://example.org/tracking#Reviewer']);
    expect(now.agents.map((a) => a.uri)).to.deep.equal(['https://example.org/tracking#bot']);
    expect(now.hasRole).to.deep.equal([
      'https://example.org/tracking#bot -> https://example.org/tracking#Inspector',
      'https://example.org/tracking#bot -> https://example.org/tracking#Reviewer',
    ]);
    // The content graph holds the new triples only.
    const content = await store().dumpGraph(graphs().extension(workspace.id, ext.id));
    expect(content).to.include('Inspector').and.not.include('Auditor');

    // A label alone (query parameter) also re-deploys.
    const relabel = await t.http.put(`${EXT}/acme/${ext.id}?label=Inspections`).set(bearer(tokens.owner));
    expect(relabel.status).to.equal(200);
    expect(relabel.body.data).to.include({ label: 'Inspections', active: false, content: replacement });
    expect((await waitForCommand(t, tokens.owner, 'acme', relabel.body.data.lastCommandId)).status).to.equal('completed');
    expect((await getExtension(ext.id)).active).to.equal(true);

    // Bad input changes nothing.
    const broken = await t.http.put(`${EXT}/acme/${ext.id}`).set(bearer(tokens.owner)).attach('file', Buffer.from('ex:x a'), 'x.ttl');
    expect(broken.status).to.equal(400);
    expect(broken.body.error.message).to.match(/line 1, column \d+/);
    const retarget = await t.http.put(`${EXT}/acme/${ext.id}?targetMatrix=${encodeURIComponent(NOTES_URI)}`).set(bearer(tokens.owner));
    expect(retarget.status).to.equal(400);
    const json = await t.http.put(`${EXT}/acme/${ext.id}`).set(bearer(tokens.owner)).send({ label: 'x' });
    expect(json.status).to.equal(415);
    const huge = await t.http.put(`${EXT}/acme/${ext.id}`).set(bearer(tokens.owner))
      .attach('file', Buffer.from(`# ${'x'.repeat(1024 * 1024)}\n`), 'huge.ttl');
    expect(huge.status).to.equal(413);
    const rdfxml = await t.http.put(`${EXT}/acme/${ext.id}`).set(bearer(tokens.owner))
      .attach('file', Buffer.from('<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"></rdf:RDF>'), 'x.ttl');
    expect(rdfxml.status).to.equal(400);
    expect(rdfxml.body.error.message).to.match(/RDF\/XML/);
    expect(await getExtension(ext.id)).to.include({ active: true, label: 'Inspections', content: replacement });
  });

  it('X3 deletes the extension and re-deploys without it, removing assignments of roles that disappear', async () => {
    const [ext] = (await t.http.get(`${EXT}/acme`).set(bearer(tokens.owner))).body.data;
    const inspector = stableId('role', workspace.id, 'https://example.org/tracking#Inspector');
    const memberPrincipal = t.server.services.workspaces.userPrincipalId(workspace.id, stableId('user', 'acme-member'));
    const assignment = await t.http.post(`/api/v1/iam/acme/roles/${inspector}/assignees/principals/${memberPrincipal}`).set(bearer(tokens.owner));
    expect(assignment.status, JSON.stringify(assignment.body)).to.equal(200);
    const assignments = async () => (await store().select(sparql`${raw(PREFIXES)} SELECT ?a WHERE { GRAPH ${iri(graphs().iam(workspace.id))} { ?a wsm:role ${iri(t.server.services.workspaces.roleIri(inspector))} } }`)).length;
    expect(await assignments()).to.equal(1);

    const res = await t.http.delete(`${EXT}/acme/${ext.id}`).set(bearer(tokens.owner));
    expect(res.status).to.equal(200);
    expect(res.body.data).to.be.a('string').and.match(/deleted/);
    const commandId = /command ([0-9a-f-]{36})/.exec(res.body.data)?.[1];
    expect(commandId).to.be.a('string');
    expect((await waitForCommand(t, tokens.owner, 'acme', commandId!)).status).to.equal('completed');
    expect((await t.http.get(`${EXT}/acme/${ext.id}`).set(bearer(tokens.owner))).status).to.equal(404);
    expect((await t.http.get(`${EXT}/acme`).set(bearer(tokens.owner))).body.data).to.deep.equal([]);
    expect(await store().dumpGraph(graphs().extension(workspace.id, ext.id))).to.equal('');
    const now = await derived(TRACKING_URI);
    expect(now.roles.map((r) => r.uri)).to.deep.equal(['https://example.org/tracking#Reviewer']);
    expect(now.hasRole).to.deep.equal(['https://example.org/tracking#bot -> https://example.org/tracking#Reviewer']);
    expect(await assignments()).to.equal(0);
    const iam = await iamView();
    expect(iam.roles.map((r) => r.uri)).to.not.include('https://example.org/tracking#Inspector');
    expect((await t.http.get(`/api/v1/iam/acme/roles/${inspector}`).set(bearer(tokens.member))).status).to.equal(404);
    const memberRoles = await t.http.get(`/api/v1/iam/acme/users/${stableId('user', 'acme-member')}/roles`).set(bearer(tokens.member));
    expect(memberRoles.body.data).to.deep.equal([]);
  });

  for (const failing of [
    {
      name: 'an agent with iam:hasRole to an unknown role',
      turtle: `${PREFIX_TTL}ex:ghostbot a iam:Agent ; rdfs:label "Ghost bot" ; iam:hasRole ex:Nobody .\n`,
      focus: 'https://example.org/tracking#ghostbot',
    },
    {
      name: 'a role without a label',
      turtle: `${PREFIX_TTL}ex:Nameless a iam:Role .\n`,
      focus: 'https://example.org/tracking#Nameless',
    },
  ]) {
    it(`a REDEPLOY failing validation (${failing.name}) leaves every graph as it was and the extension inactive`, async () => {
      const before = await dumpAll();
      const iamBefore = await iamView().then((v) => [v.roles, v.agents]);
      const res = await createExtension(failing.turtle, 'Broken');
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      const ext = res.body.data;
      const command = await waitForCommand(t, tokens.owner, 'acme', ext.lastCommandId);
      expect(command).to.include({ commandType: 'REDEPLOY', status: 'failed' });
      expect(command.errorMessage).to.be.a('string').and.not.equal('');
      const report = await t.http.get(`/api/v1/packages/acme/commands/${ext.lastCommandId}/validation-report`).set(bearer(tokens.owner));
      expect(report.status).to.equal(200);
      expect(report.body.data.conforms).to.equal(false);
      expect(report.body.data.violationCount).to.be.greaterThan(0);
      expect(report.body.data.violations.map((v: { focusNode: string }) => v.focusNode)).to.include(failing.focus);
      const events = await t.http.get(`/api/v1/packages/acme/commands/${ext.lastCommandId}/events`).set(bearer(tokens.owner));
      expect(events.body.data.map((e: { level: string }) => e.level)).to.include('ERROR');

      expect(await dumpAll()).to.deep.equal(before);
      expect(await iamView().then((v) => [v.roles, v.agents])).to.deep.equal(iamBefore);
      const stored = await getExtension(ext.id);
      expect(stored).to.include({ active: false, content: failing.turtle });
      // Stored as its own graph, but nothing of it reaches the matrix's roles and agents.
      expect(await store().dumpGraph(graphs().extension(workspace.id, ext.id))).to.include(failing.focus);
      const now = await derived(TRACKING_URI);
      expect(JSON.stringify(now)).to.not.include(failing.focus);
      expect(await agentsSeen()).to.not.include(failing.focus);
      // Deleting the broken extension re-deploys cleanly.
      const del = await t.http.delete(`${EXT}/acme/${ext.id}`).set(bearer(tokens.owner));
      const delCommand = /command ([0-9a-f-]{36})/.exec(del.body.data)![1]!;
      expect((await waitForCommand(t, tokens.owner, 'acme', delCommand)).status).to.equal('completed');
    });
  }

  it('uninstall leaves extensions in place, inactive; installing again deploys them', async () => {
    const res = await createExtension(AUDIT_TTL, 'Audit');
    const ext = res.body.data;
    expect((await waitForCommand(t, tokens.owner, 'acme', ext.lastCommandId)).status).to.equal('completed');
    expect((await getExtension(ext.id)).active).to.equal(true);

    const uninstall = await t.http.delete('/api/v1/packages/acme/tracking').set(bearer(tokens.owner));
    expect(uninstall.status).to.equal(202);
    const uninstalled = await waitForCommand(t, tokens.owner, 'acme', uninstall.body.data.id);
    expect(uninstalled.status, JSON.stringify(uninstalled)).to.equal('completed');
    const list = await t.http.get(`${EXT}/acme`).set(bearer(tokens.owner));
    expect(list.body.data.map((e: { id: string; active: boolean }) => [e.id, e.active])).to.deep.equal([[ext.id, false]]);
    expect(await store().dumpGraph(derivedGraph(TRACKING_URI))).to.equal('');
    expect((await getExtension(ext.id)).content).to.equal(AUDIT_TTL);
    // A new extension cannot target the matrix now (404); changes to this one are kept, inactive, without a command.
    const orphan = await createExtension(AUDIT_TTL);
    expect(orphan.status).to.equal(404);
    const relabel = await t.http.put(`${EXT}/acme/${ext.id}?label=Audit%20again`).set(bearer(tokens.owner));
    expect(relabel.status).to.equal(200);
    expect(relabel.body.data).to.include({ active: false, label: 'Audit again', lastCommandId: ext.lastCommandId });

    const archive = await tinyPackage({
      name: 'tracking',
      matrices: [
        { name: 'tracking', uri: TRACKING_URI, turtle: TRACKING_TTL },
        { name: 'notes', uri: NOTES_URI, turtle: NOTES_TTL },
      ],
    });
    const reinstalled = await uploadAndWait(t, tokens.owner, 'acme', archive);
    expect(reinstalled.status, JSON.stringify(reinstalled)).to.equal('completed');
    expect(await getExtension(ext.id)).to.include({ active: true, label: 'Audit again' });
    expect((await derived(TRACKING_URI)).roles.map((r) => r.uri)).to.deep.equal(['https://example.org/tracking#Auditor', 'https://example.org/tracking#Reviewer']);
  });

  it('takes targetMatrix and label as form fields (the ecosystem client), names an unlabelled extension after its file', async () => {
    const extra = `${PREFIX_TTL}ex:Observer a iam:Role ; rdfs:label "Observer" .\n`;
    const form = await t.http.post(`${EXT}/acme`).set(bearer(tokens.owner))
      .field('targetMatrix', TRACKING_URI).field('label', 'Observers').attach('file', Buffer.from(extra), 'observers.ttl');
    expect(form.status, JSON.stringify(form.body)).to.equal(200);
    expect(form.body.data).to.include({ label: 'Observers', targetMatrixUri: TRACKING_URI, active: false });
    const unlabelled = await t.http.post(`${EXT}/acme`).set(bearer(tokens.owner))
      .field('targetMatrix', TRACKING_URI).attach('file', Buffer.from(`${PREFIX_TTL}ex:Observer rdfs:comment "Watches" .\n`), 'observer-notes.ttl');
    expect(unlabelled.status).to.equal(200);
    expect(unlabelled.body.data.label).to.equal('observer-notes');
    const disagree = await t.http.post(`${EXT}/acme?targetMatrix=${encodeURIComponent(NOTES_URI)}`).set(bearer(tokens.owner))
      .field('targetMatrix', TRACKING_URI).attach('file', Buffer.from(extra), 'x.ttl');
    expect(disagree.status).to.equal(400);
    expect(disagree.body.error.message).to.match(/both as query parameter and form field/);
    for (const res of [form, unlabelled]) {
      expect((await waitForCommand(t, tokens.owner, 'acme', res.body.data.lastCommandId)).status).to.equal('completed');
    }
    const list = (await t.http.get(`${EXT}/acme`).set(bearer(tokens.owner))).body.data as Array<{ label: string; active: boolean }>;
    expect(list.map((e) => [e.label, e.active])).to.deep.equal([['Audit again', true], ['Observers', true], ['observer-notes', true]]);
    expect((await derived(TRACKING_URI)).roles.map((r) => r.uri)).to.include('https://example.org/tracking#Observer');
  });

  it('keeps extensions, their state and what they derived across a restart', async () => {
    const before = (await t.http.get(`${EXT}/acme`).set(bearer(tokens.owner))).body.data;
    const derivedBefore = await derived(TRACKING_URI);
    await t.close();
    t = await startTestServer({}, t.dataDir);
    const after = (await t.http.get(`${EXT}/acme`).set(bearer(tokens.owner))).body.data;
    expect(after).to.deep.equal(before);
    expect(await derived(TRACKING_URI)).to.deep.equal(derivedBefore);
    const one = await getExtension(before[0].id);
    expect(one.content).to.equal(AUDIT_TTL);
  });

  it('an extension that no longer fits a new version of its matrix fails that install, which changes nothing', async () => {
    const helper = await createExtension(`${PREFIX_TTL}ex:helper a iam:Agent ; rdfs:label "Helper" ; iam:hasRole ex:Reviewer .\n`, 'Helper');
    expect((await waitForCommand(t, tokens.owner, 'acme', helper.body.data.lastCommandId)).status).to.equal('completed');
    // Version 1.1.0 renames Reviewer to Approver: the helper's iam:hasRole would point at nothing.
    const v2 = await tinyPackage({
      name: 'tracking', version: '1.1.0',
      matrices: [
        { name: 'tracking', uri: TRACKING_URI, turtle: TRACKING_TTL.replaceAll('Reviewer', 'Approver') },
        { name: 'notes', uri: NOTES_URI, turtle: NOTES_TTL },
      ],
    });
    const before = await dumpAll();
    const extensionsBefore = (await t.http.get(`${EXT}/acme`).set(bearer(tokens.owner))).body.data;
    const failed = await uploadAndWait(t, tokens.owner, 'acme', v2);
    expect(failed.status).to.equal('failed');
    const report = await t.http.get(`/api/v1/packages/acme/commands/${failed.id}/validation-report`).set(bearer(tokens.owner));
    expect(report.body.data.violations.map((v: { focusNode: string }) => v.focusNode)).to.include('https://example.org/tracking#helper');
    expect(await dumpAll()).to.deep.equal(before);
    expect((await t.http.get(`${EXT}/acme`).set(bearer(tokens.owner))).body.data).to.deep.equal(extensionsBefore);
    expect((await t.http.get('/api/v1/packages/acme/tracking').set(bearer(tokens.owner))).body.data.currentVersion).to.equal('1.0.0');

    // Without the helper, the new version installs and the other extensions deploy with it.
    const del = await t.http.delete(`${EXT}/acme/${helper.body.data.id}`).set(bearer(tokens.owner));
    expect((await waitForCommand(t, tokens.owner, 'acme', /command ([0-9a-f-]{36})/.exec(del.body.data)![1]!)).status).to.equal('completed');
    const updated = await uploadAndWait(t, tokens.owner, 'acme', v2);
    expect(updated.status, JSON.stringify(updated)).to.equal('completed');
    const list = (await t.http.get(`${EXT}/acme`).set(bearer(tokens.owner))).body.data as Array<{ active: boolean }>;
    expect(list.every((e) => e.active)).to.equal(true);
    expect((await derived(TRACKING_URI)).roles.map((r) => r.uri)).to.deep.equal([
      'https://example.org/tracking#Approver', 'https://example.org/tracking#Auditor', 'https://example.org/tracking#Observer',
    ]);
  });
});
