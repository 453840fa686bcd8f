import { expect } from 'chai';
import { openClusterStore } from '../../src/store/cluster/open.js';
import type { ClusterStore } from '../../src/store/cluster/cluster-store.js';
import { NotOwnerError } from '../../src/store/cluster/placement.js';
import { StoreUnavailableError, updateOp, type WriteOp } from '../../src/store/store.js';
import { Graphs } from '../../src/rdf/graphs.js';
import { integer, iri, sparql } from '../../src/rdf/sparql.js';
import { freshClusterUrl, requirePostgres, sqlAt } from '../helpers/cluster.js';

const BASE = 'https://placement.example/';
const graphs = new Graphs(BASE);
const P = 'https://example.org/p';
const insertInto = (graph: string, n: number): WriteOp =>
  updateOp(sparql`INSERT DATA { GRAPH ${iri(graph)} { ${iri(`https://example.org/s${n}`)} ${iri(P)} ${integer(n)} } }`, [graph]);
const countIn = async (store: ClusterStore, graph: string) =>
  Number((await store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH ${iri(graph)} { ?s ?p ?o } }`))[0]!.n!.value);

/**
 * Placement (docs/cluster.md, "Placement"): a workspace's stream is written
 * only under a lease kept in PostgreSQL, and the log refuses an append whose
 * lease was taken over or ended.
 */
describe('cluster store: placement (leases on workspace streams, fencing in the log)', function () {
  this.timeout(120_000);
  let url: string;
  const open: ClusterStore[] = [];
  /** Leases long enough that none ends unless the test ends it. */
  const openStore = async (leaseMs = 60_000) => {
    const store = await openClusterStore(url, { snapshotAfterBytes: 1 << 30, probeMs: 100, baseIri: BASE, placement: { leaseMs, idleMs: 3_600_000 } });
    open.push(store);
    return store;
  };
  const rows = async (stream: string) => Number((await sqlAt(url, 'SELECT count(*) AS n FROM wsm_journal WHERE stream = $1', [stream]))[0]!.n);
  const ownerRow = async (stream: string) => (await sqlAt(url, 'SELECT instance, epoch::int AS epoch FROM wsm_owners WHERE stream = $1', [stream]))[0];
  const refusal = async (write: Promise<unknown>): Promise<unknown> => write.then(() => { throw new Error('the write was acknowledged'); }, (err: unknown) => err);

  before(function () { requirePostgres(this); });
  beforeEach(async () => { url = await freshClusterUrl(); });
  afterEach(async () => {
    for (const store of open.splice(0)) await store.close();
  });

  it('the store that writes a workspace first holds its lease; another store\'s write there is refused and appends nothing; both write the service\'s graphs', async () => {
    const [a, b] = [await openStore(), await openStore()];
    await a.write([insertInto(graphs.iam('w1'), 1)]);
    expect(await ownerRow('ws:w1')).to.deep.equal({ instance: a.placement!.instance, epoch: 1 });

    const err = await refusal(b.write([insertInto(graphs.iam('w1'), 2)]));
    expect(err).to.be.instanceOf(NotOwnerError).and.instanceOf(StoreUnavailableError);
    expect((err as NotOwnerError).retryAfterSeconds).to.equal(1);
    // Over the service's stream and the workspace's (as creating a workspace writes): refused in both.
    expect(await refusal(b.write([insertInto(graphs.system, 3), insertInto(graphs.iam('w1'), 3)]))).to.be.instanceOf(NotOwnerError);
    expect(await rows('ws:w1')).to.equal(1);
    expect(await rows('service')).to.equal(0);

    // The service's stream has no owner; a workspace nobody holds is taken by its first writer.
    await b.write([insertInto(graphs.system, 4)]);
    await a.write([insertInto(graphs.system, 5)]);
    await b.write([insertInto(graphs.iam('w2'), 6)]);
    expect(await ownerRow('ws:w2')).to.deep.equal({ instance: b.placement!.instance, epoch: 1 });
    // Reads need no lease: each store reads what the other wrote.
    expect(await countIn(b, graphs.iam('w1'))).to.equal(1);
    expect(await countIn(a, graphs.iam('w2'))).to.equal(1);
    expect(await countIn(a, graphs.system)).to.equal(2);
    expect(a.placement!.streams()).to.deep.equal(['ws:w1']);
    expect(b.placement!.streams()).to.deep.equal(['ws:w2']);
  });

  it('once a lease ended another store takes the workspace over and writes; the first store\'s next write is refused by the log and appends nothing', async () => {
    const [a, b] = [await openStore(), await openStore()];
    await a.write([insertInto(graphs.iam('w1'), 1)]);
    // The lease ends as it would for an instance paused past it (no renewal): by PostgreSQL's clock.
    await sqlAt(url, "UPDATE wsm_owners SET expires_at = now() WHERE stream = 'ws:w1'");
    await b.write([insertInto(graphs.iam('w1'), 2)]);
    expect(await ownerRow('ws:w1')).to.deep.equal({ instance: b.placement!.instance, epoch: 2 });

    // `a` still believes it holds the lease (it lasts a minute by its clock): its append carries epoch 1 and the log refuses it.
    expect(a.placement!.holds('ws:w1')).to.equal(true);
    const err = await refusal(a.write([insertInto(graphs.iam('w1'), 3)]));
    expect(err).to.be.instanceOf(NotOwnerError);
    expect(a.placement!.counts().fenced).to.equal(1);
    expect(a.placement!.holds('ws:w1')).to.equal(false);
    expect(await rows('ws:w1')).to.equal(2);
    expect(await countIn(a, graphs.iam('w1'))).to.equal(2);

    // The same through a write over two streams (its own transaction): b's lease taken over by c while b believes it holds it.
    const c = await openStore();
    await sqlAt(url, "UPDATE wsm_owners SET expires_at = now() WHERE stream = 'ws:w1'");
    await c.write([insertInto(graphs.iam('w1'), 4)]);
    expect(await refusal(b.write([insertInto(graphs.system, 5), insertInto(graphs.iam('w1'), 5)]))).to.be.instanceOf(NotOwnerError);
    expect(b.placement!.counts().fenced).to.equal(1);
    expect(await rows('ws:w1')).to.equal(3);
    expect(await rows('service'), 'nothing appended in the other stream either').to.equal(0);
    expect(await countIn(c, graphs.system)).to.equal(0);
  });

  it('a race for a free lease has one winner: ten takes over three stores, and concurrent first writes', async () => {
    const stores = [await openStore(), await openStore(), await openStore()];
    const got = await Promise.all(Array.from({ length: 10 }, (_, i) => stores[i % 3]!.placement!.acquire('ws:raced')));
    const row = (await ownerRow('ws:raced'))!;
    expect(row.epoch).to.equal(1);
    const winner = stores.find((s) => s.placement!.instance === row.instance)!;
    got.forEach((g, i) => {
      if (stores[i % 3] === winner) expect(g).to.deep.equal({ epoch: 1 });
      else expect(g).to.have.nested.property('owner.instance', row.instance);
    });
    expect(stores.filter((s) => s.placement!.holds('ws:raced'))).to.deep.equal([winner]);

    const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => stores[i % 3]!.write([insertInto(graphs.packages('contested'), i)])));
    const owner = (await ownerRow('ws:contested'))!;
    results.forEach((r, i) => {
      const mine = stores[i % 3]!.placement!.instance === owner.instance;
      expect(r.status, `write ${i}`).to.equal(mine ? 'fulfilled' : 'rejected');
      if (r.status === 'rejected') expect(r.reason).to.be.instanceOf(NotOwnerError);
    });
    expect(await rows('ws:contested')).to.equal(4);
    expect(await countIn(stores[1]!, graphs.packages('contested'))).to.equal(4);
  });

  it('an owner that cannot be reached is taken over at the epoch it was seen (even while its lease runs); its next write is refused by the log', async () => {
    const [a, b] = [await openStore(), await openStore()];
    await a.write([insertInto(graphs.iam('w1'), 1)]);
    // At an epoch that is not the holder's, nothing is taken.
    expect(await b.placement!.acquire('ws:w1', 7)).to.have.nested.property('owner.instance', a.placement!.instance);
    expect(await b.placement!.acquire('ws:w1', 1)).to.deep.equal({ epoch: 2 });
    expect(b.placement!.counts()).to.include({ takeovers: 1, held: 1 });
    await b.write([insertInto(graphs.iam('w1'), 2)]);
    expect(await refusal(a.write([insertInto(graphs.iam('w1'), 3)]))).to.be.instanceOf(NotOwnerError);
    expect(a.placement!.counts().fenced).to.equal(1);
    expect(await rows('ws:w1')).to.equal(2);
  });

  it('a store at the address of a previous one that was killed holding leases takes them back at once (one epoch more); the previous one\'s appends are refused', async () => {
    const a = await openStore();
    await a.placement!.setUrl('http://127.0.0.1:8081');
    await a.write([insertInto(graphs.iam('w1'), 1), insertInto(graphs.iam('w2'), 1)]);
    const other = await openStore();
    await other.placement!.setUrl('http://127.0.0.1:8082');
    // The next process at the same address (the previous one never released its leases: killed).
    const b = await openStore();
    await b.placement!.setUrl('http://127.0.0.1:8081');
    expect(b.placement!.streams().sort()).to.deep.equal(['ws:w1', 'ws:w2']);
    expect(await ownerRow('ws:w1')).to.deep.equal({ instance: b.placement!.instance, epoch: 2 });
    expect(other.placement!.streams()).to.deep.equal([]);
    await b.write([insertInto(graphs.iam('w1'), 2)]);
    expect(await refusal(a.write([insertInto(graphs.iam('w2'), 3)]))).to.be.instanceOf(NotOwnerError);
    expect(a.placement!.counts().fenced).to.equal(1);
    expect(await rows('ws:w2')).to.equal(1);
  });

  it('a closing store releases its leases: another takes its workspaces at once; an idle lease is released at a renewal', async () => {
    const a = await openStore();
    const b = await openClusterStore(url, { snapshotAfterBytes: 1 << 30, probeMs: 100, baseIri: BASE, placement: { leaseMs: 60_000, idleMs: 1 } });
    open.push(b);
    await a.write([insertInto(graphs.iam('w1'), 1)]);
    await a.close();
    await b.write([insertInto(graphs.iam('w1'), 2)]);
    expect(await ownerRow('ws:w1')).to.deep.equal({ instance: b.placement!.instance, epoch: 2 });
    // Unused for longer than `idleMs`: released at the next renewal, so a third store takes it.
    await new Promise((r) => setTimeout(r, 5));
    await b.placement!.renew();
    expect(b.placement!.streams()).to.deep.equal([]);
    const c = await openStore();
    await c.write([insertInto(graphs.iam('w1'), 3)]);
    expect(await ownerRow('ws:w1')).to.deep.equal({ instance: c.placement!.instance, epoch: 3 });
    expect(await countIn(c, graphs.iam('w1'))).to.equal(3);
  });

  it('a lease is renewed while in use: it outlives its length', async () => {
    const a = await openStore(2000);
    const b = await openStore(2000);
    await a.write([insertInto(graphs.iam('w1'), 1)]);
    // Writes spread over two lease lengths; b, meanwhile, never finds the lease ended.
    for (let n = 2; n < 8; n++) {
      await new Promise((r) => setTimeout(r, 700));
      await a.write([insertInto(graphs.iam('w1'), n)]);
      expect(await b.placement!.acquire('ws:w1')).to.have.nested.property('owner.instance', a.placement!.instance);
    }
    expect((await ownerRow('ws:w1'))!.epoch).to.equal(1);
  });
});
