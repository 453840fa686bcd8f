import { expect } from 'chai';
import oxigraph from 'oxigraph';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { installMatrices } from '../helpers/installs.js';

/**
 * docs/slash-commands.md, "Limits": the result limit counts distinct triples (rows for
 * SELECT). An answer is complete with `truncated: false`, or holds exactly
 * the limit with `truncated: true`. Each case is checked against the full
 * answer, computed without any limit by Oxigraph over the same Turtle (or,
 * for SELECT, by a COUNT through the endpoint itself).
 */

const M = 'https://example.org/matrices/exact';
const IAM = 'https://poliglot.io/os/spec/iam#';
const ROLES = 7;

function matrix(): string {
  const lines = [`<${M}> a <https://poliglot.io/os/spec/matrix#Matrix> ; <http://www.w3.org/2000/01/rdf-schema#label> "Exact" .`];
  for (let i = 0; i < ROLES; i++) {
    lines.push(`<${M}#role${i}> a <${IAM}Role> ; <http://www.w3.org/2000/01/rdf-schema#label> "Role ${i}" .`);
  }
  return lines.join('\n');
}

const ROLE = (v: string) => `?${v} a <${IAM}Role> .`;

/** Scripts whose solutions repeat triples a lot: the limit must count triples, not solutions. */
const SCRIPTS: Record<string, string> = {
  // The case: 16 solutions per subject, one triple each.
  'same-type': 'CONSTRUCT { ?s a <http://x/T> } WHERE { ?s ?p ?o }',
  // A 6-way join: 7^6 = 117,649 solutions (more than the default limit + 1), 49 distinct triples.
  'six-way': `CONSTRUCT { ?a <urn:with> ?f } WHERE { ${['a', 'b', 'c', 'd', 'e', 'f'].map(ROLE).join(' ')} }`,
  // A join whose template has two triples per solution, most of them repeated.
  'pairs': `CONSTRUCT { ?a <urn:with> ?b . ?b <urn:label> ?l } WHERE { ${ROLE('a')} ${ROLE('b')} ?b <http://www.w3.org/2000/01/rdf-schema#label> ?l . ${ROLE('c')} }`,
  // DESCRIBE: each role described once per solution (7 solutions per role).
  'describe': `DESCRIBE ?r WHERE { ${ROLE('r')} ${ROLE('x')} }`,
  // Distinct triples beyond every small limit.
  'everything': 'CONSTRUCT WHERE { ?s ?p ?o }',
  // The script's own LIMIT (on solutions) is kept.
  'own-limit': 'CONSTRUCT { ?s a <http://x/T> } WHERE { ?s ?p ?o } LIMIT 20',
};

/** Scripts of the SELECT endpoint (rows). */
const SELECTS = [
  'SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }',
  'SELECT DISTINCT ?s WHERE { GRAPH ?g { ?s ?p ?o } }',
  `SELECT ?a ?b WHERE { GRAPH ?g { ${ROLE('a')} ${ROLE('b')} } }`,
];

/** The full answer of a script, without any limit, from Oxigraph over the same data. */
function fullAnswer(script: string): Set<string> {
  const store = new oxigraph.Store();
  store.load(matrix(), { format: 'text/turtle', to_graph_name: oxigraph.namedNode(`urn:graph:${M}`) });
  const text = store.query(script, { results_format: 'application/n-triples', use_default_graph_as_union: true }) as string;
  return new Set(text.split('\n').filter((l) => l !== ''));
}

for (const limit of [1, 10, undefined]) {
  describe(`query sandbox: exact result limit (${limit ?? 'default'})`, function () {
    this.timeout(120_000);
    let t: TestServer;
    let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
    const max = limit ?? 100_000;

    before(async () => {
      t = await startTestServer(limit === undefined ? {} : { WSM_QUERY_MAX_TRIPLES: String(limit) });
      expect(t.server.services.sandbox.maxResults).to.equal(max);
      ({ tokens } = await seedWorkspace(t, 'acme'));
      await installMatrices(t, tokens.owner, 'acme', 'exact', [{ uri: M, turtle: matrix() }]);
      for (const [alias, scriptContent] of Object.entries(SCRIPTS)) {
        const res = await t.http.post('/api/v1/commands/acme').set(bearer(tokens.owner))
          .send({ alias, scriptType: scriptContent.startsWith('DESCRIBE') ? 'DESCRIBE' : 'CONSTRUCT', scriptContent });
        if (res.status !== 200) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
      }
    });
    after(async () => { await t.close(); removeDir(t.dataDir); });

    for (const [alias, script] of Object.entries(SCRIPTS)) {
      it(`${alias}: holds min(full, limit) distinct triples, truncated exactly when the full answer is larger`, async () => {
        const full = fullAnswer(script);
        expect(full.size, 'the case repeats triples').to.be.greaterThan(0);
        const expected = { tripleCount: Math.min(full.size, max), truncated: full.size > max };
        const envelope = await t.http.post(`/api/v1/commands/acme/alias/${alias}/execute`).set(bearer(tokens.member));
        expect(envelope.status, JSON.stringify(envelope.body).slice(0, 300)).to.equal(200);
        expect(envelope.body.data).to.include(expected);
        const nt = await t.http.post(`/api/v1/commands/acme/alias/${alias}/execute`).set(bearer(tokens.member)).set('Accept', 'application/n-triples');
        const lines = nt.text.split('\n').filter((l) => l !== '');
        expect(new Set(lines).size, 'no repeated triple').to.equal(lines.length);
        expect(lines.length).to.equal(expected.tripleCount);
        expect(nt.headers['x-triple-count']).to.equal(String(expected.tripleCount));
        expect(nt.headers['x-result-truncated']).to.equal(String(expected.truncated));
        for (const line of lines) expect(full.has(line), `${line} is in the full answer`).to.equal(true);
      });
    }

    it('the same for CONSTRUCT and DESCRIBE on the administrators\' endpoint', async () => {
      for (const script of [SCRIPTS['six-way']!, SCRIPTS.describe!, SCRIPTS['same-type']!]) {
        const full = fullAnswer(script);
        // The endpoint sees every graph of the workspace: narrow it to the matrix graph, like the view.
        const graph = (await t.http.get('/api/v1/sparql/acme').set(bearer(tokens.owner)).set('Accept', 'application/sparql-results+json')
          .query({ query: `SELECT DISTINCT ?g WHERE { GRAPH ?g { <${M}> a ?t } }` })).body.results.bindings
          .map((b: { g: { value: string } }) => b.g.value).find((g: string) => !g.endsWith('/derived'));
        const res = await t.http.get('/api/v1/sparql/acme').set(bearer(tokens.owner)).set('Accept', 'application/n-triples')
          .query({ query: script, 'default-graph-uri': graph });
        expect(res.status).to.equal(200);
        const lines = res.text.split('\n').filter((l) => l !== '');
        expect(lines.length, script).to.equal(Math.min(full.size, max));
        expect(res.headers['x-result-count']).to.equal(String(Math.min(full.size, max)));
        expect(res.headers['x-result-truncated']).to.equal(String(full.size > max));
      }
    });

    it('counts rows for SELECT on the administrators\' endpoint', async () => {
      for (const query of SELECTS) {
        const counted = await t.http.get('/api/v1/sparql/acme').set(bearer(tokens.owner)).set('Accept', 'application/sparql-results+json')
          .query({ query: `SELECT (COUNT(*) AS ?n) WHERE { { ${query} } }` });
        const full = Number(counted.body.results.bindings[0].n.value);
        expect(full).to.be.greaterThan(1);
        const res = await t.http.get('/api/v1/sparql/acme').set(bearer(tokens.owner)).set('Accept', 'application/sparql-results+json').query({ query });
        expect(res.status).to.equal(200);
        expect(res.body.results.bindings, query).to.have.length(Math.min(full, max));
        expect(res.headers['x-result-count']).to.equal(String(Math.min(full, max)));
        expect(res.headers['x-result-truncated']).to.equal(String(full > max));
      }
    });
  });
}
