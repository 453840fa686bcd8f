import { expect } from 'chai';
import { Parser, type Quad } from 'n3';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { tinyPackage } from '../helpers/packages.js';
import { uploadAndWait, upload, waitForCommand, eventsOf, bigMatrixTurtle } from '../helpers/lifecycle.js';
import type { LifecycleCommand } from '../../src/packages/commands.js';
import type { Workspace } from '../../src/workspaces/service.js';
import { sparql, iri, raw } from '../../src/rdf/sparql.js';

const WSM = 'https://w3id.org/wsm/ns#';
const MATRIX = 'https://example.org/packages/alpha/main';
/** On the remote store (WSM_TEST_STORE=sparql) the 40,000-role install takes longer: each write is an engine round trip. */
const REMOTE = process.env.WSM_TEST_STORE === 'sparql';
const turtle = (text: string): Quad[] => new Parser().parse(`@prefix iam: <https://poliglot.io/os/spec/iam#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
${text}`);

/**
 * The extensions area's side of the hook, reduced to what these tests need:
 * extension Turtle per target matrix, and a marker written with each deployment.
 */
class Extensions {
  readonly content = new Map<string, Quad[]>();
  readonly undeployed: string[][] = [];
  constructor(private readonly t: TestServer, private readonly workspaceId: string) {}
  marker(commandId: string): string { return `urn:test:deployed:${commandId}`; }
  install(): void {
    const { graphs } = this.t.server.services;
    this.t.server.services.packages.setExtensionHook({
      deploy: ({ matrixUri, commandId }) => ({
        quads: this.content.get(matrixUri) ?? [],
        ops: [{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH ${iri(graphs.extensions(this.workspaceId))} { ${iri(this.marker(commandId))} <${raw(WSM)}targetMatrix> ${iri(matrixUri)} } }`, graphs: [graphs.extensions(this.workspaceId)] }],
      }),
      undeploy: ({ matrixUris }) => { this.undeployed.push(matrixUris); return []; },
    });
  }
}

describe('packages: redeploy of a matrix for extensions (requestRedeploy and the hook)', function () {
  this.timeout(REMOTE ? 300_000 : 60_000);
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  let workspace: Workspace;
  let ext: Extensions;
  let matrixId: string;
  const derived = async () => await t.server.services.store.dumpGraph(t.server.services.graphs.derived(workspace.id, matrixId));
  const redeploy = (reason: string) => new Promise<{ accepted: LifecycleCommand; outcome: Promise<LifecycleCommand> }>((resolve, reject) => {
    let settle!: (c: LifecycleCommand) => void;
    const outcome = new Promise<LifecycleCommand>((r) => { settle = r; });
    t.server.services.packages.requestRedeploy(workspace, MATRIX, reason, settle).then((accepted) => resolve({ accepted, outcome }), reject);
  });

  before(async () => {
    t = await startTestServer();
    ({ tokens } = await seedWorkspace(t, 'acme'));
    workspace = (await t.server.services.workspaces.find('acme'))!;
    ext = new Extensions(t, workspace.id);
    ext.install();
    const done = await uploadAndWait(t, tokens.owner, 'acme', await tinyPackage({ name: 'alpha' }));
    expect(done.status, done.errorMessage ?? '').to.equal('completed');
    matrixId = t.server.services.packages.matrixId(workspace.id, MATRIX);
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('refuses a matrix that is not installed (404)', async () => {
    let caught: unknown;
    try { await t.server.services.packages.requestRedeploy(workspace, 'https://example.org/nothing', 'test'); } catch (err) { caught = err; }
    expect((caught as { code: string }).code).to.equal('NOT_FOUND');
  });

  it('derives roles again from the matrix plus extension quads, writes the hook ops with it, and reports the outcome', async () => {
    const matrixBefore = await t.server.services.store.dumpGraph(t.server.services.graphs.matrix(workspace.id, matrixId));
    ext.content.set(MATRIX, turtle(`<${MATRIX}#extra> a iam:Role ; rdfs:label "Extra" ; rdfs:comment "Added by an extension." .`));
    const { accepted, outcome } = await redeploy('extension "extra" created');
    expect(accepted).to.include({ commandType: 'REDEPLOY', packageName: 'alpha', version: '1.0.0', status: 'pending' });
    const done = await outcome;
    expect(done.status, done.errorMessage ?? '').to.equal('completed');
    expect(await derived()).to.contain(`<${MATRIX}#extra>`);
    expect(await t.server.services.store.dumpGraph(t.server.services.graphs.matrix(workspace.id, matrixId))).to.equal(matrixBefore);
    expect(await t.server.services.store.ask(sparql`ASK { GRAPH ?g { ${iri(ext.marker(done.id))} ?p ?o } }`)).to.equal(true);
    const events = await eventsOf(t, tokens.member, 'acme', done.id);
    expect(events[1]!.message).to.match(/extension "extra" created/);
    expect(events.map((e) => e.message).join('\n')).to.match(/3 triples of active extensions/);
    const cmds = (await t.http.get('/api/v1/packages/acme/alpha/commands').set(bearer(tokens.member))).body.data;
    expect(cmds[0]).to.include({ id: done.id, commandType: 'REDEPLOY' });
  });

  it('a redeploy that fails validation leaves the derived graph as it was and writes no hook ops', async () => {
    const before = await derived();
    ext.content.set(MATRIX, turtle(`<${MATRIX}#nameless> a iam:Role .`));
    const { outcome } = await redeploy('extension "bad" updated');
    const done = await outcome;
    expect(done.status).to.equal('failed');
    expect(done.errorMessage).to.match(/violation/);
    expect(await derived()).to.equal(before);
    expect(await t.server.services.store.ask(sparql`ASK { GRAPH ?g { ${iri(ext.marker(done.id))} ?p ?o } }`)).to.equal(false);
    const report = await t.http.get(`/api/v1/packages/acme/commands/${done.id}/validation-report`).set(bearer(tokens.member));
    expect(report.body.data.violations[0].focusNode).to.equal(`${MATRIX}#nameless`);
  });

  it('removes assignments of a role an extension no longer adds', async () => {
    const { store, graphs } = t.server.services;
    const extraRole = (await store.select(sparql`SELECT ?r WHERE { GRAPH ${iri(graphs.derived(workspace.id, matrixId))} { ?r <${raw(WSM)}uri> <${raw(MATRIX)}#extra> } }`))[0]!.r!.value;
    await store.update(sparql`INSERT DATA { GRAPH ${iri(graphs.iam(workspace.id))} { <urn:test:assign> a <${raw(WSM)}RoleAssignment> ; <${raw(WSM)}role> ${iri(extraRole)} ; <${raw(WSM)}principal> <urn:test:p> } }`, [graphs.iam(workspace.id)]);
    ext.content.delete(MATRIX);
    const done = await (await redeploy('extension "extra" deleted')).outcome;
    expect(done.status).to.equal('completed');
    expect(await derived()).not.to.contain('#extra>');
    expect(await store.ask(sparql`ASK { GRAPH ?g { <urn:test:assign> ?p ?o } }`)).to.equal(false);
  });

  it('deploys extension quads with a later install, and queues a REDEPLOY behind an active command (P1/P6 answer 409 meanwhile)', async () => {
    ext.content.set(MATRIX, turtle(`<${MATRIX}#extra> a iam:Role ; rdfs:label "Extra" ; rdfs:comment "Again." .`));
    const heavy = await upload(t, tokens.owner, 'acme', await tinyPackage({ name: 'alpha', version: '1.1.0', matrices: [{ name: 'main', uri: MATRIX, turtle: bigMatrixTurtle(MATRIX, 40_000) }] }));
    expect(heavy.status).to.equal(202);
    const { accepted, outcome } = await redeploy('queued behind the update');
    expect(accepted.status).to.equal('pending');
    const del = await t.http.delete('/api/v1/packages/acme/alpha').set(bearer(tokens.owner));
    expect(del.status).to.equal(409);
    expect(del.body.existing.commandId).to.equal(heavy.body.data.id);
    const update = await waitForCommand(t, tokens.owner, 'acme', heavy.body.data.id, REMOTE ? 240_000 : 60_000);
    expect(update.status, update.errorMessage ?? '').to.equal('completed');
    expect(await derived()).to.contain(`<${MATRIX}#extra>`);
    const redone = await outcome;
    expect(redone.status).to.equal('completed');
    expect(redone.version).to.equal('1.0.0');
    expect(Date.parse(redone.updatedAt)).to.be.greaterThan(Date.parse(update.updatedAt));
  });

  it('tells the hook which matrices an uninstall removes', async () => {
    const res = await t.http.delete('/api/v1/packages/acme/alpha').set(bearer(tokens.owner));
    expect(res.status).to.equal(202);
    expect((await waitForCommand(t, tokens.owner, 'acme', res.body.data.id)).status).to.equal('completed');
    expect(ext.undeployed).to.deep.equal([[MATRIX]]);
  });
});
