import { expect } from 'chai';
import { readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { startTestServer, removeDir, bearer, seedWorkspace, tempDir, type TestServer } from '../helpers/server.js';
import { installMatrices, uninstallPackage } from '../helpers/installs.js';
import { openDurableStore, type DurableStore } from '../../src/store/embedded/durable.js';
import type { ThreadedStore } from '../../src/store/embedded/threaded-store.js';
import { sparql, iri } from '../../src/rdf/sparql.js';

/**
 * Issue 16, acceptance 3: the data a query worker holds is prepared off the
 * main thread. Graphs no write changed since the newest snapshot are read
 * by the worker from the snapshot file itself; only graphs written since
 * are dumped by the service. The answers must be the same either way.
 */

const label = (uri: string, text: string) => `<${uri}> a <https://poliglot.io/os/spec/matrix#Matrix> ; <http://www.w3.org/2000/01/rdf-schema#label> "${text}" .
<${uri}#thing> <http://www.w3.org/2000/01/rdf-schema#label> "${text} thing" ; <https://example.org/partOf> [ <http://www.w3.org/2000/01/rdf-schema#label> "${text} part" ] .`;

describe('durable store: which graphs the newest snapshot still holds as they are', () => {
  let dir: string;
  let store: DurableStore | undefined;
  const A = 'https://example.org/graphs/a';
  const B = 'https://example.org/graphs/b';
  const load = (graph: string, n: number) => ({ kind: 'load' as const, graph, format: 'application/n-triples' as const, data: `<https://example.org/s${n}> <https://example.org/p> "${n}" .\n` });

  beforeEach(() => { dir = tempDir(); });
  afterEach(async () => { await store?.close(); store = undefined; removeDir(dir); });

  it('offers nothing before the first snapshot, then every graph until one is written', async () => {
    store = await openDurableStore(dir);
    await store.write([load(A, 1), load(B, 2)]);
    expect(await store.unchangedInSnapshot([A, B])).to.equal(undefined);
    await store.snapshot();
    const all = await store.unchangedInSnapshot([A, B]);
    expect(all?.graphs).to.deep.equal([A, B]);
    expect(path.basename(all!.file)).to.match(/^snapshot-\d{16}\.trig$/);
    await store.write([load(B, 3)]);
    expect((await store.unchangedInSnapshot([A, B]))?.graphs).to.deep.equal([A]);
    await store.update(sparql`INSERT DATA { GRAPH ${iri(A)} { <https://example.org/x> <https://example.org/p> 1 } }`, [A]);
    expect((await store.unchangedInSnapshot([A, B]))?.graphs).to.deep.equal([]);
  });

  it('does not wait for a snapshot under way: answers the newest one written, the journal holding the rest', async () => {
    store = await openDurableStore(dir);
    await store.write([load(A, 1)]);
    await store.snapshot();
    const first = (await store.unchangedInSnapshot([A]))!.file;
    await store.write([load(B, 2)]);
    expect((await store.unchangedInSnapshot([A, B]))?.graphs).to.deep.equal([A]);
    const taking = store.snapshot();
    await new Promise((resolve) => setImmediate(resolve));
    const found = await store.unchangedInSnapshot([A, B]);
    const sources = await store.graphSources([A, B]);
    // The second snapshot is still being written by its worker thread.
    expect(store.stats().snapshots).to.equal(1);
    expect(found).to.deep.equal({ file: first, graphs: [A] });
    expect(sources?.snapshot).to.deep.equal({ file: first, graphs: [A] });
    expect(sources?.journal.graphs).to.deep.equal([B]);
    await taking;
    expect(store.stats().snapshots).to.equal(2);
    expect((await store.unchangedInSnapshot([A, B]))?.graphs).to.deep.equal([A, B]);
  });

  it('counts the graphs a write declares as changed, and only those', async () => {
    store = await openDurableStore(dir);
    await store.write([load(A, 1), load(B, 2)]);
    await store.snapshot();
    await store.update(sparql`DELETE WHERE { GRAPH ${iri(B)} { ?s ?p ?o } }`, [B]);
    expect((await store.unchangedInSnapshot([A, B]))?.graphs).to.deep.equal([A]);
  });

  it('after a restart, counts the graphs of the journal records replayed after the snapshot as changed', async () => {
    store = await openDurableStore(dir);
    await store.write([load(A, 1), load(B, 2)]);
    await store.snapshot();
    await store.write([load(A, 4)]);
    await store.close();
    store = await openDurableStore(dir);
    expect((await store.unchangedInSnapshot([A, B]))?.graphs).to.deep.equal([B]);
    await store.snapshot();
    expect((await store.unchangedInSnapshot([A, B]))?.graphs).to.deep.equal([A, B]);
  });
});

describe('query sandbox: graphs read from the snapshot file by the worker', function () {
  this.timeout(120_000);
  let t: TestServer;
  let dataDir: string;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  const M1 = 'https://example.org/matrices/first';
  const M2 = 'https://example.org/matrices/second';

  const labels = async (): Promise<string[]> => {
    const res = await t.http.post('/api/v1/commands/acme/alias/labels/execute').set(bearer(tokens.member)).set('Accept', 'application/n-triples');
    expect(res.status, res.text.slice(0, 300)).to.equal(200);
    return res.text.trim().split('\n').filter(Boolean).map((line) => /"([^"]*)"/.exec(line)![1]!).sort();
  };

  before(async function () {
    // Remote mode (WSM_TEST_STORE=sparql) has no snapshot file and no journal: the worker's data is dumped from the engine;
    // nor has cluster mode (WSM_TEST_STORE=cluster), whose journal is in PostgreSQL: the worker's data is dumped from the replica.
    if (process.env.WSM_TEST_STORE === 'sparql' || process.env.WSM_TEST_STORE === 'cluster') this.skip();
    dataDir = tempDir();
    t = await startTestServer({}, dataDir);
    ({ tokens } = await seedWorkspace(t, 'acme'));
    const res = await t.http.post('/api/v1/commands/acme').set(bearer(tokens.owner))
      .send({ alias: 'labels', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT { ?s <http://www.w3.org/2000/01/rdf-schema#label> ?l } WHERE { ?s <http://www.w3.org/2000/01/rdf-schema#label> ?l }' });
    expect(res.status).to.equal(200);
    await installMatrices(t, tokens.owner, 'acme', 'first', [{ uri: M1, turtle: label(M1, 'First') }]);
    await (t.server.services.store as ThreadedStore).snapshot();
    await t.close();
    // A new process: the workspace's graphs are in the snapshot, no worker holds them.
    t = await startTestServer({}, dataDir);
  });
  after(async () => { if (!t) return; await t.close(); removeDir(dataDir); });

  it('answers the first executions after a restart from the snapshot file, concurrent ones alike', async () => {
    const before = t.server.services.sandbox.stats().graphsFromSnapshot;
    const answers = await Promise.all([labels(), labels()]);
    for (const answer of answers) expect(answer).to.deep.equal(['First', 'First part', 'First thing']);
    expect(t.server.services.sandbox.stats().graphsFromSnapshot).to.be.above(before);
  });

  it('keeps a blank node of the snapshot one node (joins across it answer)', async () => {
    const res = await t.http.get('/api/v1/sparql/acme').set(bearer(tokens.owner))
      .query({ query: `SELECT ?l WHERE { GRAPH ?g { <${M1}#thing> <https://example.org/partOf> ?part . ?part <http://www.w3.org/2000/01/rdf-schema#label> ?l } }` })
      .set('Accept', 'application/sparql-results+json');
    expect(res.status, res.text.slice(0, 300)).to.equal(200);
    expect(JSON.parse(res.text).results.bindings.map((b: { l: { value: string } }) => b.l.value)).to.deep.equal(['First part']);
  });

  it('sees graphs written after the snapshot, and no longer sees those removed', async () => {
    await installMatrices(t, tokens.owner, 'acme', 'second', [{ uri: M2, turtle: label(M2, 'Second') }]);
    expect(await labels()).to.deep.equal(['First', 'First part', 'First thing', 'Second', 'Second part', 'Second thing']);
    await uninstallPackage(t, tokens.owner, 'acme', 'first');
    expect(await labels()).to.deep.equal(['Second', 'Second part', 'Second thing']);
  });

  it('falls back to the service\'s own copy when the snapshot file is gone', async () => {
    const store = t.server.services.store as ThreadedStore;
    await store.snapshot();
    for (const name of readdirSync(dataDir)) if (name.startsWith('snapshot-')) rmSync(path.join(dataDir, name));
    const before = t.server.services.sandbox.stats().graphsFromSnapshot;
    // The administrators' view is stale (written since its last query): its worker is sent to the removed file first.
    const res = await t.http.get('/api/v1/sparql/acme').set(bearer(tokens.owner))
      .query({ query: `SELECT ?l WHERE { GRAPH ?g { <${M2}#thing> <http://www.w3.org/2000/01/rdf-schema#label> ?l } }` })
      .set('Accept', 'application/sparql-results+json');
    expect(res.status, res.text.slice(0, 300)).to.equal(200);
    expect(JSON.parse(res.text).results.bindings.map((b: { l: { value: string } }) => b.l.value)).to.deep.equal(['Second thing']);
    expect(await labels()).to.deep.equal(['Second', 'Second part', 'Second thing']);
    expect(t.server.services.sandbox.stats().graphsFromSnapshot).to.equal(before);
  });
});

describe('query sandbox: graphs written since the snapshot rebuilt by the worker from the journal', function () {
  this.timeout(120_000);
  let t: TestServer;
  let dataDir: string;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  let commandId: string;
  const M1 = 'https://example.org/matrices/journal-first';
  const M2 = 'https://example.org/matrices/journal-second';

  const labels = async (): Promise<string[]> => {
    const res = await t.http.post('/api/v1/commands/acme/alias/labels/execute').set(bearer(tokens.member)).set('Accept', 'application/n-triples');
    expect(res.status, res.text.slice(0, 300)).to.equal(200);
    return res.text.trim().split('\n').filter(Boolean).map((line) => /"([^"]*)"/.exec(line)![1]!).sort();
  };
  const adminSelect = async (query: string): Promise<string[]> => {
    const res = await t.http.get('/api/v1/sparql/acme').set(bearer(tokens.owner)).query({ query }).set('Accept', 'application/sparql-results+json');
    expect(res.status, res.text.slice(0, 300)).to.equal(200);
    return JSON.parse(res.text).results.bindings.map((b: Record<string, { value: string }>) => Object.values(b)[0]!.value).sort();
  };
  const stats = () => t.server.services.sandbox.stats();

  before(async function () {
    // Remote mode (WSM_TEST_STORE=sparql) has no snapshot file and no journal: the worker's data is dumped from the engine;
    // nor has cluster mode (WSM_TEST_STORE=cluster), whose journal is in PostgreSQL: the worker's data is dumped from the replica.
    if (process.env.WSM_TEST_STORE === 'sparql' || process.env.WSM_TEST_STORE === 'cluster') this.skip();
    dataDir = tempDir();
    t = await startTestServer({}, dataDir);
    ({ tokens } = await seedWorkspace(t, 'acme'));
    const res = await t.http.post('/api/v1/commands/acme').set(bearer(tokens.owner))
      .send({ alias: 'labels', description: 'before', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT { ?s <http://www.w3.org/2000/01/rdf-schema#label> ?l } WHERE { ?s <http://www.w3.org/2000/01/rdf-schema#label> ?l }' });
    expect(res.status).to.equal(200);
    commandId = res.body.data.id as string;
  });
  after(async () => { if (!t) return; await t.close(); removeDir(dataDir); });

  it('before any snapshot, answers from the journal alone (a blank node stays one node)', async () => {
    await installMatrices(t, tokens.owner, 'acme', 'first', [{ uri: M1, turtle: label(M1, 'First') }]);
    const before = stats().graphsFromJournal;
    expect(await labels()).to.deep.equal(['First', 'First part', 'First thing']);
    expect(stats().graphsFromJournal).to.be.above(before);
    expect(await adminSelect(`SELECT ?l WHERE { GRAPH ?g { <${M1}#thing> <https://example.org/partOf> ?part . ?part <http://www.w3.org/2000/01/rdf-schema#label> ?l } }`))
      .to.deep.equal(['First part']);
  });

  it('after a snapshot, replays the records after it on the snapshot\'s content (install, upgrade, uninstall)', async () => {
    await installMatrices(t, tokens.owner, 'acme', 'second', [{ uri: M2, turtle: label(M2, 'Second') }]);
    expect(await labels()).to.deep.equal(['First', 'First part', 'First thing', 'Second', 'Second part', 'Second thing']);
    await (t.server.services.store as ThreadedStore).snapshot();
    // The upgrade drops and reloads M2's graph after the snapshot: the worker reads M2's block, then replays the records.
    await installMatrices(t, tokens.owner, 'acme', 'second', [{ uri: M2, turtle: label(M2, 'Second v2') }], '1.0.1');
    const before = stats().graphsFromJournal;
    expect(await labels()).to.deep.equal(['First', 'First part', 'First thing', 'Second v2', 'Second v2 part', 'Second v2 thing']);
    expect(stats().graphsFromJournal).to.be.above(before);
    await uninstallPackage(t, tokens.owner, 'acme', 'first');
    expect(await labels()).to.deep.equal(['Second v2', 'Second v2 part', 'Second v2 thing']);
  });

  it('answers a graph written from other graphs\' content (DELETE WHERE) as the service holds it', async () => {
    expect(await adminSelect(`SELECT ?o WHERE { GRAPH ?g { ?c ?p "labels" ; ?q ?o } FILTER(?o IN ("before", "after")) }`)).to.deep.equal(['before']);
    const res = await t.http.put(`/api/v1/commands/acme/${commandId}`).set(bearer(tokens.owner)).send({ description: 'after' });
    expect(res.status, res.text).to.equal(200);
    const rows = await adminSelect(`SELECT ?o WHERE { GRAPH ?g { ?c ?p "labels" ; ?q ?o } FILTER(?o IN ("before", "after")) }`);
    expect(rows).to.deep.equal(['after']);
  });

  it('rebuilds a graph the journal drops from the records alone, without reading its snapshot block', async () => {
    const store = t.server.services.store as ThreadedStore;
    // A workspace no administrator has queried: its scripts run in a copy of their own graphs only
    // (in 'acme' they now run in the administrators' copy, which needs more graphs than M2's).
    await installMatrices(t, tokens.owner, 'acme', 'second', [{ uri: M2, turtle: label(M2, 'Second v3') }], '1.0.2');
    const beta = await seedWorkspace(t, 'beta');
    const created = await t.http.post('/api/v1/commands/beta').set(bearer(beta.tokens.owner))
      .send({ alias: 'labels', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT { ?s <http://www.w3.org/2000/01/rdf-schema#label> ?l } WHERE { ?s <http://www.w3.org/2000/01/rdf-schema#label> ?l }' });
    expect(created.status, created.text).to.equal(200);
    await installMatrices(t, beta.tokens.owner, 'beta', 'second', [{ uri: M2, turtle: label(M2, 'Beta') }]);
    await store.snapshot();
    // The upgrade drops and reloads M2's graph (the view's only graph) after the snapshot.
    await installMatrices(t, beta.tokens.owner, 'beta', 'second', [{ uri: M2, turtle: label(M2, 'Beta v2') }], '1.0.1');
    // Were the old content read from the snapshot file only to be dropped, the worker could not read it now.
    for (const name of readdirSync(dataDir)) if (name.startsWith('snapshot-')) rmSync(path.join(dataDir, name));
    const before = stats().graphsFromJournal;
    const res = await t.http.post('/api/v1/commands/beta/alias/labels/execute').set(bearer(beta.tokens.member)).set('Accept', 'application/n-triples');
    expect(res.status, res.text.slice(0, 300)).to.equal(200);
    expect(res.text.trim().split('\n').map((line) => /"([^"]*)"/.exec(line)![1]!).sort()).to.deep.equal(['Beta v2', 'Beta v2 part', 'Beta v2 thing']);
    expect(stats().graphsFromJournal).to.be.above(before);
    await store.snapshot();
  });

  it('falls back to the service\'s own copy when the journal records are gone', async () => {
    await installMatrices(t, tokens.owner, 'acme', 'first', [{ uri: M1, turtle: label(M1, 'Again') }], '1.0.1');
    // The store keeps appending to its open file; the worker finds no record to read.
    for (const name of readdirSync(dataDir)) if (name.startsWith('journal-')) rmSync(path.join(dataDir, name));
    const before = stats().graphsFromJournal;
    expect(await labels()).to.deep.equal(['Again', 'Again part', 'Again thing', 'Second v3', 'Second v3 part', 'Second v3 thing']);
    expect(stats().graphsFromJournal).to.equal(before);
  });
});
