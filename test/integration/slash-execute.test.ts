import { expect } from 'chai';
import n3 from 'n3';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import {
  installMatrices, uninstallPackage, createExtension, replaceExtension, deleteExtension, supportMatrixTurtle,
} from '../helpers/installs.js';
import { stableId } from '../../src/rdf/ids.js';
import { sample } from '../helpers/metrics.js';
import { sparql, raw } from '../../src/rdf/sparql.js';

const S = 'https://example.org/matrices/support';
const IAM = 'https://poliglot.io/os/spec/iam#';
const RDFS = 'http://www.w3.org/2000/01/rdf-schema#';

const AGENT_ROLES = `PREFIX iam: <${IAM}>
PREFIX rdfs: <${RDFS}>
CONSTRUCT { ?agent iam:hasRole ?role . ?role rdfs:label ?label }
WHERE { ?agent a iam:Agent ; iam:hasRole ?role . OPTIONAL { ?role rdfs:label ?label } }`;

/** Every graph name the script can see, as triples `<g> <urn:sees> <s>`. */
const GRAPHS_SEEN = 'CONSTRUCT { ?g <urn:wsm-test:holds> ?s } WHERE { GRAPH ?g { ?s ?p ?o } }';

function triples(text: string, format = 'N-Triples'): Set<string> {
  const quads = new n3.Parser({ format }).parse(text);
  return new Set(quads.map((q) => `${q.subject.value} ${q.predicate.value} ${q.object.termType === 'Literal' ? JSON.stringify(q.object.value) : q.object.value}`));
}

/**
 * The suite runs twice: as it is, and after an administrator queried the
 * workspace through the SPARQL endpoint. Then the whole workspace's copy
 * is loaded in a query worker, and slash commands run in that copy,
 * confined to the knowledge graphs, instead of a copy of their own: every
 * test of what a script may see holds there too.
 */
for (const adminFirst of [false, true]) describe(`slash commands: execution in the sandbox${adminFirst ? ', after an administrator\'s query' : ''}`, () => {
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  let ws: { id: string; slug: string };
  let other: Awaited<ReturnType<typeof seedWorkspace>>;
  let matrixGraph: string;
  const ids: Record<string, string> = {};
  const run = (alias: string, accept?: string, token = tokens.member) => {
    const r = t.http.post(`/api/v1/commands/acme/alias/${alias}/execute`).set(bearer(token));
    return accept ? r.set('Accept', accept) : r;
  };
  const define = async (alias: string, scriptContent: string, scriptType = 'CONSTRUCT', interpretation?: string) => {
    const res = await t.http.post('/api/v1/commands/acme').set(bearer(tokens.owner)).send({ alias, scriptType, scriptContent, interpretation });
    if (res.status !== 200) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
    ids[alias] = res.body.data.id;
  };

  before(async () => {
    t = await startTestServer();
    ({ tokens, workspace: ws } = await seedWorkspace(t, 'acme'));
    other = await seedWorkspace(t, 'other');
    await installMatrices(t, tokens.owner, 'acme', 'support', [{ uri: S, turtle: supportMatrixTurtle(S) }]);
    matrixGraph = t.server.services.graphs.matrix(ws.id, stableId('matrix', ws.id, S));
    await installMatrices(t, other.tokens.owner, 'other', 'secret', [{ uri: 'https://example.org/matrices/secret', turtle: supportMatrixTurtle('https://example.org/matrices/secret') }]);
    await define('agent-roles', AGENT_ROLES, 'CONSTRUCT', 'Each agent with the roles it holds');
    await define('graphs-seen', GRAPHS_SEEN);
    await define('everything', 'CONSTRUCT WHERE { ?s ?p ?o }');
    if (adminFirst) {
      // A script first (its view's copy is loaded), then the administrators' query (the whole workspace's copy).
      expect((await run('everything', 'application/n-triples')).status).to.equal(200);
      const admin = await t.http.get('/api/v1/sparql/acme').query({ query: 'SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }' }).set(bearer(tokens.owner));
      expect(admin.status, admin.text).to.equal(200);
    }
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  if (adminFirst) {
    it('keeps one copy of the workspace: once the administrators\' copy is loaded, scripts run in it and the scripts\' copy is let go', async () => {
      const workers = async () => sample((await t.http.get('/metrics').set(bearer(tokens.root))).text, 'wsm_sandbox_workers');
      expect(await workers()).to.equal(1);
      const res = await run('agent-roles', 'application/n-triples');
      expect(res.status).to.equal(200);
      expect(triples(res.text).size).to.equal(5);
      expect(await workers()).to.equal(1);
    });
  }

  it('answers the JSON envelope by default: alias, interpretation, tripleCount, truncated, result (JSON-LD)', async () => {
    const res = await t.http.post(`/api/v1/commands/acme/${ids['agent-roles']}/execute`).set(bearer(tokens.member));
    expect(res.status).to.equal(200);
    expect(res.headers['content-type']).to.match(/^application\/json/);
    expect(res.body.success).to.equal(true);
    const data = res.body.data;
    expect(data).to.include({ alias: 'agent-roles', interpretation: 'Each agent with the roles it holds', tripleCount: 5, truncated: false });
    expect(data.result['@context']).to.deep.equal({ iam: IAM, rdfs: RDFS });
    const nodes = data.result['@graph'] as Array<Record<string, unknown>>;
    const helpBot = nodes.find((n) => n['@id'] === `${S}#HelpBot`)!;
    expect(helpBot['iam:hasRole']).to.have.deep.members([{ '@id': `${S}#Responder` }, { '@id': `${S}#Triage` }]);
    const triage = nodes.find((n) => n['@id'] === `${S}#Triage`)!;
    expect(triage['rdfs:label']).to.equal('Triage');
  });

  it('answers Turtle, N-Triples and JSON-LD by content negotiation, with the same triples', async () => {
    const expected = new Set([
      `${S}#TriageBot ${IAM}hasRole ${S}#Triage`,
      `${S}#HelpBot ${IAM}hasRole ${S}#Triage`,
      `${S}#HelpBot ${IAM}hasRole ${S}#Responder`,
      `${S}#Triage ${RDFS}label "Triage"`,
      `${S}#Responder ${RDFS}label "Responder"`,
    ]);
    const nt = await run('agent-roles', 'application/n-triples');
    expect(nt.status).to.equal(200);
    expect(nt.headers['content-type']).to.match(/^application\/n-triples/);
    expect(nt.headers['x-triple-count']).to.equal('5');
    expect(triples(nt.text)).to.deep.equal(expected);
    const ttl = await run('agent-roles', 'text/turtle');
    expect(ttl.headers['content-type']).to.match(/^text\/turtle/);
    expect(ttl.text).to.match(/@prefix iam: <https:\/\/poliglot\.io\/os\/spec\/iam#>/);
    expect(triples(ttl.text, 'Turtle')).to.deep.equal(expected);
    const ld = await run('agent-roles', 'application/ld+json');
    expect(ld.headers['content-type']).to.match(/^application\/ld\+json/);
    const doc = JSON.parse(ld.text);
    expect(doc['@context']).to.deep.equal({ iam: IAM, rdfs: RDFS });
    const preferred = await run('agent-roles', 'text/html;q=0.9, text/turtle;q=0.5');
    expect(preferred.headers['content-type']).to.match(/^text\/turtle/);
  });

  it('compacts JSON-LD with the empty prefix as @vocab, and answers Turtle with it', async () => {
    await define('empty-prefix', `PREFIX : <${S}#>\nPREFIX iam: <${IAM}>\nCONSTRUCT { ?a :holds ?r } WHERE { ?a iam:hasRole ?r }`);
    const res = await run('empty-prefix');
    expect(res.status).to.equal(200);
    expect(res.body.data.result['@context']).to.deep.equal({ '@vocab': `${S}#`, iam: IAM });
    const bot = (res.body.data.result['@graph'] as Array<Record<string, unknown>>).find((n) => n['@id'] === `${S}#TriageBot` || n['@id'] === 'TriageBot');
    expect(bot).to.have.property('holds');
    const ttl = await run('empty-prefix', 'text/turtle');
    expect(ttl.text).to.include(`@prefix : <${S}#>.`);
    expect(triples(ttl.text, 'Turtle').size).to.equal(3);
  });

  it('answers 406 for an Accept it cannot serve', async () => {
    const res = await run('agent-roles', 'text/html');
    expect(res.status).to.equal(406);
    expect(res.body.error.code).to.equal('NOT_ACCEPTABLE');
    expect(res.body.error.message).to.match(/text\/turtle/);
  });

  it('sees the installed matrix graphs and nothing else: no records, no derived graph, no other workspace', async () => {
    const { store, graphs } = t.server.services;
    // The install wrote the matrix's derived records (roles, agents, principals) beside it.
    const derivedGraph = graphs.derived(ws.id, stableId('matrix', ws.id, S));
    const derivedSubjects = new Set([...triples(await store.dumpGraph(derivedGraph))].map((line) => line.split(' ')[0]!));
    expect(derivedSubjects.size).to.be.greaterThan(5);
    const res = await run('graphs-seen', 'application/n-triples');
    expect(res.status).to.equal(200);
    const seen = new Set([...triples(res.text)].map((line) => line.split(' ')[0]));
    expect([...seen]).to.deep.equal([matrixGraph]);
    const all = await run('everything', 'application/n-triples');
    const text = all.text;
    expect(text).to.include(`<${S}#Triage>`);
    expect(text).to.not.include('https://w3id.org/wsm/ns#');
    expect(text).to.not.include('secret');
    for (const subject of derivedSubjects) expect(text).to.not.include(subject);
    // Naming other graphs (FROM, FROM NAMED, GRAPH) reaches nothing.
    const reach = [
      `CONSTRUCT { ?s ?p ?o } FROM <${graphs.packages(ws.id)}> WHERE { ?s ?p ?o }`,
      `CONSTRUCT { ?s ?p ?o } WHERE { GRAPH <${graphs.iam(ws.id)}> { ?s ?p ?o } }`,
      `CONSTRUCT { ?s ?p ?o } WHERE { GRAPH <${graphs.system}> { ?s ?p ?o } }`,
      `CONSTRUCT { ?s ?p ?o } WHERE { GRAPH <${derivedGraph}> { ?s ?p ?o } }`,
      `CONSTRUCT { ?s ?p ?o } FROM NAMED <${graphs.slashCommands(ws.id)}> WHERE { GRAPH ?g { ?s ?p ?o } }`,
      `CONSTRUCT { ?s ?p ?o } WHERE { GRAPH <${graphs.matrix(other.workspace.id, '')}> { ?s ?p ?o } }`,
    ];
    let n = 0;
    for (const script of reach) {
      await define(`reach-${++n}`, script);
      const out = await run(`reach-${n}`, 'application/n-triples');
      expect(out.status, script).to.equal(200);
      expect(out.text, script).to.equal('');
    }
    const otherGraphs = await t.server.services.store.select(sparql`SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s a <https://poliglot.io/os/spec/matrix#Matrix> } FILTER(CONTAINS(STR(?g), "${raw(other.workspace.id)}")) }`);
    expect(otherGraphs).to.have.length(1);
    await define('reach-other', `CONSTRUCT { ?s ?p ?o } FROM <${otherGraphs[0]!.g!.value}> WHERE { ?s ?p ?o }`);
    expect((await run('reach-other', 'application/n-triples')).text).to.equal('');
    // FROM one visible graph restricts the default graph to it.
    await define('from-matrix', `CONSTRUCT { ?s a ?t } FROM <${matrixGraph}> WHERE { ?s a ?t }`);
    expect(triples((await run('from-matrix', 'application/n-triples')).text).size).to.equal(6);
  });

  it('sees active extensions only, and follows installs, activation and uninstalls', async () => {
    const { store, graphs } = t.server.services;
    const escalation = `@prefix iam: <${IAM}> . @prefix rdfs: <${RDFS}> .
      <${S}#Escalation> a iam:Role ; rdfs:label "Escalation" .
      <${S}#TriageBot> iam:hasRole <${S}#Escalation> .`;
    // The same extension with a role that has no label: its REDEPLOY fails validation, so it stays inactive.
    const broken = `${escalation}\n<${S}#Nameless> a iam:Role .`;
    const created = await createExtension(t, tokens.owner, 'acme', S, broken, 'Escalation');
    expect(created.command).to.include({ commandType: 'REDEPLOY', status: 'failed' });
    expect(created.active).to.equal(false);
    const graph = graphs.extension(ws.id, created.id);
    expect(await store.dumpGraph(graph)).to.include('Escalation');
    const hidden = await run('agent-roles', 'application/n-triples');
    expect(hidden.status).to.equal(200);
    expect(hidden.text).to.not.include('Escalation');
    const unseen = await run('graphs-seen', 'application/n-triples');
    expect([...new Set([...triples(unseen.text)].map((l) => l.split(' ')[0]))]).to.deep.equal([matrixGraph]);

    // Fixed (X2): the REDEPLOY completes and the extension is active.
    const fixed = await replaceExtension(t, tokens.owner, 'acme', created.id, escalation);
    expect(fixed.command).to.include({ commandType: 'REDEPLOY', status: 'completed' });
    expect(fixed.active).to.equal(true);
    const shown = await run('agent-roles', 'application/n-triples');
    expect(triples(shown.text)).to.include(`${S}#TriageBot ${IAM}hasRole ${S}#Escalation`);
    expect(triples(shown.text)).to.include(`${S}#Escalation ${RDFS}label "Escalation"`);
    const seen = await run('graphs-seen', 'application/n-triples');
    expect(new Set([...triples(seen.text)].map((l) => l.split(' ')[0]))).to.deep.equal(new Set([matrixGraph, graph]));

    const second = 'https://example.org/matrices/billing';
    await installMatrices(t, tokens.owner, 'acme', 'billing', [{
      uri: second,
      turtle: `@prefix mtx: <https://poliglot.io/os/spec/matrix#> . @prefix iam: <${IAM}> . @prefix rdfs: <${RDFS}> .
        <${second}> a mtx:Matrix ; rdfs:label "Billing" .
        <${second}#Biller> a iam:Role ; rdfs:label "Biller" .
        <${second}#Clerk> a iam:Agent ; rdfs:label "Clerk" ; iam:hasRole <${second}#Biller> .`,
    }]);
    const both = await run('agent-roles', 'application/n-triples');
    expect(triples(both.text)).to.include(`${second}#Clerk ${IAM}hasRole ${second}#Biller`);
    await uninstallPackage(t, tokens.owner, 'acme', 'billing');
    // Broken again (X2): inactive, its content graph still in the store, invisible to scripts.
    const rebroken = await replaceExtension(t, tokens.owner, 'acme', created.id, broken);
    expect(rebroken.command.status).to.equal('failed');
    expect(rebroken.active).to.equal(false);
    expect(await store.dumpGraph(graph)).to.include('Escalation');
    const after = await run('agent-roles', 'application/n-triples');
    expect(after.text).to.not.include('billing');
    expect(after.text).to.not.include('Escalation');
    expect(triples(after.text).size).to.equal(5);
    await deleteExtension(t, tokens.owner, 'acme', created.id);
    expect(triples((await run('agent-roles', 'application/n-triples')).text).size).to.equal(5);
  });

  it('runs DESCRIBE scripts', async () => {
    await define('describe-bot', `PREFIX s: <${S}#>\nDESCRIBE s:HelpBot`, 'DESCRIBE');
    const res = await run('describe-bot', 'application/n-triples');
    expect(res.status).to.equal(200);
    const got = triples(res.text);
    expect(got).to.include(`${S}#HelpBot ${RDFS}label "Help bot"`);
    expect(got).to.include(`${S}#HelpBot ${IAM}hasRole ${S}#Responder`);
  });

  it('lets any member execute, by id or alias; 404 for unknown commands and for outsiders', async () => {
    expect((await run('agent-roles', undefined, tokens.owner)).status).to.equal(200);
    expect((await run('agent-roles', undefined, tokens.root)).status).to.equal(200);
    expect((await run('agent-roles', undefined, tokens.outsider)).status).to.equal(404);
    expect((await run('no-such-alias')).status).to.equal(404);
    const byId = await t.http.post('/api/v1/commands/acme/00000000-0000-4000-8000-000000000000/execute').set(bearer(tokens.member));
    expect(byId.status).to.equal(404);
    // A command of another workspace cannot be run through this one.
    const theirs = await t.http.post('/api/v1/commands/other').set(bearer(other.tokens.owner))
      .send({ alias: 'theirs', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT WHERE { ?s ?p ?o }' });
    const cross = await t.http.post(`/api/v1/commands/acme/${theirs.body.data.id}/execute`).set(bearer(tokens.member));
    expect(cross.status).to.equal(404);
    const there = await t.http.post(`/api/v1/commands/other/${theirs.body.data.id}/execute`).set(bearer(other.tokens.member)).set('Accept', 'application/n-triples');
    expect(there.status).to.equal(200);
    expect(there.text).to.include('secret');
    expect(there.text).to.not.include('matrices/support');
  });
});

describe('slash commands: scripts and an administrator querying a cold workspace together', () => {
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  before(async () => {
    t = await startTestServer();
    ({ tokens } = await seedWorkspace(t, 'acme'));
    await installMatrices(t, tokens.owner, 'acme', 'support', [{ uri: S, turtle: supportMatrixTurtle(S) }]);
    for (const [alias, script] of [['agent-roles', AGENT_ROLES], ['graphs-seen', GRAPHS_SEEN]] as const) {
      const res = await t.http.post('/api/v1/commands/acme').set(bearer(tokens.owner)).send({ alias, scriptType: 'CONSTRUCT', scriptContent: script });
      expect(res.status, res.text).to.equal(200);
    }
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  const syncs = async (view: 'knowledge' | 'all') => sample((await t.http.get('/metrics').set(bearer(tokens.root))).text, 'wsm_sandbox_syncs_total', { view });
  const run = (alias: string) => t.http.post(`/api/v1/commands/acme/alias/${alias}/execute`).set(bearer(tokens.member)).set('Accept', 'application/n-triples');

  it('loads the workspace once: the scripts that started loading their own copy wait for the administrators\' copy, confined as before', async () => {
    expect(await syncs('knowledge')).to.equal(0);
    expect(await syncs('all')).to.equal(0);
    // Scripts first (their view starts loading), the administrator's query right behind them.
    const answers = await Promise.all([
      run('agent-roles'), run('graphs-seen'), run('agent-roles'),
      t.http.get('/api/v1/sparql/acme').query({ query: 'SELECT (COUNT(DISTINCT ?g) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }' }).set(bearer(tokens.owner)),
    ]);
    for (const res of answers) expect(res.status, res.text).to.equal(200);
    expect(triples(answers[0]!.text).size).to.equal(5);
    expect(answers[2]!.text).to.equal(answers[0]!.text);
    // Still only the knowledge graphs: the matrix graph, no records, no derived graph.
    const seen = [...triples(answers[1]!.text)].map((line) => line.split(' ')[0]!);
    expect(new Set(seen).size).to.equal(1);
    expect(seen[0]).to.match(/\/matrices\/[^/]+$/);
    // The administrator sees more graphs than the scripts do.
    expect(Number(answers[3]!.body.results.bindings[0].n.value)).to.be.greaterThan(1);
    // No copy of the scripts' own was loaded: they ran in the administrators' copy.
    expect(await syncs('knowledge')).to.equal(0);
    expect(await syncs('all')).to.be.at.least(1);
  });

  it('scripts arriving while the administrators\' copy loads wait for it rather than load their own', async () => {
    const beta = await seedWorkspace(t, 'beta');
    await installMatrices(t, beta.tokens.owner, 'beta', 'support', [{ uri: S, turtle: supportMatrixTurtle(S) }]);
    const created = await t.http.post('/api/v1/commands/beta').set(bearer(beta.tokens.owner)).send({ alias: 'agent-roles', scriptType: 'CONSTRUCT', scriptContent: AGENT_ROLES });
    expect(created.status, created.text).to.equal(200);
    const before = { knowledge: await syncs('knowledge'), all: await syncs('all') };
    // The administrator's query first this time.
    const admin = t.http.get('/api/v1/sparql/beta').query({ query: 'ASK { ?s ?p ?o }' }).set(bearer(beta.tokens.owner)).then((res) => res);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const scripts = await Promise.all([1, 2, 3].map(() =>
      t.http.post('/api/v1/commands/beta/alias/agent-roles/execute').set(bearer(beta.tokens.member)).set('Accept', 'application/n-triples').then((res) => res)));
    expect((await admin).status).to.equal(200);
    for (const res of scripts) {
      expect(res.status, res.text).to.equal(200);
      expect(triples(res.text).size).to.equal(5);
    }
    expect(await syncs('knowledge')).to.equal(before.knowledge);
    expect(await syncs('all')).to.be.greaterThan(before.all);
  });
});
