import { expect } from 'chai';
import { SparqlEndpointFetcher } from 'fetch-sparql-endpoint';
import n3 from 'n3';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { stableId } from '../../src/rdf/ids.js';
import { installMatrices, supportMatrixTurtle } from '../helpers/installs.js';
import { sparql, iri } from '../../src/rdf/sparql.js';

const S = 'https://example.org/matrices/support';
const WSM = 'https://w3id.org/wsm/ns#';

/** Collects a stream of bindings or quads. */
function collect<T>(stream: NodeJS.ReadableStream): Promise<T[]> {
  return new Promise((resolve, reject) => {
    const items: T[] = [];
    stream.on('data', (item: T) => items.push(item));
    stream.on('error', reject);
    stream.on('end', () => resolve(items));
  });
}

describe('SPARQL endpoint for administrators', function () {
  this.timeout(60_000);
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  let ws: { id: string; slug: string };
  let other: Awaited<ReturnType<typeof seedWorkspace>>;
  let endpoint: string;
  const fetcher = (token: string, extra: ConstructorParameters<typeof SparqlEndpointFetcher>[0] = {}) =>
    new SparqlEndpointFetcher({ defaultHeaders: new Headers({ Authorization: `Bearer ${token}` }), ...extra });

  before(async () => {
    t = await startTestServer({ WSM_QUERY_TIMEOUT_MS: '1500', WSM_QUERY_MAX_TRIPLES: '20' });
    ({ tokens, workspace: ws } = await seedWorkspace(t, 'acme'));
    other = await seedWorkspace(t, 'other');
    await installMatrices(t, tokens.owner, 'acme', 'support', [{ uri: S, turtle: supportMatrixTurtle(S) }]);
    await installMatrices(t, other.tokens.owner, 'other', 'secret', [{ uri: 'https://example.org/matrices/secret', turtle: supportMatrixTurtle('https://example.org/matrices/secret') }]);
    const created = await t.http.post('/api/v1/commands/acme').set(bearer(tokens.member))
      .send({ alias: 'agent-roles', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT WHERE { ?s ?p ?o }' });
    expect(created.status).to.equal(200);
    await t.http.post('/api/v1/commands/other').set(bearer(other.tokens.owner))
      .send({ alias: 'secret-command', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT WHERE { ?s ?p ?o }' });
    endpoint = `${t.url}/api/v1/sparql/acme`;
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  describe('through fetch-sparql-endpoint (a third-party client)', () => {
    for (const method of ['POST', 'GET'] as const) {
      it(`SELECT by ${method}: sees the workspace's records and matrices`, async () => {
        const rows = await collect<Record<string, { value: string }>>(await fetcher(tokens.owner, { method }).fetchBindings(endpoint, `
          PREFIX wsm: <${WSM}>
          SELECT ?alias ?owner WHERE { GRAPH ?g { ?c a wsm:SlashCommand ; wsm:alias ?alias ; wsm:owner ?u } GRAPH ?s { ?u wsm:username ?owner } }`));
        expect(rows.map((r) => [r.alias!.value, r.owner!.value])).to.deep.equal([['agent-roles', 'acme-member']]);
      });
    }

    it('SELECT over POST application/sparql-query (directPost)', async () => {
      const rows = await collect<Record<string, { value: string }>>(await fetcher(tokens.owner, { directPost: true })
        .fetchBindings(endpoint, 'SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s a <https://poliglot.io/os/spec/iam#Role> } }'));
      expect(rows[0]!.n!.value).to.equal('3');
    });

    it('ASK and CONSTRUCT', async () => {
      expect(await fetcher(tokens.owner).fetchAsk(endpoint, `ASK { GRAPH ?g { <${S}#HelpBot> ?p ?o } }`)).to.equal(true);
      expect(await fetcher(tokens.owner).fetchAsk(endpoint, 'ASK { GRAPH ?g { ?s ?p "secret-command" } }')).to.equal(false);
      const quads = await collect<{ subject: { value: string }; object: { value: string } }>(await fetcher(tokens.owner)
        .fetchTriples(endpoint, `CONSTRUCT { ?a <urn:role> ?r } WHERE { GRAPH ?g { ?a <https://poliglot.io/os/spec/iam#hasRole> ?r } }`));
      expect(quads.map((q) => `${q.subject.value} ${q.object.value}`).sort()).to.deep.equal([
        `${S}#HelpBot ${S}#Responder`, `${S}#HelpBot ${S}#Triage`, `${S}#TriageBot ${S}#Triage`,
      ]);
    });

    it('refuses updates (read-only)', async () => {
      let failure: Error | undefined;
      try {
        await fetcher(tokens.owner).fetchUpdate(endpoint, `INSERT DATA { GRAPH <urn:g> { <urn:a> <urn:b> <urn:c> } }`);
      } catch (err) { failure = err as Error; }
      expect(failure?.message).to.match(/HTTP status 400/);
      expect(await t.server.services.store.ask(sparql`ASK { GRAPH <urn:g> { ?s ?p ?o } }`)).to.equal(false);
    });
  });

  describe('hand-written requests', () => {
    const get = (query: string, accept?: string, token = tokens.owner) => {
      const r = t.http.get('/api/v1/sparql/acme').query({ query }).set(bearer(token));
      return accept ? r.set('Accept', accept) : r;
    };

    it('sees every graph of the workspace and of the system graph only its own record and members', async () => {
      const res = await get('SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } } ORDER BY ?g');
      expect(res.status).to.equal(200);
      expect(res.headers['content-type']).to.match(/^application\/sparql-results\+json/);
      const names = res.body.results.bindings.map((b: { g: { value: string } }) => b.g.value) as string[];
      const { graphs } = t.server.services;
      const matrixId = stableId('matrix', ws.id, S);
      expect(names).to.include.members([graphs.iam(ws.id), graphs.packages(ws.id), graphs.slashCommands(ws.id), graphs.system,
        graphs.matrix(ws.id, matrixId), graphs.derived(ws.id, matrixId)]);
      expect(names.filter((g) => g !== graphs.system).every((g) => g.startsWith(graphs.workspacePrefix(ws.id)))).to.equal(true);
      const sys = await get(`SELECT ?s WHERE { GRAPH <${graphs.system}> { ?s a ?type } } ORDER BY ?s`);
      const subjects = sys.body.results.bindings.map((b: { s: { value: string } }) => b.s.value) as string[];
      expect(subjects).to.include(graphs.resource('workspace', ws.id));
      expect(subjects).to.not.include(graphs.resource('workspace', other.workspace.id));
      const usernames = await get(`PREFIX wsm: <${WSM}> SELECT ?n WHERE { GRAPH ?g { ?u wsm:username ?n } } ORDER BY ?n`);
      expect(usernames.body.results.bindings.map((b: { n: { value: string } }) => b.n.value)).to.deep.equal(['acme-member', 'acme-owner']);
      const leak = await get('SELECT * WHERE { GRAPH ?g { ?s ?p ?o } FILTER(CONTAINS(STR(?o), "secret")) }');
      expect(leak.body.results.bindings).to.deep.equal([]);
    });

    it('shows a member added or removed in the system graph at once (the members are in the IAM graph)', async () => {
      const usernames = async () => (await get(`PREFIX wsm: <${WSM}> SELECT ?n WHERE { GRAPH <${t.server.services.graphs.system}> { ?u wsm:username ?n } } ORDER BY ?n`))
        .body.results.bindings.map((b: { n: { value: string } }) => b.n.value) as string[];
      expect(await usernames()).to.deep.equal(['acme-member', 'acme-owner']);
      // A new user (a write to the system graph too), then an existing user: a write to the IAM graph only.
      expect((await t.http.put('/api/v1/workspaces/acme/members/ivy').set(bearer(tokens.owner)).send({ email: 'ivy@private.example' })).status).to.equal(200);
      await t.token('frank');
      expect((await t.http.put('/api/v1/workspaces/acme/members/frank').set(bearer(tokens.owner)).send({})).status).to.equal(200);
      expect(await usernames()).to.deep.equal(['acme-member', 'acme-owner', 'frank', 'ivy']);
      for (const u of ['ivy', 'frank']) expect((await t.http.delete(`/api/v1/workspaces/acme/members/${u}`).set(bearer(tokens.owner))).status).to.equal(200);
      expect(await usernames()).to.deep.equal(['acme-member', 'acme-owner']);
      const email = await get(`PREFIX wsm: <${WSM}> SELECT ?e WHERE { GRAPH ?g { ?u wsm:email ?e } }`);
      expect(JSON.stringify(email.body)).to.not.include('ivy@private.example');
    });

    it('answers SELECT as SPARQL JSON, XML, CSV and TSV', async () => {
      const q = `SELECT ?r ?label WHERE { GRAPH ?g { ?r a <https://poliglot.io/os/spec/iam#Role> ; <http://www.w3.org/2000/01/rdf-schema#label> ?label } } ORDER BY ?label`;
      const xml = await get(q, 'application/sparql-results+xml');
      expect(xml.headers['content-type']).to.match(/^application\/sparql-results\+xml/);
      expect(xml.text).to.include('<variable name="r"/>');
      expect(xml.text).to.include(`<binding name="r"><uri>${S}#Responder</uri></binding><binding name="label"><literal>Responder</literal></binding>`);
      const csv = await get(q, 'text/csv');
      expect(csv.text).to.equal(`r,label\r\n${S}#Responder,Responder\r\n${S}#Supervisor,Supervisor\r\n${S}#Triage,Triage\r\n`);
      const tsv = await get(q, 'text/tab-separated-values');
      expect(tsv.text.split('\n')[0]).to.equal('?r\t?label');
      expect(tsv.text.split('\n')[1]).to.equal(`<${S}#Responder>\t"Responder"`);
      const ask = await get('ASK { GRAPH ?g { ?s ?p ?o } }', 'application/sparql-results+xml');
      expect(ask.text).to.include('<boolean>true</boolean>');
    });

    it('answers CONSTRUCT as Turtle (default), N-Triples or JSON-LD, and 406 otherwise', async () => {
      const q = `PREFIX iam: <https://poliglot.io/os/spec/iam#> CONSTRUCT { ?a iam:hasRole ?r } WHERE { GRAPH ?g { ?a iam:hasRole ?r } }`;
      const ttl = await get(q);
      expect(ttl.headers['content-type']).to.match(/^text\/turtle/);
      expect(new n3.Parser().parse(ttl.text)).to.have.length(3);
      const nt = await get(q, 'application/n-triples');
      expect(nt.text.trim().split('\n')).to.have.length(3);
      const ld = await get(q, 'application/ld+json');
      expect(JSON.parse(ld.text)['@context']).to.deep.equal({ iam: 'https://poliglot.io/os/spec/iam#' });
      expect((await get(q, 'text/csv')).status).to.equal(406);
      expect((await get('SELECT * WHERE { ?s ?p ?o }', 'text/turtle')).status).to.equal(406);
    });

    it('takes the query by POST form and by POST application/sparql-query', async () => {
      const form = await t.http.post('/api/v1/sparql/acme').set(bearer(tokens.owner)).type('form').send({ query: 'ASK { GRAPH ?g { ?s ?p ?o } }' });
      expect(form.status).to.equal(200);
      expect(form.body.boolean).to.equal(true);
      const direct = await t.http.post('/api/v1/sparql/acme').set(bearer(tokens.owner)).set('Content-Type', 'application/sparql-query').send('ASK { GRAPH ?g { ?s ?p "nothing" } }');
      expect(direct.body.boolean).to.equal(false);
    });

    it('honours default-graph-uri and named-graph-uri', async () => {
      const { graphs } = t.server.services;
      const res = await t.http.get('/api/v1/sparql/acme').set(bearer(tokens.owner))
        .query({ query: 'SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }', 'default-graph-uri': graphs.iam(ws.id) });
      const iamSize = (await t.server.services.store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH ${iri(graphs.iam(ws.id))} { ?s ?p ?o } }`))[0]!.n!.value;
      expect(res.body.results.bindings[0].n.value).to.equal(iamSize);
      const outside = await t.http.get('/api/v1/sparql/acme').set(bearer(tokens.owner))
        .query({ query: 'SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }', 'default-graph-uri': graphs.iam(other.workspace.id) });
      expect(outside.body.results.bindings[0].n.value).to.equal('0');
      const bad = await t.http.get('/api/v1/sparql/acme').set(bearer(tokens.owner)).query({ query: 'ASK {}', 'default-graph-uri': 'not an iri' });
      expect(bad.status).to.equal(400);
    });

    it('reads a dataset as a set: a graph named twice (protocol or FROM / FROM NAMED) counts once', async () => {
      const g = t.server.services.graphs.iam(ws.id);
      const count = async (query: string, params: Record<string, string | string[]> = {}) => {
        const res = await t.http.get('/api/v1/sparql/acme').set(bearer(tokens.owner)).query({ query, ...params });
        expect(res.status, res.text).to.equal(200);
        return Number(res.body.results.bindings[0].n.value);
      };
      const inDefault = 'SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }';
      const inNamed = 'SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }';
      const once = await count(inDefault, { 'default-graph-uri': g });
      expect(once).to.be.greaterThan(0);
      expect(await count(inDefault, { 'default-graph-uri': [g, g] })).to.equal(once);
      expect(await count(inNamed, { 'named-graph-uri': g })).to.equal(once);
      expect(await count(inNamed, { 'named-graph-uri': [g, g] })).to.equal(once);
      expect(await count(`SELECT (COUNT(*) AS ?n) FROM <${g}> FROM <${g}> WHERE { ?s ?p ?o }`)).to.equal(once);
      expect(await count(`SELECT (COUNT(*) AS ?n) FROM NAMED <${g}> FROM NAMED <${g}> WHERE { GRAPH ?g { ?s ?p ?o } }`)).to.equal(once);
      // The protocol's dataset replaces the query's: FROM NAMED names nothing then.
      expect(await count(`SELECT (COUNT(*) AS ?n) FROM NAMED <${g}> WHERE { GRAPH ?g { ?s ?p ?o } }`, { 'default-graph-uri': g })).to.equal(0);
    });

    it('answers another method 405 with Allow (after the token is checked)', async () => {
      for (const method of ['put', 'delete', 'patch'] as const) {
        const res = await t.http[method]('/api/v1/sparql/acme').set(bearer(tokens.owner)).send('ASK {}');
        expect(res.status, method).to.equal(405);
        expect(res.headers.allow).to.equal('GET, HEAD, POST');
        expect(res.body.error.code).to.equal('METHOD_NOT_ALLOWED');
        expect(res.body.error.message).to.include(method.toUpperCase());
      }
      expect((await t.http.put('/api/v1/sparql/acme').send('ASK {}')).status).to.equal(401);
      expect((await t.http.put('/api/v1/no-such-thing').set(bearer(tokens.owner))).status).to.equal(404);
    });

    it('refuses updates, LOAD, SERVICE, bad syntax and missing queries with 400, odd bodies with 415', async () => {
      const cases: Array<[() => Promise<{ status: number; body: { error: { message: string } } }>, RegExp]> = [
        [() => get('INSERT DATA { <urn:a> <urn:b> <urn:c> }'), /update.*not allowed/],
        [() => get('DROP ALL'), /update/],
        [() => get('LOAD <https://example.org/x>'), /LOAD/],
        [() => get('SELECT * WHERE { SERVICE <https://example.org/sparql> { ?s ?p ?o } }'), /SERVICE/],
        [() => get('SELECT * WHERE {\n ?s ?p }'), /line 2, column/],
        [() => t.http.get('/api/v1/sparql/acme').set(bearer(tokens.owner)), /Missing the query/],
        [() => t.http.post('/api/v1/sparql/acme').set(bearer(tokens.owner)).type('form').send({ update: 'DROP ALL' }), /read-only/],
        [() => t.http.post('/api/v1/sparql/acme').set(bearer(tokens.owner)).set('Content-Type', 'application/sparql-update').send('DROP ALL'), /read-only/],
      ];
      const before = await t.server.services.store.size();
      for (const [request, message] of cases) {
        const res = await request();
        expect(res.status, String(message)).to.equal(400);
        expect(res.body.error.message).to.match(message);
      }
      expect(await t.server.services.store.size()).to.equal(before);
      const odd = await t.http.post('/api/v1/sparql/acme').set(bearer(tokens.owner)).set('Content-Type', 'text/plain').send('ASK {}');
      expect(odd.status).to.equal(415);
    });

    it('is for administrators only: 403 for members, 404 for outsiders and other workspaces', async () => {
      const member = await get('ASK {}', undefined, tokens.member);
      expect(member.status).to.equal(403);
      expect(member.body.error.code).to.equal('FORBIDDEN');
      expect((await get('ASK {}', undefined, tokens.outsider)).status).to.equal(404);
      expect((await get('ASK {}', undefined, other.tokens.owner)).status).to.equal(404);
      expect((await get('ASK {}', undefined, tokens.root)).status).to.equal(200);
    });

    it('applies the same limits: truncated results, 503 QUERY_TIMEOUT for a runaway query', async () => {
      const many = await get('SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }', 'text/csv');
      expect(many.status).to.equal(200);
      expect(many.headers['x-result-truncated']).to.equal('true');
      expect(many.text.trim().split('\r\n')).to.have.length(21);
      const started = Date.now();
      const runaway = await get('SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?a { ?s1 ?p1 ?o1 } GRAPH ?b { ?s2 ?p2 ?o2 } GRAPH ?c { ?s3 ?p3 ?o3 } GRAPH ?d { ?s4 ?p4 ?o4 } }');
      expect(runaway.status).to.equal(503);
      expect(runaway.body.error.code).to.equal('QUERY_TIMEOUT');
      expect(Date.now() - started).to.be.below(4000);
      expect((await get('ASK { GRAPH ?g { ?s ?p ?o } }')).body.boolean).to.equal(true);
    });
  });
});
