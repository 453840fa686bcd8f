import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { openClusterStore } from '../../src/store/cluster/open.js';
import type { ClusterStore } from '../../src/store/cluster/cluster-store.js';
import { StoreUnavailableError, updateOp, type WriteOp } from '../../src/store/store.js';
import { Graphs } from '../../src/rdf/graphs.js';
import { integer, iri, sparql } from '../../src/rdf/sparql.js';
import { encodeRecord } from '../../src/store/journal.js';
import { freshClusterUrl, requirePostgres, sqlAt } from '../helpers/cluster.js';
import { bearer, removeDir, seedWorkspace, startTestServer, tempDir, type TestServer } from '../helpers/server.js';
import { sample } from '../helpers/metrics.js';
import { cuttableProxy } from '../helpers/proxy.js';
import { uploadAndWait } from '../helpers/lifecycle.js';
import { examplePackage } from '../helpers/packages.js';

const BASE = 'https://residency.example/';
const graphs = new Graphs(BASE);
const P = 'https://example.org/p';
const COPY = 'https://example.org/copy';
/** `n` triples `<s{from+i}> p i` into `graph`, as one load. */
const triples = (graph: string, n: number, from = 0): WriteOp => ({
  kind: 'load', graph, format: 'application/n-triples',
  data: Array.from({ length: n }, (_, i) => `<https://example.org/s${from + i}> <${P}> "${from + i}"^^<http://www.w3.org/2001/XMLSchema#integer> .\n`).join(''),
});
const insertInto = (graph: string, n: number): WriteOp =>
  updateOp(sparql`INSERT DATA { GRAPH ${iri(graph)} { ${iri(`https://example.org/s${n}`)} ${iri(P)} ${integer(n)} } }`, [graph]);
const countIn = async (store: ClusterStore, graph: string) =>
  Number((await store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH ${iri(graph)} { ?s ?p ?o } }`))[0]!.n!.value);

/**
 * Residency (docs/cluster.md, "Residency"): with a budget, a store holds
 * the service's graphs and the workspaces in use, loads a workspace on first
 * use and lets go of the least recently used past the budget or when idle.
 */
describe('cluster store: residency', function () {
  this.timeout(300_000);
  let url: string;
  const open: ClusterStore[] = [];
  const openStore = async (residency?: { quads: number; idleMs?: number }) => {
    const store = await openClusterStore(url, {
      snapshotAfterBytes: 1 << 30, probeMs: 100, baseIri: BASE,
      ...(residency ? { residency: { quads: residency.quads, idleMs: residency.idleMs ?? 3_600_000 } } : {}),
    });
    open.push(store);
    return store;
  };

  before(function () { requirePostgres(this); });
  beforeEach(async () => { url = await freshClusterUrl(); });
  afterEach(async () => {
    for (const store of open.splice(0)) await store.close();
  });

  it('a workspace not touched is not held; its first read loads it from the snapshot and the records after it, and answers as a store holding everything', async () => {
    const writer = await openStore();
    await writer.write([triples(graphs.iam('a'), 50), triples(graphs.packages('b'), 20), insertInto(graphs.system, 1)]);
    await writer.snapshot(true);
    await writer.write([insertInto(graphs.iam('a'), 100), insertInto(graphs.iam('a'), 101)]);
    await writer.write([insertInto(graphs.packages('b'), 200)]);

    const r = await openStore({ quads: 1_000_000 });
    expect(r.residentStreams()).to.deep.equal([]);
    expect(r.holds('service') && !r.holds('ws:a') && !r.holds('ws:b')).to.equal(true);
    // The service's graphs are held; no workspace quad is.
    expect(r.replica.raw.size).to.equal(1);
    expect(await countIn(r, graphs.system)).to.equal(1);
    expect(r.residentStreams()).to.deep.equal([]);

    expect(await countIn(r, graphs.iam('a'))).to.equal(52);
    expect(r.residentStreams()).to.deep.equal(['ws:a']);
    expect(r.residencyStats()).to.deep.equal({ residentWorkspaces: 1, loads: 1, evictions: 0 });
    // A scoped read names its graphs by its scope.
    const scoped = await r.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }`, { defaultGraphs: [graphs.packages('b')], namedGraphs: [] });
    expect(Number(scoped[0]!.n!.value)).to.equal(21);
    expect(r.residentStreams()).to.deep.equal(['ws:a', 'ws:b']);
    const lines = (text: string) => text.split('\n').sort();
    expect(lines(await r.dumpGraph(graphs.packages('b')))).to.deep.equal(lines(await writer.dumpGraph(graphs.packages('b'))));
    // Writes by another store to a held workspace are caught up as before.
    await writer.write([insertInto(graphs.iam('a'), 102)]);
    expect(await countIn(r, graphs.iam('a'))).to.equal(53);
    expect(await r.lagRecords()).to.equal(0);
  });

  it('records of workspaces not held are passed over; a write over the service and such a workspace leaves only the service\'s part; the workspace, loaded, has both', async () => {
    const writer = await openStore();
    const r = await openStore({ quads: 1_000_000 });
    const both = updateOp(sparql`INSERT DATA { GRAPH ${iri(graphs.system)} { ${iri('https://example.org/ws')} ${iri(P)} 1 } GRAPH ${iri(graphs.iam('x'))} { ${iri('https://example.org/ws')} ${iri(P)} 2 } }`,
      [graphs.system, graphs.iam('x')]);
    await writer.write([insertInto(graphs.iam('x'), 1)]);
    await writer.write([both]);
    expect(await countIn(r, graphs.system)).to.equal(1);
    expect(r.appliedSeq('ws:x'), 'passed over up to the head').to.equal(2);
    expect(r.holds('ws:x')).to.equal(false);
    expect(r.replica.raw.size, 'the workspace\'s part of the write left out').to.equal(1);
    expect(await countIn(r, graphs.iam('x'))).to.equal(2);
    expect(r.holds('ws:x')).to.equal(true);
  });

  it('a write to a workspace not held loads it first: its condition is asked on the workspace\'s data', async () => {
    const writer = await openStore();
    await writer.write([insertInto(graphs.iam('a'), 1)]);
    const r = await openStore({ quads: 1_000_000 });
    const present = { ask: sparql`ASK { GRAPH ${iri(graphs.iam('a'))} { ${iri('https://example.org/s1')} ?p ?o } }`, expect: true };
    expect(await r.writeIf(present, [insertInto(graphs.iam('a'), 2)])).to.equal(true);
    expect(r.residentStreams()).to.deep.equal(['ws:a']);
    expect(await countIn(writer, graphs.iam('a'))).to.equal(2);
    // A new workspace: nothing to load, held from its first write.
    await r.write([insertInto(graphs.iam('new'), 1)]);
    expect(r.residentStreams()).to.deep.equal(['ws:a', 'ws:new']);
  });

  it('over the budget the least recently used workspace is let go; read again, it is loaded again with the writes another store made meanwhile', async () => {
    const writer = await openStore();
    for (const ws of ['a', 'b', 'c']) await writer.write([triples(graphs.iam(ws), 400)]);
    const r = await openStore({ quads: 1000 });
    expect(await countIn(r, graphs.iam('a'))).to.equal(400);
    expect(await countIn(r, graphs.iam('b'))).to.equal(400);
    expect(await countIn(r, graphs.iam('a'))).to.equal(400); // a is now the most recent
    expect(await countIn(r, graphs.iam('c'))).to.equal(400);
    await r.enforceResidency();
    expect(r.residentStreams(), 'b, least recently used, let go').to.deep.equal(['ws:a', 'ws:c']);
    expect(r.residencyStats()).to.deep.equal({ residentWorkspaces: 2, loads: 3, evictions: 1 });
    expect(r.replica.raw.size).to.equal(800);

    await writer.write([insertInto(graphs.iam('b'), 1000)]);
    await writer.write([insertInto(graphs.iam('b'), 1001)]);
    expect(await countIn(r, graphs.iam('b'))).to.equal(402);
    await r.enforceResidency();
    expect(r.residentStreams()).to.deep.equal(['ws:c', 'ws:b']);
    expect(r.residencyStats()).to.deep.equal({ residentWorkspaces: 2, loads: 4, evictions: 2 });
  });

  it('idle workspaces are let go; a read over every graph (GRAPH ?g) loads every workspace', async () => {
    const writer = await openStore();
    for (const ws of ['a', 'b']) await writer.write([insertInto(graphs.iam(ws), 1)]);
    const r = await openStore({ quads: 1_000_000, idleMs: 60_000 });
    const rows = await r.select(sparql`SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }`);
    expect(rows.map((b) => b.g!.value).sort()).to.deep.equal([graphs.iam('a'), graphs.iam('b')]);
    expect(r.residentStreams().sort()).to.deep.equal(['ws:a', 'ws:b']);
    expect(await r.enforceResidency({ now: Date.now() + 1000 })).to.deep.equal([]);
    expect((await r.enforceResidency({ now: Date.now() + 61_000 })).sort()).to.deep.equal(['ws:a', 'ws:b']);
    expect(r.residentStreams()).to.deep.equal([]);
    expect(await r.graphNames(graphs.workspacePrefix('b'))).to.deep.equal([graphs.iam('b')]);
    expect(r.residentStreams()).to.deep.equal(['ws:b']);
  });

  it('a record caught up that reads a workspace not held is applied on that workspace\'s data (the workspace is loaded first)', async () => {
    const writer = await openStore();
    await writer.write([triples(graphs.iam('a'), 5)]);
    const r = await openStore({ quads: 1_000_000 });
    expect(await countIn(r, graphs.system)).to.equal(0);
    // A write to the service's graphs whose WHERE reads workspace a.
    await writer.write([insertInto(graphs.iam('a'), 7)]);
    await writer.write([updateOp(sparql`INSERT { GRAPH ${iri(graphs.system)} { ?s ${iri(COPY)} ?o } } WHERE { GRAPH ${iri(graphs.iam('a'))} { ?s ${iri(P)} ?o } }`, [graphs.system])]);
    expect(await countIn(r, graphs.system)).to.equal(6);
    expect(r.holds('ws:a')).to.equal(true);
    expect(await countIn(r, graphs.iam('a'))).to.equal(6);
  });

  it('a caught-up record whose op reading a workspace not held changes only that workspace applies its other ops without loading it', async () => {
    const writer = await openStore();
    await writer.write([triples(graphs.iam('a'), 3)]);
    const r = await openStore({ quads: 1_000_000 });
    await writer.write([
      updateOp(sparql`INSERT { GRAPH ${iri(graphs.iam('a'))} { ?s ${iri(COPY)} ?o } } WHERE { GRAPH ${iri(graphs.iam('a'))} { ?s ${iri(P)} ?o } }`, [graphs.iam('a')]),
      insertInto(graphs.system, 1),
    ]);
    expect(await countIn(r, graphs.system)).to.equal(1);
    expect(r.holds('ws:a')).to.equal(false);
    expect(r.residencyStats()!.loads).to.equal(0);
    expect(await countIn(r, graphs.iam('a'))).to.equal(6);
  });

  it('PostgreSQL out of reach: a held workspace answers, one not held fails as unavailable (nothing to load it from), and loads once PostgreSQL is back', async () => {
    const writer = await openStore();
    for (const ws of ['a', 'b']) await writer.write([insertInto(graphs.iam(ws), 1)]);
    const proxy = await cuttableProxy(new URL(url));
    const through = new URL(url);
    through.port = String(proxy.port);
    try {
      const r = await openClusterStore(through.toString(), { snapshotAfterBytes: 1 << 30, probeMs: 100, baseIri: BASE, residency: { quads: 1_000_000, idleMs: 3_600_000 } });
      open.push(r);
      expect(await countIn(r, graphs.iam('a'))).to.equal(1);
      await proxy.cut();
      expect(await countIn(r, graphs.iam('a'))).to.equal(1);
      let failure: unknown;
      try {
        await countIn(r, graphs.iam('b'));
      } catch (err) {
        failure = err;
      }
      expect(failure).to.be.instanceOf(StoreUnavailableError);
      expect((failure as Error).message).to.match(/does not hold cannot be loaded/);
      expect(r.holds('ws:b')).to.equal(false);
      await proxy.restore();
      for (let i = 0; i < 200 && !r.health().writable; i++) await new Promise((res) => setTimeout(res, 50));
      expect(await countIn(r, graphs.iam('b'))).to.equal(1);
    } finally {
      await proxy.close();
    }
  });

  it('a snapshot is stored whole and split by stream; a workspace loads from its part, or from the whole snapshot when it has no parts', async () => {
    const writer = await openStore();
    for (const ws of ['a', 'b']) await writer.write([triples(graphs.iam(ws), 10), triples(graphs.packages(ws), 3)]);
    await writer.write([insertInto(graphs.system, 1)]);
    await writer.snapshot(true);
    const rows = await sqlAt(url, 'SELECT stream, quads FROM wsm_snapshots ORDER BY stream');
    expect(rows.map((r) => `${r.stream}:${r.quads}`)).to.deep.equal(['replica:27', 'service:1', 'ws:a:13', 'ws:b:13']);
    const r = await openStore({ quads: 1_000_000 });
    expect(await countIn(r, graphs.packages('a'))).to.equal(3);
    await sqlAt(url, "DELETE FROM wsm_snapshots WHERE stream <> 'replica'");
    expect(await countIn(r, graphs.iam('b'))).to.equal(10);
    expect(r.residencyStats()!.loads).to.equal(2);
  });

  it('a store opened with residency reads the service\'s part of the snapshot and the service\'s records only; workspaces load from their parts', async () => {
    const writer = await openStore();
    for (const ws of ['a', 'b']) await writer.write([triples(graphs.iam(ws), 10)]);
    await writer.write([insertInto(graphs.system, 1), insertInto(graphs.system, 2)]);
    await writer.snapshot(true);
    await writer.write([insertInto(graphs.iam('a'), 100)]);
    await writer.write([insertInto(graphs.system, 3)]);
    // The whole snapshot unreadable, and a record of workspace b after it damaged: neither is read at start.
    await sqlAt(url, "UPDATE wsm_snapshots SET data = 'not n-quads' WHERE stream = 'replica'");
    await writer.write([insertInto(graphs.iam('b'), 101)]);
    await sqlAt(url, "UPDATE wsm_journal SET record = 'damaged' WHERE stream = 'ws:b'");
    const r = await openStore({ quads: 1_000_000 });
    expect(r.info.snapshotQuads, 'the service\'s part').to.equal(2);
    expect(r.info.recordsReplayed, 'the service\'s record after the snapshot').to.equal(1);
    expect(r.residentStreams()).to.deep.equal([]);
    expect(r.replica.raw.size).to.equal(3);
    expect(await countIn(r, graphs.system)).to.equal(3);
    expect(await countIn(r, graphs.iam('a'))).to.equal(11);
    expect(r.residentStreams()).to.deep.equal(['ws:a']);
    // Loading b reads its damaged record: refused, as a damaged record is.
    let failure: unknown;
    try {
      await countIn(r, graphs.iam('b'));
    } catch (err) {
      failure = err;
    }
    expect(failure).to.be.instanceOf(StoreUnavailableError);
    expect(r.holds('ws:b')).to.equal(false);
  });

  it('a store opened with residency on records of the one-stream layout after the snapshot loads the whole snapshot, and answers as one holding everything', async () => {
    const writer = await openStore();
    await writer.write([triples(graphs.iam('a'), 4), insertInto(graphs.system, 1)]);
    await writer.snapshot(true);
    // A record in the service stream alone that changes a workspace's graph, as the one-stream layout appended them.
    await writer.write([insertInto(graphs.system, 2)]);
    const seq = Number((await sqlAt(url, "SELECT seq FROM wsm_heads WHERE stream = 'service'"))[0]!.seq) + 1;
    await sqlAt(url, "INSERT INTO wsm_journal (stream, seq, gseq, record) VALUES ('service', $1, nextval('wsm_order'), $2)", [seq, encodeRecord(seq, [insertInto(graphs.iam('a'), 50)], Date.now())]);
    await sqlAt(url, "UPDATE wsm_heads SET seq = $1 WHERE stream = 'service'", [seq]);
    const r = await openStore({ quads: 1_000_000 });
    expect(r.info.snapshotQuads, 'the whole snapshot').to.equal(5);
    expect(r.residentStreams()).to.deep.equal([]);
    expect(await countIn(r, graphs.iam('a'))).to.equal(5);
  });

  it('a snapshot stored by a store holding only some workspaces holds every workspace; a store opened on it reads them all', async () => {
    const writer = await openStore();
    for (const ws of ['a', 'b']) await writer.write([triples(graphs.iam(ws), 10)]);
    const r = await openStore({ quads: 1_000_000 });
    await writer.write([insertInto(graphs.iam('b'), 50)]);
    expect(await countIn(r, graphs.iam('a'))).to.equal(10);
    await r.snapshot(true);
    await writer.write([insertInto(graphs.iam('a'), 51)]);
    const fresh = await openStore();
    expect(fresh.info.snapshotQuads).to.equal(21);
    expect(await countIn(fresh, graphs.iam('a'))).to.equal(11);
    expect(await countIn(fresh, graphs.iam('b'))).to.equal(11);
    // And a workspace loaded from that snapshot.
    const later = await openStore({ quads: 1_000_000 });
    expect(await countIn(later, graphs.iam('b'))).to.equal(11);
  });
});

describe('service instances with residency (WSM_CLUSTER_RESIDENT_QUADS)', function () {
  this.timeout(300_000);
  const dirs: string[] = [];
  const servers: TestServer[] = [];
  const metrics = async (t: TestServer, token: string) => {
    const res = await t.http.get('/metrics').set(bearer(token));
    expect(res.status).to.equal(200);
    return res.text;
  };

  before(function () { requirePostgres(this); });
  after(async () => {
    for (const t of servers.splice(0)) await t.close();
    for (const dir of dirs.splice(0)) removeDir(dir);
  });

  it('an instance loads a workspace on first use, lets it go when idle, and read again sees the writes another instance made meanwhile; /metrics counts', async () => {
    const url = await freshClusterUrl();
    const env = { WSM_STORE: 'cluster', WSM_POSTGRES_URL: url };
    dirs.push(tempDir(), tempDir());
    const a = await startTestServer(env, dirs[0]);
    servers.push(a);
    const { tokens } = await seedWorkspace(a, 'acme');
    const late = await a.token('late-member');
    expect((await a.http.get('/api/v1/workspaces').set(bearer(late))).status).to.equal(200);
    const b = await startTestServer({ ...env, WSM_CLUSTER_RESIDENT_QUADS: '1000', WSM_CLUSTER_IDLE_SECONDS: '1' }, dirs[1]);
    servers.push(b);

    // Polls /metrics of b until `done` holds (the idle check runs every second).
    const until = async (done: (text: string) => boolean, what: string) => {
      const deadline = Date.now() + 60_000;
      for (let text = await metrics(b, tokens.root); ; text = await metrics(b, tokens.root)) {
        if (done(text)) return text;
        if (Date.now() > deadline) throw new Error(`${what}:\n${text}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    const figure = (text: string, name: string) => sample(text, `wsm_cluster_${name}`);
    expect(await metrics(a, tokens.root), 'not set without a budget').not.to.match(/^wsm_cluster_resident_workspaces /m);
    let text = await until((t) => /^wsm_cluster_resident_workspaces 0$/m.test(t), 'workspaces held after the start');
    expect(text).to.match(/^wsm_cluster_catch_up_lag_records \d+$/m);
    let loads = figure(text, 'workspace_loads_total');

    expect((await b.http.get('/api/v1/workspaces/acme').set(bearer(tokens.owner))).status).to.equal(200);
    text = await metrics(b, tokens.root);
    expect(figure(text, 'workspace_loads_total'), 'loaded on first use').to.be.above(loads);
    expect((await b.http.get('/api/v1/workspaces/acme').set(bearer(tokens.outsider))).status).to.be.oneOf([403, 404]);
    expect((await a.http.put('/api/v1/workspaces/acme/members/acme-outsider').set(bearer(tokens.owner)).send({})).status).to.equal(200);
    expect((await b.http.get('/api/v1/workspaces/acme').set(bearer(tokens.outsider))).status).to.equal(200);

    const evictions = figure(text, 'workspace_evictions_total');
    text = await until((t) => figure(t, 'workspace_evictions_total') > evictions && /^wsm_cluster_resident_workspaces 0$/m.test(t), 'no workspace let go when idle');
    loads = figure(text, 'workspace_loads_total');
    expect((await a.http.put('/api/v1/workspaces/acme/members/late-member').set(bearer(tokens.owner)).send({})).status).to.equal(200);
    expect((await b.http.get('/api/v1/workspaces/acme').set(bearer(late))).status, 'the write made while it was not held').to.equal(200);
    expect(figure(await metrics(b, tokens.root), 'workspace_loads_total')).to.be.above(loads);
  });

  it('an instance started over many workspaces holds none after its start, nor after listing a user\'s workspaces or an auto-update round (read from the index of workspaces); an interrupted command is failed, loading its workspace only', async () => {
    const url = await freshClusterUrl();
    const env = { WSM_STORE: 'cluster', WSM_POSTGRES_URL: url };
    dirs.push(tempDir(), tempDir(), tempDir());
    const a = await startTestServer(env, dirs[0]);
    servers.push(a);
    const seeded = [];
    for (let i = 0; i < 6; i++) seeded.push(await seedWorkspace(a, `ws${i}`));
    const { root } = seeded[0]!.tokens;
    const multi = await a.token('multi');
    for (const i of [1, 3, 4]) expect((await a.http.put(`/api/v1/workspaces/ws${i}/members/multi`).set(bearer(seeded[i]!.tokens.owner)).send({})).status).to.equal(200);
    // Removed again from one: the list follows.
    expect((await a.http.delete('/api/v1/workspaces/ws3/members/multi').set(bearer(seeded[3]!.tokens.owner))).status).to.equal(200);
    const slugs = async (t: TestServer, token: string) => {
      const res = await t.http.get('/api/v1/workspaces').set(bearer(token));
      expect(res.status).to.equal(200);
      return (res.body.data as Array<{ slug: string }>).map((w) => w.slug);
    };
    expect(await slugs(a, multi)).to.deep.equal(['ws1', 'ws4']);
    const resident = async (t: TestServer) => {
      const text = await metrics(t, root);
      return { held: sample(text, 'wsm_cluster_resident_workspaces'), loads: sample(text, 'wsm_cluster_workspace_loads_total') };
    };

    const residency = { WSM_CLUSTER_RESIDENT_QUADS: '1000000', WSM_CLUSTER_IDLE_SECONDS: '3600' };
    const b = await startTestServer({ ...env, ...residency }, dirs[1]);
    servers.push(b);
    expect(await resident(b), 'after the start').to.deep.equal({ held: 0, loads: 0 });
    expect(await slugs(b, multi)).to.deep.equal(['ws1', 'ws4']);
    expect(await slugs(b, seeded[2]!.tokens.owner)).to.deep.equal(['ws2']);
    expect(await slugs(b, seeded[2]!.tokens.outsider)).to.deep.equal([]);
    expect(await slugs(b, root)).to.deep.equal(['ws0', 'ws1', 'ws2', 'ws3', 'ws4', 'ws5']);
    // An auto-update round reads the workspaces with installations that update themselves: none here.
    expect(await b.server.services.packages.autoUpdateOnce()).to.deep.equal([]);
    expect(await resident(b), 'after listing workspaces and an auto-update round').to.deep.equal({ held: 0, loads: 0 });
    // Added on another instance: listed here.
    expect((await a.http.put('/api/v1/workspaces/ws5/members/multi').set(bearer(seeded[5]!.tokens.owner)).send({})).status).to.equal(200);
    expect(await slugs(b, multi)).to.deep.equal(['ws1', 'ws4', 'ws5']);
    expect(await resident(b)).to.deep.equal({ held: 0, loads: 0 });

    // A command claimed by an instance that is gone, left pending in ws2: the next instance's start fails it.
    const { commands } = a.server.services.packages;
    const commandId = randomUUID();
    await a.server.services.store.write([commands.createOp({
      workspaceId: seeded[2]!.workspace.id, id: commandId, packageName: 'left-behind', version: '1.0.0', commandType: 'INSTALL',
      packageInstallationId: null, now: new Date().toISOString(), leaseOwner: 'an-instance-that-stopped',
    })]);
    const c = await startTestServer({ ...env, ...residency }, dirs[2]);
    servers.push(c);
    const command = await c.http.get(`/api/v1/packages/ws2/commands/${commandId}`).set(bearer(seeded[2]!.tokens.owner));
    expect(command.status).to.equal(200);
    expect(command.body.data.status).to.equal('failed');
    expect(await resident(c), 'only the workspace of the interrupted command').to.deep.equal({ held: 1, loads: 1 });
  });
  it('the IAM reads of one workspace (roles, agents, their principals and holders) load that workspace only, and answer as an instance holding everything', async () => {
    const url = await freshClusterUrl();
    const env = { WSM_STORE: 'cluster', WSM_POSTGRES_URL: url };
    dirs.push(tempDir(), tempDir());
    const a = await startTestServer(env, dirs.at(-2));
    servers.push(a);
    const seeded = [];
    for (let i = 0; i < 3; i++) {
      seeded.push(await seedWorkspace(a, `iam${i}`));
      const cmd = await uploadAndWait(a, seeded[i]!.tokens.owner, `iam${i}`, await examplePackage('project-tracking-1.0.0'));
      expect(cmd.status, JSON.stringify(cmd)).to.equal('completed');
    }
    const { root, owner } = seeded[1]!.tokens;
    const b = await startTestServer({ ...env, WSM_CLUSTER_RESIDENT_QUADS: '1000000', WSM_CLUSTER_IDLE_SECONDS: '3600' }, dirs.at(-1));
    servers.push(b);
    const held = async () => sample(await metrics(b, root), 'wsm_cluster_resident_workspaces');
    expect(await held(), 'after the start').to.equal(0);
    // The same reads on both instances: one holding everything, one loading what each read names.
    const read = async (t: TestServer, path: string) => {
      const res = await t.http.get(`/api/v1/iam/iam1${path}`).set(bearer(owner));
      expect(res.status, `${path}: ${JSON.stringify(res.body)}`).to.equal(200);
      return res.body.data as unknown;
    };
    const both = async (path: string) => {
      const here = await read(b, path);
      expect(here, path).to.deep.equal(await read(a, path));
      return here;
    };
    const roles = (await both('/roles?pageSize=100')) as { items: Array<{ id: string; label: string }> };
    expect(roles.items.map((r) => r.label)).to.include.members(['Project lead', 'Contributor', 'Stakeholder']);
    const lead = roles.items.find((r) => r.label === 'Project lead')!;
    await both(`/roles/${lead.id}`);
    const holders = (await both(`/roles/${lead.id}/assignees`)) as Array<{ type: string; id: string }>;
    const agent = holders.find((p) => p.type === 'AGENT')!;
    expect(agent, 'an agent holds the role by its specification').to.exist;
    const agents = (await both('/agents?pageSize=100')) as { items: Array<{ id: string }> };
    for (const one of agents.items) {
      await both(`/agents/${one.id}`);
      await both(`/agents/${one.id}/roles`);
    }
    expect((await both(`/roles?principal=${agent.id}`) as { items: Array<{ label: string }> }).items.map((r) => r.label)).to.deep.equal(['Project lead']);
    expect(await held(), 'only the workspace read').to.equal(1);
  });
});
