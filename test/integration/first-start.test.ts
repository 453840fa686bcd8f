import { expect } from 'chai';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { createServices, type Services } from '../../src/app.js';
import { createVerifier } from '../../src/auth/tokens.js';
import { openStore } from '../../src/store/open.js';
import { bootstrap, type BootstrapResult } from '../../src/bootstrap.js';
import { exampleNames } from '../../src/packages/examples.js';
import { sparql } from '../../src/rdf/sparql.js';
import { prefixes } from '../../src/rdf/vocab.js';
import type { QuadStore } from '../../src/store/store.js';
import { removeDir, tempDir } from '../helpers/server.js';

/**
 * The first start's steps (the demo workspace, the `examples` publisher, the
 * example packages published into it) are idempotent across instances:
 * three instances' services on one store (each with its own registry
 * writes queue, as three processes on one remote engine have) run their
 * first start at the same moment on the empty store; all three carry on,
 * and each record exists once. test/remote/instances.test.ts starts three
 * real instances together on the remote engine.
 */
describe('first start, three instances at once on one store', function () {
  this.timeout(300_000);
  let dataDir: string;
  let store: QuadStore;
  const instances: Services[] = [];

  before(async () => {
    dataDir = tempDir();
    const config = loadConfig({ WSM_DATA_DIR: dataDir, WSM_REGISTRY: 'self', WSM_DEMO: 'true', WSM_LOG_LEVEL: 'silent' });
    const logger = createLogger('silent');
    store = await openStore(config, logger);
    const verify = await createVerifier({ dataDir: config.dataDir, adminClaim: config.WSM_OIDC_ADMIN_CLAIM, adminValue: config.WSM_OIDC_ADMIN_VALUE });
    for (let i = 0; i < 3; i++) instances.push(createServices({ config, logger, store, verify }));
  });
  after(async () => {
    for (const s of instances) for (const close of s.closers) await close();
    await store?.close();
    removeDir(dataDir);
  });

  const count = async (query: ReturnType<typeof sparql>) => Number((await store.select(query))[0]?.n?.value ?? 0);

  it('all three finish, each with a demo token; the demo workspace, the publisher and every example version exist once', async () => {
    const results: BootstrapResult[] = await Promise.all(instances.map((s) => bootstrap(s)));
    // One directory per example version; packages by name (project-tracking has two versions).
    const versions = exampleNames().length;
    const packages = ['examples/incident-response', 'examples/project-tracking'];
    for (const r of results) {
      expect(r.demoToken).to.be.a('string');
      expect(r.examples).to.deep.equal(packages);
    }
    expect(await count(sparql`${prefixes}SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?w a wsm:Workspace ; wsm:slug "demo" ; wsm:id ?id ; wsm:createdAt ?t } }`)).to.equal(1);
    expect(await count(sparql`${prefixes}SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?p a wsm:Publisher ; wsm:slug "examples" ; wsm:id ?id ; wsm:createdAt ?t } }`)).to.equal(1);
    // One record per package and per version, each with one creation time.
    expect(await count(sparql`${prefixes}SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?p a wsm:RegistryPackage ; wsm:createdAt ?t } }`)).to.equal(packages.length);
    expect(await count(sparql`${prefixes}SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?v a wsm:PackageVersion ; wsm:publishedAt ?t ; wsm:sha256 ?sha } }`)).to.equal(versions);
    // The demo administrator can use the demo workspace.
    const demo = await instances[1]!.workspaces.find('demo');
    expect(demo?.slug).to.equal('demo');
  });

  it('a later start on the same store finds everything in place: no token, nothing created again', async () => {
    const versions = await count(sparql`${prefixes}SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?v a wsm:PackageVersion ; wsm:publishedAt ?t } }`);
    const again = await bootstrap(instances[2]!);
    expect(again.demoToken).to.equal(undefined);
    expect(await count(sparql`${prefixes}SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?v a wsm:PackageVersion ; wsm:publishedAt ?t } }`)).to.equal(versions);
  });
});
