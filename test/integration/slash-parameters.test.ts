import { expect } from 'chai';
import n3 from 'n3';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { storeDump } from '../helpers/remote.js';
import { installMatrices, supportMatrixTurtle } from '../helpers/installs.js';

const S = 'https://example.org/matrices/support';
const IAM = 'https://poliglot.io/os/spec/iam#';
const RDFS = 'http://www.w3.org/2000/01/rdf-schema#';

/** The roles an agent holds; ?agent is the parameter. */
const ROLES_OF = `PREFIX iam: <${IAM}>
CONSTRUCT { ?agent iam:hasRole ?role } WHERE { ?agent iam:hasRole ?role }`;
/** Resources with a given label; ?label is the parameter. */
const BY_LABEL = `PREFIX rdfs: <${RDFS}>
CONSTRUCT { ?s rdfs:label ?label } WHERE { ?s rdfs:label ?label }`;
/** Echoes a literal argument back as a triple, whatever it holds. */
const ECHO = 'CONSTRUCT { <urn:wsm-test:echo> <urn:wsm-test:value> ?text } WHERE { OPTIONAL { ?nothing <urn:wsm-test:never> ?text } }';

const PAYLOADS = [
  'x> } ; DROP ALL ; #',
  '"} ; DROP ALL ; INSERT DATA { <urn:evil> <urn:evil> <urn:evil> } #',
  "'''} ; CLEAR ALL ; #",
  '""" ; DELETE WHERE { ?s ?p ?o } ; #',
  '\\"> } } ; DROP GRAPH <urn:x> ; #',
  ') } UNION { ?s ?p ?o } #',
  '\u0000\n\r\t end',
];

function triples(text: string): string[] {
  return new n3.Parser({ format: 'N-Triples' }).parse(text)
    .map((q) => `${q.subject.value} ${q.predicate.value} ${q.object.value}`).sort();
}

describe('slash commands: discovery and parameters', function () {
  this.timeout(60_000);
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  const dump = () => storeDump(t.server.services.store);

  const create = (token: string, body: Record<string, unknown>) => t.http.post('/api/v1/commands/acme').set(bearer(token)).send(body);
  const run = (alias: string, args?: unknown, accept = 'application/n-triples', token = tokens.member) => {
    const r = t.http.post(`/api/v1/commands/acme/alias/${alias}/execute`).set(bearer(token)).set('Accept', accept);
    return args === undefined ? r : r.send({ arguments: args });
  };

  before(async () => {
    // A generous limit: the first query waits for worker threads to start, slow on a loaded machine.
    t = await startTestServer({ WSM_QUERY_TIMEOUT_MS: '30000' });
    ({ tokens } = await seedWorkspace(t, 'acme'));
    await seedWorkspace(t, 'other');
    await installMatrices(t, tokens.owner, 'acme', 'support', [{ uri: S, turtle: supportMatrixTurtle(S) }]);
    for (const token of Object.values(tokens)) await t.http.get('/api/v1/workspaces').set(bearer(token));
    const made = [
      await create(tokens.owner, {
        alias: 'roles-of', scriptType: 'CONSTRUCT', scriptContent: ROLES_OF, description: 'Roles of one agent',
        parameters: [{ name: 'agent', kind: 'iri', required: true, description: 'The agent' }],
      }),
      await create(tokens.member, {
        alias: 'by-label', scriptType: 'CONSTRUCT', scriptContent: BY_LABEL,
        parameters: [{ name: 'label', kind: 'literal', required: false }],
      }),
      await create(tokens.member, {
        alias: 'echo', scriptType: 'CONSTRUCT', scriptContent: ECHO,
        parameters: [{ name: 'text', kind: 'literal', required: true }],
      }),
      await create(tokens.member, {
        alias: 'count-of', scriptType: 'CONSTRUCT', scriptContent: ECHO.replace('?text', '?n').replace('?text', '?n'),
        parameters: [{ name: 'n', kind: 'literal', datatype: 'http://www.w3.org/2001/XMLSchema#integer', required: true }],
      }),
    ];
    for (const res of made) expect(res.status, JSON.stringify(res.body)).to.equal(200);
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  describe('discovery', () => {
    it('lists the caller\'s own commands by default and every command of the workspace with scope=all, each with its owner', async () => {
      const own = await t.http.get('/api/v1/commands/acme').set(bearer(tokens.member));
      expect(own.status).to.equal(200);
      expect(own.body.data.map((c: { alias: string }) => c.alias)).to.deep.equal(['by-label', 'count-of', 'echo']);
      const all = await t.http.get('/api/v1/commands/acme?scope=all').set(bearer(tokens.member));
      expect(all.status).to.equal(200);
      expect(all.body.data.map((c: { alias: string; owner: { username: string } }) => [c.alias, c.owner.username])).to.deep.equal([
        ['by-label', 'acme-member'], ['count-of', 'acme-member'], ['echo', 'acme-member'], ['roles-of', 'acme-owner'],
      ]);
      const rolesOf = all.body.data.find((c: { alias: string }) => c.alias === 'roles-of');
      expect(rolesOf.parameters).to.deep.equal([{ name: 'agent', kind: 'iri', required: true, description: 'The agent' }]);
      const ownExplicit = await t.http.get('/api/v1/commands/acme?scope=own').set(bearer(tokens.owner));
      expect(ownExplicit.body.data.map((c: { alias: string }) => c.alias)).to.deep.equal(['roles-of']);
    });

    it('refuses an unknown scope (400) and keeps outsiders out (404)', async () => {
      const bad = await t.http.get('/api/v1/commands/acme?scope=everyone').set(bearer(tokens.member));
      expect(bad.status).to.equal(400);
      expect(bad.body.error.message).to.match(/scope must be "own".*or "all"/);
      const outsider = await t.http.get('/api/v1/commands/acme?scope=all').set(bearer(tokens.outsider));
      expect(outsider.status).to.equal(404);
    });

    it('answers one command by alias, 404 for an unknown alias or another workspace\'s', async () => {
      const res = await t.http.get('/api/v1/commands/acme/alias/roles-of').set(bearer(tokens.member));
      expect(res.status).to.equal(200);
      expect(res.body.data).to.include({ alias: 'roles-of', scriptContent: ROLES_OF, description: 'Roles of one agent' });
      expect(res.body.data.owner.username).to.equal('acme-owner');
      expect((await t.http.get('/api/v1/commands/acme/alias/nope').set(bearer(tokens.member))).status).to.equal(404);
      expect((await t.http.get('/api/v1/commands/other/alias/roles-of').set(bearer(tokens.member))).status).to.equal(404);
    });
  });

  describe('declaring parameters', () => {
    const base = { scriptType: 'CONSTRUCT', scriptContent: ROLES_OF };
    it('refuses a name that is not a variable of the script, twice, with "?", a bad kind or a datatype on an IRI (400, nothing stored)', async () => {
      const before = await dump();
      const cases: Array<[unknown[], RegExp]> = [
        [[{ name: 'agnet', kind: 'iri', required: true }], /"agnet" is not a variable of the script \(its variables: \?agent, \?role\)/],
        [[{ name: 'agent', kind: 'iri', required: true }, { name: 'agent', kind: 'literal', required: false }], /declared twice/],
        [[{ name: '?agent', kind: 'iri', required: true }], /without "\?"/],
        [[{ name: 'agent', kind: 'uri', required: true }], /kind must be "iri" or "literal"/],
        [[{ name: 'agent', kind: 'iri', datatype: 'http://www.w3.org/2001/XMLSchema#string', required: true }], /datatype is only for literal/],
        [[{ name: 'role', kind: 'literal', datatype: 'not an iri', required: true }], /datatype must be an absolute IRI/],
        [[{ name: 'agent', kind: 'iri', required: 'yes' }], /required must be true or false/],
        [[{ name: 'agent', kind: 'iri', required: true, extra: 1 }], /Invalid request body/],
        [[{ name: 'a b', kind: 'iri' }], /not a SPARQL variable name/],
      ];
      for (const [parameters, message] of cases) {
        const res = await create(tokens.member, { alias: 'bad-params', ...base, parameters });
        expect(res.status, JSON.stringify(parameters)).to.equal(400);
        expect(res.body.error.message, JSON.stringify(parameters)).to.match(message);
      }
      expect(await dump()).to.deep.equal(before);
    });

    it('checks kept parameters against a changed script, and replaces them on update', async () => {
      const made = await create(tokens.member, {
        alias: 'roles-tmp', ...base, parameters: [{ name: 'agent', kind: 'iri', required: true }],
      });
      expect(made.status).to.equal(200);
      const id = made.body.data.id;
      const bad = await t.http.put(`/api/v1/commands/acme/${id}`).set(bearer(tokens.member))
        .send({ scriptContent: `PREFIX iam: <${IAM}> CONSTRUCT { ?x iam:hasRole ?r } WHERE { ?x iam:hasRole ?r }` });
      expect(bad.status).to.equal(400);
      expect(bad.body.error.message).to.match(/"agent" is not a variable of the script/);
      const replaced = await t.http.put(`/api/v1/commands/acme/${id}`).set(bearer(tokens.member))
        .send({ parameters: [{ name: 'role', kind: 'iri', required: false }, { name: 'agent', kind: 'iri', required: false, description: 'who' }] });
      expect(replaced.status).to.equal(200);
      expect(replaced.body.data.parameters).to.deep.equal([
        { name: 'role', kind: 'iri', required: false }, { name: 'agent', kind: 'iri', required: false, description: 'who' },
      ]);
      const read = await t.http.get(`/api/v1/commands/acme/${id}`).set(bearer(tokens.member));
      expect(read.body.data.parameters).to.deep.equal(replaced.body.data.parameters);
      const cleared = await t.http.put(`/api/v1/commands/acme/${id}`).set(bearer(tokens.member)).send({ parameters: [] });
      expect(cleared.body.data.parameters).to.deep.equal([]);
      // Deleting the command leaves nothing of it behind, parameters included.
      await t.http.put(`/api/v1/commands/acme/${id}`).set(bearer(tokens.member)).send({ parameters: [{ name: 'agent', kind: 'iri', required: true }] });
      expect((await t.http.delete(`/api/v1/commands/acme/${id}`).set(bearer(tokens.member))).status).to.equal(200);
      expect((await dump()).filter((q) => q.includes(id))).to.deep.equal([]);
    });
  });

  describe('executing with arguments', () => {
    it('binds an IRI argument: only that agent\'s roles', async () => {
      const res = await run('roles-of', { agent: `${S}#TriageBot` });
      expect(res.status, res.text).to.equal(200);
      expect(triples(res.text)).to.deep.equal([`${S}#TriageBot ${IAM}hasRole ${S}#Triage`]);
      const help = await run('roles-of', { agent: `${S}#HelpBot` });
      expect(triples(help.text)).to.have.length(2);
      const nobody = await run('roles-of', { agent: 'urn:nobody' });
      expect(nobody.status).to.equal(200);
      expect(triples(nobody.text)).to.deep.equal([]);
    });

    it('binds a literal argument; an optional one left out leaves the variable free', async () => {
      const one = await run('by-label', { label: 'Triage' });
      expect(triples(one.text)).to.deep.equal([`${S}#Triage ${RDFS}label Triage`]);
      const all = await run('by-label', {});
      expect(triples(all.text).length).to.equal(6);
      const noBody = await run('by-label');
      expect(triples(noBody.text).length).to.equal(6);
      const envelope = await run('by-label', { label: 'Help bot' }, 'application/json');
      expect(envelope.body.data.tripleCount).to.equal(1);
    });

    it('binds typed literals: numbers, and strings of a declared datatype', async () => {
      const res = await run('count-of', { n: 42 });
      expect(res.status, res.text).to.equal(200);
      expect(res.text).to.contain('"42"^^<http://www.w3.org/2001/XMLSchema#integer>');
      const text = await run('count-of', { n: '7' });
      expect(text.text).to.contain('"7"^^<http://www.w3.org/2001/XMLSchema#integer>');
    });

    it('answers 400 for a missing required argument, a value of the wrong kind, or an undeclared argument', async () => {
      const cases: Array<[string, unknown, RegExp]> = [
        ['roles-of', {}, /arguments\.agent is required/],
        ['roles-of', { agent: 42 }, /arguments\.agent must be an IRI given as a string, not a number/],
        ['roles-of', { agent: 'not an iri' }, /arguments\.agent must be an absolute IRI/],
        ['roles-of', { agent: `${S}#TriageBot`, other: 1 }, /has no parameter "other"/],
        ['echo', { text: { '@id': 'urn:x' } }, /arguments\.text must be a literal value .* not an object/],
        ['echo', { text: ['a'] }, /not an array/],
        ['count-of', { n: 'forty-two' }, /"forty-two" is not a valid <http:\/\/www.w3.org\/2001\/XMLSchema#integer> value/],
        ['count-of', { n: 1.5 }, /is not a valid/],
      ];
      for (const [alias, args, message] of cases) {
        const res = await run(alias, args);
        expect(res.status, JSON.stringify(args)).to.equal(400);
        expect(res.body.error.message, JSON.stringify(args)).to.match(message);
      }
      const notObject = await t.http.post('/api/v1/commands/acme/alias/echo/execute').set(bearer(tokens.member)).send({ arguments: 'text' });
      expect(notObject.status).to.equal(400);
      expect(notObject.body.error.message).to.match(/arguments must be an object/);
    });

    it('keeps injection attempts data: literals come back verbatim, IRIs are refused, the store is unchanged', async () => {
      const before = await dump();
      for (const payload of PAYLOADS) {
        const echoed = await run('echo', { text: payload }, 'application/n-triples');
        expect(echoed.status, payload).to.equal(200);
        const quads = new n3.Parser({ format: 'N-Triples' }).parse(echoed.text);
        expect(quads, payload).to.have.length(1);
        expect(quads[0]!.object.value, payload).to.equal(payload);
        const asLabel = await run('by-label', { label: payload });
        expect(asLabel.status, payload).to.equal(200);
        expect(triples(asLabel.text), payload).to.deep.equal([]);
        const asIri = await run('roles-of', { agent: `urn:x:${payload}` });
        expect(asIri.status, payload).to.equal(400);
      }
      expect(await dump()).to.deep.equal(before);
    });
  });
});
