import { expect } from 'chai';
import { bearer, removeDir, startTestServer, tempDir, type TestServer } from '../helpers/server.js';
import { emptyEngine, engineEnv, requireRemote } from '../helpers/remote.js';
import { prefixes } from '../../src/rdf/vocab.js';
import { sparql } from '../../src/rdf/sparql.js';
import type { SparqlEndpointOptions } from '../../src/store/remote/sparql-client.js';

/** Graphs of their own on the engine, apart from the other remote suites'. */
const BASE = 'https://first-start.workspaces.local/';

/**
 * Three instances started at the same moment on one empty engine, with the
 * first start's steps on (the demo workspace, the hosted registry's
 * `examples` publisher and example packages): each runs them, one creates
 * each record, the others find it made and carry on; every instance starts.
 */
describe('three instances started at once on one empty engine (WSM_STORE=sparql)', function () {
  this.timeout(600_000);
  let settings: SparqlEndpointOptions;
  let dataDir: string;
  let instances: TestServer[] = [];

  before(async function () {
    settings = requireRemote(this);
    await emptyEngine(settings, BASE);
    dataDir = tempDir();
  });
  after(async () => {
    for (const t of instances) await t.close();
    if (dataDir) removeDir(dataDir);
  });

  it('all three start; the demo workspace, the examples publisher and each example version exist once', async () => {
    const env = { ...engineEnv(settings), WSM_BASE_IRI: BASE, WSM_DEMO: 'true', WSM_REGISTRY: 'self', WSM_LOG_LEVEL: process.env.WSM_TEST_LOG_LEVEL ?? 'error' };
    const started = await Promise.allSettled([0, 1, 2].map(() => startTestServer(env, dataDir)));
    instances = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    expect(started.map((s) => (s.status === 'rejected' ? String(s.reason) : 'started'))).to.deep.equal(['started', 'started', 'started']);
    for (const t of instances) {
      // Each found the engine empty: a first start, with a token for the demo administrator.
      expect(t.server.bootstrap.demoToken).to.be.a('string');
      expect(t.server.bootstrap.examples).to.deep.equal(['examples/incident-response', 'examples/project-tracking']);
      const res = await t.http.get('/api/v1/workspaces').set(bearer(t.server.bootstrap.demoToken!));
      expect(res.status).to.equal(200);
      expect((res.body.data as Array<{ slug: string }>).filter((w) => w.slug === 'demo')).to.have.length(1);
    }
    const store = instances[0]!.server.services.store;
    const count = async (query: ReturnType<typeof sparql>) => Number((await store.select(query))[0]?.n?.value ?? 0);
    expect(await count(sparql`${prefixes}SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?w a wsm:Workspace ; wsm:slug "demo" ; wsm:id ?id ; wsm:createdAt ?t } }`)).to.equal(1);
    expect(await count(sparql`${prefixes}SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?p a wsm:Publisher ; wsm:slug "examples" ; wsm:id ?id ; wsm:createdAt ?t } }`)).to.equal(1);
    expect(await count(sparql`${prefixes}SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?p a wsm:RegistryPackage ; wsm:createdAt ?t } }`)).to.equal(2);
    expect(await count(sparql`${prefixes}SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?v a wsm:PackageVersion ; wsm:publishedAt ?t ; wsm:sha256 ?sha } }`)).to.equal(3);
  });
});
