import { expect } from 'chai';
import { bearer, withSeededServer, type TestServer, type Tokens } from '../helpers/server.js';
import { installMatrices } from '../helpers/installs.js';

const M = 'https://example.org/matrices/listed';
const ITEMS = 4000;

/**
 * A query worker's copy of a graph holds its blank nodes as the store does,
 * also when the graph's text is larger than the slices the worker hands to
 * the engine (256 KB): here an RDF list of 4,000 items, about 0.7 MB of
 * N-Triples, all of it blank nodes linked one to the next. On the remote
 * store every graph reaches the worker as text; on the embedded one from
 * the journal.
 */
describe('query sandbox: a blank-node structure larger than one slice of a worker\'s load', function () {
  this.timeout(120_000);
  let t: TestServer;
  let tokens: Tokens;
  withSeededServer('acme', (s) => ({ t, tokens } = s));

  it('answers a path along the whole list, from the slash command view and the administrators\' endpoint', async () => {
    const items = Array.from({ length: ITEMS }, (_, i) => `"item ${i}"`).join(' ');
    await installMatrices(t, tokens.owner, 'acme', 'listed', [{
      uri: M,
      turtle: `<${M}> a <https://poliglot.io/os/spec/matrix#Matrix> ; <http://www.w3.org/2000/01/rdf-schema#label> "Listed" .
<${M}#list> <${M}#items> ( ${items} ) .`,
    }]);
    const query = `SELECT (COUNT(?x) AS ?n) (MAX(?x) AS ?last) WHERE { GRAPH ?g { <${M}#list> <${M}#items>/<http://www.w3.org/1999/02/22-rdf-syntax-ns#rest>*/<http://www.w3.org/1999/02/22-rdf-syntax-ns#first> ?x } }`;
    const res = await t.http.get('/api/v1/sparql/acme').set(bearer(tokens.owner)).query({ query }).set('Accept', 'application/sparql-results+json');
    expect(res.status, res.text.slice(0, 300)).to.equal(200);
    const [row] = JSON.parse(res.text).results.bindings as Array<{ n: { value: string }; last: { value: string } }>;
    expect(Number(row!.n.value)).to.equal(ITEMS);
    expect(row!.last.value).to.equal('item 999');

    // A slash command sees the matrix graph as its default graph.
    const created = await t.http.post('/api/v1/commands/acme').set(bearer(tokens.owner)).send({
      alias: 'list-items', scriptType: 'CONSTRUCT',
      scriptContent: `CONSTRUCT { <${M}#list> <${M}#has> ?x } WHERE { <${M}#list> <${M}#items>/<http://www.w3.org/1999/02/22-rdf-syntax-ns#rest>*/<http://www.w3.org/1999/02/22-rdf-syntax-ns#first> ?x }`,
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(200);
    const run = await t.http.post('/api/v1/commands/acme/alias/list-items/execute').set(bearer(tokens.member));
    expect(run.status, run.text.slice(0, 300)).to.equal(200);
    expect(run.body.data).to.include({ tripleCount: ITEMS, truncated: false });
  });
});
