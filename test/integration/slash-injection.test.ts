import { expect } from 'chai';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { storeDump } from '../helpers/remote.js';
import { installMatrices, supportMatrixTurtle } from '../helpers/installs.js';
import { sparql, iri } from '../../src/rdf/sparql.js';

/** Text that would change the store if it were ever pasted into SPARQL. */
const PAYLOADS = [
  'x> } ; DROP ALL ; #',
  '"} ; DROP ALL ; INSERT DATA { <urn:evil> <urn:evil> <urn:evil> } #',
  "'''} ; CLEAR ALL ; #",
  '""" ; DELETE WHERE { ?s ?p ?o } ; #',
  '\\"> } } ; DROP GRAPH <urn:x> ; #',
  '\u0000\n\r\t end',
  'ünïcødé 🚀 <script>alert(1)</script>',
];

const S = 'https://example.org/matrices/support';

describe('slash commands and SPARQL endpoint: injection', function () {
  this.timeout(180_000); // on the remote store too (WSM_TEST_STORE=sparql), where each write is an engine round trip
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  let ws: { id: string; slug: string };

  /** Every quad of the store, sorted: the whole state. */
  const dump = () => storeDump(t.server.services.store);
  const graphCount = async () => (await t.server.services.store.graphNames()).length;

  before(async () => {
    t = await startTestServer();
    ({ tokens, workspace: ws } = await seedWorkspace(t, 'acme'));
    await seedWorkspace(t, 'other');
    await installMatrices(t, tokens.owner, 'acme', 'support', [{ uri: S, turtle: supportMatrixTurtle(S) }]);
    // Every caller has called once, so no later request writes its user record.
    for (const token of Object.values(tokens)) await t.http.get('/api/v1/workspaces').set(bearer(token));
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('stores every text field verbatim, changes nothing else, and refuses payloads where a field has rules', async () => {
    const before = await dump();
    const graphsBefore = await graphCount();
    const created: string[] = [];
    for (const [i, payload] of PAYLOADS.entries()) {
      // Free-text fields: stored and returned verbatim.
      const literal = JSON.stringify(payload).slice(1, -1).replace(/\\u0000/g, '\\u0000');
      const script = `CONSTRUCT { <urn:x> <urn:says> "${literal}" } WHERE { } # ${payload.replace(/[\n\r]/g, ' ')}`;
      const res = await t.http.post('/api/v1/commands/acme').set(bearer(tokens.member))
        .send({ alias: `inj-${i}`, description: payload, interpretation: payload, scriptType: 'CONSTRUCT', scriptContent: script });
      expect(res.status, payload).to.equal(200);
      expect(res.body.data).to.include({ description: payload, interpretation: payload, scriptContent: script });
      created.push(res.body.data.id);
      const read = await t.http.get(`/api/v1/commands/acme/${res.body.data.id}`).set(bearer(tokens.owner));
      expect(read.body.data).to.include({ description: payload, interpretation: payload, scriptContent: script });
      // Its result carries the literal verbatim.
      const out = await t.http.post(`/api/v1/commands/acme/${res.body.data.id}/execute`).set(bearer(tokens.member));
      expect(out.status, payload).to.equal(200);
      expect(out.body.data.result['urn:says'] ?? out.body.data.result['@graph']?.[0]?.['urn:says']).to.equal(payload);
      const updated = await t.http.put(`/api/v1/commands/acme/${res.body.data.id}`).set(bearer(tokens.member))
        .send({ description: `${payload}!`, interpretation: `!${payload}` });
      expect(updated.body.data).to.include({ description: `${payload}!`, interpretation: `!${payload}` });

      // Fields with rules: a clear 4xx.
      const enc = encodeURIComponent(payload);
      const refusals: Array<[string, Promise<{ status: number }>, number]> = [
        ['alias', t.http.post('/api/v1/commands/acme').set(bearer(tokens.member)).send({ alias: payload, scriptType: 'CONSTRUCT', scriptContent: script }), 400],
        ['scriptType', t.http.post('/api/v1/commands/acme').set(bearer(tokens.member)).send({ alias: `z-${i}`, scriptType: payload, scriptContent: script }), 400],
        ['scriptContent', t.http.post('/api/v1/commands/acme').set(bearer(tokens.member)).send({ alias: `z-${i}`, scriptType: 'CONSTRUCT', scriptContent: payload }), 400],
        ['update alias', t.http.put(`/api/v1/commands/acme/${res.body.data.id}`).set(bearer(tokens.member)).send({ alias: payload }), 400],
        ['update scriptContent', t.http.put(`/api/v1/commands/acme/${res.body.data.id}`).set(bearer(tokens.member)).send({ scriptContent: payload }), 400],
        ['workspace segment', t.http.get(`/api/v1/commands/${enc}`).set(bearer(tokens.member)), 404],
        ['workspace segment (create)', t.http.post(`/api/v1/commands/${enc}`).set(bearer(tokens.member)).send({ alias: 'x', scriptType: 'CONSTRUCT', scriptContent: script }), 404],
        ['id segment', t.http.get(`/api/v1/commands/acme/${enc}`).set(bearer(tokens.member)), 404],
        ['id segment (update)', t.http.put(`/api/v1/commands/acme/${enc}`).set(bearer(tokens.member)).send({ description: payload }), 404],
        ['id segment (delete)', t.http.delete(`/api/v1/commands/acme/${enc}`).set(bearer(tokens.member)), 404],
        ['id segment (execute)', t.http.post(`/api/v1/commands/acme/${enc}/execute`).set(bearer(tokens.member)), 404],
        ['alias segment (execute)', t.http.post(`/api/v1/commands/acme/alias/${enc}/execute`).set(bearer(tokens.member)), 404],
        ['sparql query', t.http.get('/api/v1/sparql/acme').query({ query: payload }).set(bearer(tokens.owner)), 400],
        ['sparql form query', t.http.post('/api/v1/sparql/acme').type('form').send({ query: payload }).set(bearer(tokens.owner)), 400],
        ['sparql body', t.http.post('/api/v1/sparql/acme').set('Content-Type', 'application/sparql-query').send(payload).set(bearer(tokens.owner)), 400],
        ['sparql default-graph-uri', t.http.get('/api/v1/sparql/acme').query({ query: 'ASK {}', 'default-graph-uri': payload }).set(bearer(tokens.owner)), 400],
        ['sparql workspace segment', t.http.get(`/api/v1/sparql/${enc}`).query({ query: 'ASK {}' }).set(bearer(tokens.owner)), 404],
      ];
      for (const [field, request, status] of refusals) {
        const r = await request;
        expect(r.status, `${field}: ${JSON.stringify(payload)}`).to.equal(status);
      }
      // Accept is matched, never echoed into anything but the 406 message.
      const accept = await t.http.post(`/api/v1/commands/acme/${res.body.data.id}/execute`).set(bearer(tokens.member)).set('Accept', payload.replace(/[^\x20-\x7e]/g, ''));
      expect([200, 406]).to.include(accept.status);
    }
    // Verbatim in the store too, as literals of the command records.
    const stored = (await t.server.services.store.select(sparql`SELECT ?d WHERE { GRAPH ${iri(t.server.services.graphs.slashCommands(ws.id))} { ?c <https://w3id.org/wsm/ns#description> ?d } }`))
      .map((b) => b.d!.value);
    expect(stored.sort()).to.deep.equal(PAYLOADS.map((p) => `${p}!`).sort());

    // Remove what was created: the store is exactly as before.
    for (const id of created) expect((await t.http.delete(`/api/v1/commands/acme/${id}`).set(bearer(tokens.member))).status).to.equal(200);
    expect(await graphCount()).to.equal(graphsBefore);
    expect(await dump()).to.deep.equal(before);
  });
});
