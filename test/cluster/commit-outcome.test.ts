import { expect } from 'chai';
import pg from 'pg';
import { openClusterStore, clusterPool } from '../../src/store/cluster/open.js';
import type { ClusterStore } from '../../src/store/cluster/cluster-store.js';
import { CommitOutcomeUnknownError, PgLog } from '../../src/store/cluster/log.js';
import { updateOp } from '../../src/store/store.js';
import { encodeRecord } from '../../src/store/journal.js';
import { integer, iri, sparql } from '../../src/rdf/sparql.js';
import { freshClusterUrl, requirePostgres } from '../helpers/cluster.js';
import { droppingProxy } from '../helpers/proxy.js';
import { bearer, removeDir, seedWorkspace, startTestServer } from '../helpers/server.js';

const G = 'https://example.org/g';
const subject = (n: number) => `https://example.org/s${n}`;
const insert = (n: number) => updateOp(sparql`INSERT DATA { GRAPH ${iri(G)} { ${iri(subject(n))} ${iri('https://example.org/p')} ${integer(n)} } }`, [G]);
const count = async (store: ClusterStore) => Number((await store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH ${iri(G)} { ?s ?p ?o } }`))[0]!.n!.value);

/**
 * An append whose connection drops while its statement (its COMMIT) runs:
 * through a proxy that drops the connection before the statement reaches
 * PostgreSQL or after PostgreSQL committed and answered it. The write must
 * answer as it ended (never an error for a committed write) and be in the
 * journal once.
 */
describe('cluster store: an append whose connection drops during its commit (unknown outcome)', function () {
  this.timeout(120_000);
  let url: string;
  let proxy: Awaited<ReturnType<typeof droppingProxy>>;
  let through: string;
  const open: ClusterStore[] = [];
  const openStore = async (at: string) => {
    const store = await openClusterStore(at, { snapshotAfterBytes: 1 << 30, probeMs: 100 });
    open.push(store);
    return store;
  };
  const journal = async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query<{ seq: string; record: Buffer }>("SELECT seq, record FROM wsm_journal WHERE stream = 'service' ORDER BY seq");
      return rows.map((r) => ({ seq: Number(r.seq), text: r.record.toString('latin1') }));
    } finally {
      await client.end();
    }
  };
  const holding = (rows: Array<{ text: string }>, text: string) => rows.filter((r) => r.text.includes(text)).length;

  before(function () { requirePostgres(this); });
  beforeEach(async () => {
    url = await freshClusterUrl();
    proxy = await droppingProxy(new URL(url));
    const u = new URL(url);
    u.port = String(proxy.port);
    through = u.toString();
  });
  afterEach(async () => {
    for (const store of open.splice(0)) await store.close();
    await proxy.close();
  });

  it('dropped after PostgreSQL committed it: the write resolves, in the journal once, applied once', async () => {
    const store = await openStore(through);
    await store.write([insert(0)]);
    proxy.arm({ holding: ['wsm-append', subject(1)], when: 'after' });
    await store.write([insert(1)]);
    expect(proxy.dropped()).to.equal(1);
    const rows = await journal();
    expect(rows.map((r) => r.seq)).to.deep.equal([1, 2]);
    expect(holding(rows, subject(1))).to.equal(1);
    expect(await count(store)).to.equal(2);
    expect(await count(await openStore(url))).to.equal(2);
    await store.write([insert(2)]);
    expect((await journal()).map((r) => r.seq)).to.deep.equal([1, 2, 3]);
  });

  it('dropped before it reached PostgreSQL: appended again, the write resolves, in the journal once', async () => {
    const store = await openStore(through);
    proxy.arm({ holding: ['wsm-append', subject(1)], when: 'before' });
    await store.write([insert(1)]);
    expect(proxy.dropped()).to.equal(1);
    const rows = await journal();
    expect(rows.map((r) => r.seq)).to.deep.equal([1]);
    expect(holding(rows, subject(1))).to.equal(1);
    expect(await count(store)).to.equal(1);
    expect(await count(await openStore(url))).to.equal(1);
  });

  it('a conditional write committed before the drop answers true (its condition is not asked again on its own record)', async () => {
    const store = await openStore(through);
    const claim = sparql`ASK { GRAPH ${iri(G)} { ${iri(subject(7))} ?p ?o } }`;
    proxy.arm({ holding: ['wsm-append', subject(7)], when: 'after' });
    expect(await store.writeIf({ ask: claim, expect: false }, [insert(7)])).to.equal(true);
    expect(proxy.dropped()).to.equal(1);
    expect(await store.writeIf({ ask: claim, expect: false }, [insert(7)])).to.equal(false);
    const rows = await journal();
    expect(rows).to.have.length(1);
    expect(holding(rows, subject(7))).to.equal(1);
  });

  it('another instance took the seq while the connection was down: a head conflict, caught up and appended after it', async () => {
    const store = await openStore(through);
    const other = await openStore(url);
    proxy.arm({ holding: ['wsm-append', subject(1)], when: 'before', then: () => other.write([insert(2)]) });
    await store.write([insert(1)]);
    expect(proxy.dropped()).to.equal(1);
    expect(store.headConflicts).to.equal(1);
    const rows = await journal();
    expect(rows.map((r) => r.seq)).to.deep.equal([1, 2]);
    expect(holding(rows, subject(2))).to.equal(1);
    expect(holding(rows, subject(1))).to.equal(1);
    expect(rows[1]!.text).to.include(subject(1));
    expect(await count(store)).to.equal(2);
    expect(await count(other)).to.equal(2);
  });

  it('PostgreSQL out of reach past the wait: CommitOutcomeUnknownError, not an answer either way', async () => {
    const pool = clusterPool(through);
    const log = new PgLog(pool, { outcomeWaitMs: 1000, retryMs: 100 });
    try {
      await log.ensureSchema();
      proxy.arm({ holding: ['wsm-append'], when: 'before', then: () => proxy.close() });
      let failure: unknown;
      const started = Date.now();
      try {
        await log.append([{ stream: 'service', seq: 1, record: encodeRecord(1, [insert(1)]) }], new Map([['service', 0]]), false);
      } catch (err) {
        failure = err;
      }
      expect(failure).to.be.instanceOf(CommitOutcomeUnknownError);
      expect((failure as Error).message).to.match(/whether record 1 of stream service committed is unknown/);
      expect(Date.now() - started).to.be.at.least(1000);
      expect(await journal()).to.deep.equal([]);
    } finally {
      await pool.end();
    }
  });

  it('the service: a workspace created while its commit\'s answer is lost answers 201, exists once, and a second create answers 409', async () => {
    const t = await startTestServer({ WSM_STORE: 'cluster', WSM_POSTGRES_URL: through });
    try {
      const { tokens } = await seedWorkspace(t, 'acme');
      proxy.arm({ holding: ['wsm-append', 'dropped-commit'], when: 'after' });
      const created = await t.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug: 'dropped-commit', owner: 'acme-owner' });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      expect(proxy.dropped()).to.equal(1);
      expect(holding(await journal(), '"dropped-commit')).to.equal(1);
      expect((await t.http.get('/api/v1/workspaces/dropped-commit').set(bearer(tokens.owner))).status).to.equal(200);
      expect((await t.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug: 'dropped-commit', owner: 'acme-owner' })).status).to.equal(409);
    } finally {
      await t.close();
      removeDir(t.dataDir);
    }
  });
});
