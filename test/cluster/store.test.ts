import { expect } from 'chai';
import { openClusterStore } from '../../src/store/cluster/open.js';
import type { ClusterStore } from '../../src/store/cluster/cluster-store.js';
import { StoreUnavailableError, WriteRefusedError, updateOp } from '../../src/store/store.js';
import { LARGE_WRITE_CHARS } from '../../src/store/embedded/oxigraph-store.js';
import { encodeRecord } from '../../src/store/journal.js';
import { HEADER_BYTES } from '../../src/store/journal-records.js';
import { integer, iri, sparql } from '../../src/rdf/sparql.js';
import { inReadSession } from '../../src/store/read-session.js';
import { freshClusterUrl, requirePostgres, sqlAt } from '../helpers/cluster.js';
import { cuttableProxy } from '../helpers/proxy.js';
import { runWsm } from '../helpers/cli.js';
import { bearer, removeDir, seedWorkspace, startTestServer, tempDir } from '../helpers/server.js';

const G = 'https://example.org/g';
const insert = (n: number) => updateOp(sparql`INSERT DATA { GRAPH ${iri(G)} { ${iri(`https://example.org/s${n}`)} ${iri('https://example.org/p')} ${integer(n)} } }`, [G]);
const count = async (store: ClusterStore) => Number((await store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH ${iri(G)} { ?s ?p ?o } }`))[0]!.n!.value);

describe('cluster store (WSM_STORE=cluster) on PostgreSQL', function () {
  this.timeout(120_000);
  let url: string;
  const open: ClusterStore[] = [];
  const openStore = async (options: { snapshotAfterBytes?: number; at?: string } = {}) => {
    const store = await openClusterStore(options.at ?? url, { snapshotAfterBytes: options.snapshotAfterBytes ?? 1 << 30, probeMs: 100 });
    open.push(store);
    return store;
  };
  const sql = (text: string, values: unknown[] = []) => sqlAt(url, text, values);

  before(function () { requirePostgres(this); });
  beforeEach(async () => { url = await freshClusterUrl(); });
  afterEach(async () => {
    for (const store of open.splice(0)) await store.close();
  });

  it('a write on one store is read by another at once; conditional writes racing on two stores: one applies', async () => {
    const [a, b] = [await openStore(), await openStore()];
    for (let n = 0; n < 20; n++) {
      await (n % 2 ? a : b).write([insert(n)]);
      expect(await count(n % 2 ? b : a)).to.equal(n + 1);
    }
    const claim = sparql`ASK { GRAPH ${iri(G)} { ${iri('https://example.org/claim')} ?p ?o } }`;
    const claimOp = updateOp(sparql`INSERT DATA { GRAPH ${iri(G)} { ${iri('https://example.org/claim')} ${iri('https://example.org/p')} 1 } }`, [G]);
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).writeIf({ ask: claim, expect: false }, [claimOp])));
    expect(results.filter(Boolean)).to.have.length(1);
    expect(await count(a)).to.equal(21);
    expect(await count(b)).to.equal(21);
  });

  it('a read session (one request) checks the heads once for all its reads, and still sees every write made before it began', async () => {
    const [a, b] = [await openStore(), await openStore()];
    await b.write([insert(1)]);
    const before = a.headLookups;
    const counts = await inReadSession(async () => {
      const seen = [await count(a), await count(a), await count(a)];
      await a.write([insert(2)]);
      seen.push(await count(a));
      return seen;
    });
    expect(counts, 'the write made through another store before the session, then its own write').to.deep.equal([1, 1, 1, 2]);
    expect(a.headLookups - before, 'one lookup for the session').to.equal(1);
    const outside = a.headLookups;
    await count(a);
    await count(a);
    expect(a.headLookups - outside, 'outside a session, a lookup per read').to.equal(2);
    // A new session checks again: a write made through the other store since is seen.
    await b.write([insert(3)]);
    expect(await inReadSession(() => count(a))).to.equal(3);
  });

  it('a large write into empty graphs (a first install) is checked by the replica before it is appended: refused, nothing is appended; accepted, another store reads it whole', async () => {
    const [a, b] = [await openStore(), await openStore()];
    const M = 'https://workspaces.local/workspaces/w1/matrices/m1';
    let data = '';
    for (let i = 0; data.length <= LARGE_WRITE_CHARS * 2; i++) data += `<urn:s:${i}> <urn:p> "line ${i} of a large load" .\n`;
    const lines = data.split('\n').length - 1;
    const load = (text: string) => [{ kind: 'load' as const, replace: true, graph: M, format: 'application/n-triples' as const, data: text }];
    const inM = async (store: ClusterStore) => Number((await store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH ${iri(M)} { ?s ?p ?o } }`))[0]!.n!.value);
    const records = async () => Number((await sql('SELECT count(*) AS n FROM wsm_journal'))[0]!.n);
    const before = await records();
    const refused = await a.write(load(`${data}<http://example.org/a%zz> <urn:p> "refused" .\n`)).then(() => null, (err: unknown) => err);
    expect(refused).to.be.instanceOf(WriteRefusedError);
    expect(await records(), 'nothing appended').to.equal(before);
    expect(await inM(a), 'nothing left in the replica').to.equal(0);
    expect(a.health().writable, 'a refused write is not an outage').to.equal(true);
    await a.write(load(data));
    expect(await records()).to.equal(before + 1);
    expect(await inM(a)).to.equal(lines);
    expect(await inM(b)).to.equal(lines);
  });

  it('a new store loads the newest snapshot and the records after it; records behind the older kept snapshot are pruned', async () => {
    const a = await openStore({ snapshotAfterBytes: 2000 });
    for (let n = 0; n < 30; n++) await a.write([insert(n)]);
    // Past 2,000 bytes of records the store takes one by itself (built in a worker thread, so a moment later).
    for (let i = 0; i < 300 && (await sql('SELECT seq FROM wsm_snapshots')).length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(await sql('SELECT seq FROM wsm_snapshots'), 'an automatic snapshot').to.not.have.length(0);
    for (let n = 30; n < 60; n++) await a.write([insert(n)]);
    await a.snapshot();
    const snapshots = await sql("SELECT seq FROM wsm_snapshots WHERE stream = 'replica' ORDER BY seq");
    expect(await sql("SELECT DISTINCT seq FROM wsm_snapshots ORDER BY seq"), 'parts go with their snapshot').to.deep.equal(snapshots);
    expect(snapshots.length).to.be.within(1, 2);
    const oldest = Number((await sql('SELECT min(seq) AS seq FROM wsm_journal'))[0]!.seq);
    expect(oldest, 'records before the older snapshot are gone').to.be.greaterThan(1);
    await a.write([insert(1000)]);
    const b = await openStore();
    expect(b.info.snapshotSeq).to.be.greaterThan(0);
    expect(b.info.recordsReplayed).to.be.lessThan(61);
    expect(await count(b)).to.equal(61);
  });

  it('a record that fails its checksum is refused: a running store stops writing and keeps reading, a new store does not open', async () => {
    const a = await openStore();
    await a.write([insert(1)]);
    await a.write([insert(2)]);
    const b = await openStore();
    expect(await count(b)).to.equal(2);
    // Record 3, its payload damaged after its checksum was taken.
    const bytes = encodeRecord(3, [insert(3)]);
    bytes[HEADER_BYTES + 10]! ^= 1;
    await sql("INSERT INTO wsm_journal (stream, seq, gseq, record) VALUES ($1, 3, nextval('wsm_order'), $2)", ['service', bytes]);
    await sql('UPDATE wsm_heads SET seq = 3 WHERE stream = $1', ['service']);
    expect(await count(b)).to.equal(2);
    expect(b.health()).to.include({ writable: false, readable: true });
    expect(b.health().reason).to.match(/record 3 .*refused.*checksum/);
    let failure: unknown;
    try {
      await b.write([insert(4)]);
    } catch (err) {
      failure = err;
    }
    expect(failure).to.be.instanceOf(StoreUnavailableError);
    let refused: Error | undefined;
    try {
      await openStore();
    } catch (err) {
      refused = err as Error;
    }
    expect(refused?.message).to.match(/WSM_POSTGRES_URL=.*record 3 .*refused.*checksum/);
    expect(Number((await sql('SELECT count(*) AS n FROM wsm_journal'))[0]!.n)).to.equal(3);
  });

  it('PostgreSQL out of reach while running: reads answer, writes fail as unavailable with a retry time, health says so; all resumes when it is back', async () => {
    const proxy = await cuttableProxy(new URL(url));
    const through = new URL(url);
    through.port = String(proxy.port);
    try {
      const store = await openStore({ at: through.toString() });
      await store.write([insert(1)]);
      await proxy.cut();
      expect(await count(store)).to.equal(1);
      let failure: unknown;
      try {
        await store.write([insert(2)]);
      } catch (err) {
        failure = err;
      }
      expect(failure).to.be.instanceOf(StoreUnavailableError);
      expect((failure as StoreUnavailableError).retryAfterSeconds).to.be.greaterThan(0);
      expect((failure as Error).message).to.match(/WSM_POSTGRES_URL/);
      expect(store.health()).to.include({ writable: false, readable: true });
      expect(await count(store)).to.equal(1);
      await proxy.restore();
      for (let i = 0; i < 200 && !store.health().writable; i++) await new Promise((r) => setTimeout(r, 50));
      expect(store.health().writable).to.equal(true);
      await store.write([insert(2)]);
      expect(await count(store)).to.equal(2);
    } finally {
      await proxy.close();
    }
  });

  it('the service: PostgreSQL out of reach answers writes 503 STORE_UNAVAILABLE with Retry-After and /health 503, reads of loaded data 200, and recovers without a restart', async () => {
    const proxy = await cuttableProxy(new URL(url));
    const through = new URL(url);
    through.port = String(proxy.port);
    const t = await startTestServer({ WSM_STORE: 'cluster', WSM_POSTGRES_URL: through.toString() });
    try {
      const { tokens } = await seedWorkspace(t, 'acme');
      await proxy.cut();
      expect((await t.http.get('/api/v1/workspaces/acme').set(bearer(tokens.owner))).status).to.equal(200);
      const refused = await t.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug: 'later', owner: 'acme-owner' });
      expect(refused.status).to.equal(503);
      expect(refused.body.error.code).to.equal('STORE_UNAVAILABLE');
      expect(Number(refused.headers['retry-after'])).to.be.greaterThan(0);
      expect(JSON.stringify(refused.body)).not.to.match(/postgres|127\.0\.0\.1/i);
      expect((await t.http.get('/health')).status).to.equal(503);
      await proxy.restore();
      let health = 503;
      for (let i = 0; i < 200 && health !== 200; i++) {
        health = (await t.http.get('/health')).status;
        if (health !== 200) await new Promise((r) => setTimeout(r, 100));
      }
      expect(health).to.equal(200);
      expect((await t.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug: 'later', owner: 'acme-owner' })).status).to.equal(201);
    } finally {
      await t.close();
      await proxy.close();
      removeDir(t.dataDir);
    }
  });

  it('the service checks the heads once per request: /metrics counts the lookups, and a request of several reads adds one', async () => {
    const t = await startTestServer({ WSM_STORE: 'cluster', WSM_POSTGRES_URL: url });
    try {
      const { tokens } = await seedWorkspace(t, 'acme');
      const admin = await t.token('admin', { systemAdmin: true });
      const lookups = async () => {
        const res = await t.http.get('/metrics').set(bearer(admin));
        expect(res.status).to.equal(200);
        const line = /^wsm_cluster_head_lookups_total (\d+)$/m.exec(res.text);
        expect(line, 'the counter is shown').to.not.equal(null);
        return Number(line![1]);
      };
      const deltas: number[] = [];
      for (let attempt = 0; attempt < 3; attempt++) {
        const before = await lookups();
        // The bearer token's user, the membership, then the workspace: several reads, one request.
        expect((await t.http.get('/api/v1/workspaces/acme').set(bearer(tokens.owner))).status).to.equal(200);
        deltas.push(await lookups() - before);
      }
      // The request's one lookup and the second /metrics request's own (its authentication reads); a background
      // task (the lease's renewal, the sweep of commands) may add some to an attempt, so the smallest is compared.
      expect(Math.min(...deltas), `lookups per attempt: ${deltas.join(', ')}`).to.equal(2);
    } finally {
      await t.close();
      removeDir(t.dataDir);
    }
  });

  it('the first start of a service on an empty cluster creates the demo workspace (the instance\'s lease record is not data of the service)', async () => {
    const t = await startTestServer({ WSM_STORE: 'cluster', WSM_POSTGRES_URL: url, WSM_DEMO: 'true' });
    try {
      const admin = await t.token('admin', { systemAdmin: true });
      expect((await t.http.get('/api/v1/workspaces/demo').set(bearer(admin))).status).to.equal(200);
      expect(await t.server.services.store.graphNames()).to.not.include('https://workspaces.local/store/instances');
    } finally {
      await t.close();
      removeDir(t.dataDir);
    }
  });

  it('PostgreSQL out of reach at start: `wsm serve` stops with a message naming WSM_POSTGRES_URL, never its password', async () => {
    const dataDir = tempDir();
    try {
      const closed = new URL(url);
      closed.port = '1';
      const run = await runWsm(['serve'], { WSM_DATA_DIR: dataDir, WSM_STORE: 'cluster', WSM_POSTGRES_URL: closed.toString(), PORT: '0', WSM_LOG_LEVEL: 'error' });
      expect(run.code).to.not.equal(0);
      const said = run.stdout + run.stderr;
      expect(said).to.match(/WSM_POSTGRES_URL/);
      expect(said).to.not.include(decodeURIComponent(new URL(url).password));
    } finally {
      removeDir(dataDir);
    }
  });
});
