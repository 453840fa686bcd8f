import { expect } from 'chai';
import { bearer, removeDir, seedWorkspace, startTestServer, type TestServer } from '../helpers/server.js';
import { requireRemote } from '../helpers/remote.js';

/** The service on the remote store: what is not supported there yet says so rather than answering from a stale copy. */
describe('service on the remote store (WSM_STORE=sparql)', function () {
  this.timeout(120_000);
  let t: TestServer | undefined;
  let previous: string | undefined;

  before(function () {
    requireRemote(this);
    previous = process.env.WSM_TEST_STORE;
    process.env.WSM_TEST_STORE = 'sparql';
  });
  after(async () => {
    if (previous === undefined) delete process.env.WSM_TEST_STORE; else process.env.WSM_TEST_STORE = previous;
    if (t) { await t.close(); removeDir(t.dataDir); }
  });

  it('keeps workspaces on the engine and answers user queries with 503 naming the mode', async () => {
    t = await startTestServer();
    const { tokens } = await seedWorkspace(t, 'acme');
    const listed = await t.http.get('/api/v1/workspaces').set(bearer(tokens.owner));
    expect(listed.status).to.equal(200);
    expect(JSON.stringify(listed.body)).to.contain('acme');

    const query = await t.http.get('/api/v1/sparql/acme').query({ query: 'SELECT * WHERE { ?s ?p ?o }' }).set(bearer(tokens.root));
    expect(query.status).to.equal(503);
    expect(query.body.error.code).to.equal('SERVICE_UNAVAILABLE');
    expect(query.body.error.message).to.contain('WSM_STORE=sparql');
  });
});
