import { expect } from 'chai';
import { bearer, removeDir, seedWorkspace, startTestServer, type TestServer } from '../helpers/server.js';
import { onRemoteStore } from '../helpers/remote.js';

/** The service on the remote store: user queries answer from copies of the caller's view, confined as on the embedded store. */
describe('service on the remote store (WSM_STORE=sparql)', function () {
  this.timeout(120_000);
  let t: TestServer | undefined;

  onRemoteStore();
  after(async () => {
    if (t) { await t.close(); removeDir(t.dataDir); }
  });

  it('keeps workspaces on the engine; user queries see the workspace only, never another one, the records of others or the engine\'s own graphs', async () => {
    t = await startTestServer();
    const { tokens, workspace } = await seedWorkspace(t, 'acme');
    const other = await seedWorkspace(t, 'other');
    const listed = await t.http.get('/api/v1/workspaces').set(bearer(tokens.owner));
    expect(listed.status).to.equal(200);
    expect(JSON.stringify(listed.body)).to.contain('acme');

    const ask = async (query: string) => {
      const res = await t!.http.get('/api/v1/sparql/acme').query({ query }).set(bearer(tokens.root)).set('Accept', 'application/sparql-results+json');
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      return res.body as { boolean?: boolean; results?: { bindings: Array<Record<string, { value: string }>> } };
    };
    const graphs = (await ask('SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }')).results!.bindings.map((b) => b.g!.value);
    expect(graphs.length).to.be.greaterThan(0);
    for (const g of graphs) expect(g === t.server.services.graphs.system || g.startsWith(t.server.services.graphs.workspacePrefix(workspace.id)), g).to.equal(true);
    // The engine holds graphs of its own (Virtuoso: its schema graphs); named, they are empty to the query.
    const engineGraph = 'http://www.openlinksw.com/schemas/virtrdf#';
    expect((await ask(`ASK { GRAPH <${engineGraph}> { ?s ?p ?o } }`)).boolean).to.equal(false);
    expect((await ask(`SELECT * FROM <${engineGraph}> WHERE { ?s ?p ?o } LIMIT 1`)).results!.bindings).to.deep.equal([]);
    // Another workspace's graphs, named in GRAPH and in FROM, and its record in the system graph.
    const otherIam = t.server.services.graphs.iam(other.workspace.id);
    expect((await ask(`ASK { GRAPH <${otherIam}> { ?s ?p ?o } }`)).boolean).to.equal(false);
    expect((await ask(`SELECT * FROM <${otherIam}> WHERE { ?s ?p ?o } LIMIT 1`)).results!.bindings).to.deep.equal([]);
    expect((await ask(`ASK { ?w <https://w3id.org/wsm/ns#slug> "other" }`)).boolean).to.equal(false);
    expect((await ask(`ASK { ?w <https://w3id.org/wsm/ns#slug> "acme" }`)).boolean).to.equal(true);
  });
});
