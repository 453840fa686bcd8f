import { expect } from 'chai';
import http from 'node:http';
import net from 'node:net';
import { bearer, removeDir, seedWorkspace, startTestServer, tempDir, type TestServer, type Tokens } from '../helpers/server.js';
import { freshClusterUrl, requirePostgres, sqlAt } from '../helpers/cluster.js';
import { sample } from '../helpers/metrics.js';
import type { ClusterStore } from '../../src/store/cluster/cluster-store.js';
import { KEEP_ALIVE_MS } from '../../src/http/placement-forward.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What a stand-in owner does with a request: answers it, closes its connection without a byte (as a server closing an idle connection does), or sends part of an answer and closes it. */
type Behaviour = 'answer' | 'close' | 'partial';

/**
 * A stand-in for the instance holding a workspace: an HTTP server that
 * records the requests it gets (with the connection each came on) and does
 * with each what `behave` says. It listens through a TCP server of its own
 * so that `stopListening` refuses new connections and keeps those open.
 */
async function standInOwner(behave: (seen: { connection: number; onConnection: number }) => Behaviour) {
  const requests: Array<{ method: string; url: string; connection: number; body: string }> = [];
  let connections = 0;
  const ids = new WeakMap<net.Socket, { id: number; count: number }>();
  const server = http.createServer((req, res) => {
    const socket = ids.get(req.socket)!;
    socket.count++;
    const what = behave({ connection: socket.id, onConnection: socket.count });
    if (what === 'close') {
      requests.push({ method: req.method!, url: req.url!, connection: socket.id, body: '' });
      req.socket.destroy();
      return;
    }
    if (what === 'partial') {
      requests.push({ method: req.method!, url: req.url!, connection: socket.id, body: '' });
      req.socket.end('HTTP/1.1 200 OK\r\nContent-Type: application/js');
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      requests.push({ method: req.method!, url: req.url!, connection: socket.id, body });
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ success: true, data: { standIn: true, connection: socket.id, body } }));
    });
  });
  const tcp = net.createServer((socket) => {
    ids.set(socket, { id: ++connections, count: 0 });
    server.emit('connection', socket);
  });
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(tcp.address() as net.AddressInfo).port}`;
  return {
    url,
    requests,
    connections: () => connections,
    /** Refuses new connections from now on (the open ones stay: the server's close completes once they have all closed). */
    stopListening: () => { tcp.close(); },
    close: async () => {
      server.closeAllConnections();
      if (tcp.listening) tcp.close();
    },
  };
}

/**
 * Forwarding over kept connections (docs/cluster.md, "Placement",
 * "Forwarding"): two instances in this process, and stand-in owners whose
 * URL a test writes into a workspace's lease.
 */
describe('placement: forwarded requests reuse connections to the owner; a kept connection the owner closed is replaced', function () {
  this.timeout(300_000);
  let url: string;
  const dirs: string[] = [];
  const instances: TestServer[] = [];
  let tokens: Tokens;
  const placementOf = (i: number) => (instances[i]!.server.services.store as ClusterStore).placement!;
  const ownerRow = async (id: string) => (await sqlAt(url, 'SELECT instance, epoch::int AS epoch, url FROM wsm_owners WHERE stream = $1', [`ws:${id}`]))[0];
  const metric = async (i: number, name: string) => sample((await instances[i]!.http.get('/metrics').set(bearer(tokens.root))).text, name);
  const counts = async (i: number) => ({
    forwarded: await metric(i, 'wsm_cluster_requests_forwarded_total'),
    connections: await metric(i, 'wsm_cluster_forward_connections_total'),
    retries: await metric(i, 'wsm_cluster_forward_retries_total'),
    failures: await metric(i, 'wsm_cluster_forward_failures_total'),
  });
  const gained = async (i: number, before: Awaited<ReturnType<typeof counts>>) => {
    const now = await counts(i);
    return { forwarded: now.forwarded - before.forwarded, connections: now.connections - before.connections, retries: now.retries - before.retries, failures: now.failures - before.failures };
  };
  /** A new workspace (created on instance 0, which holds it) whose lease is then given to a stand-in at `standIn`, live for an hour. */
  const ownedBy = async (slug: string, standIn: string): Promise<string> => {
    const created = await instances[0]!.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug, owner: 'acme-owner' });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const id = created.body.data.id as string;
    await sqlAt(url, "UPDATE wsm_owners SET instance = 'stand-in', url = $2, epoch = epoch + 1, expires_at = now() + interval '1 hour' WHERE stream = $1", [`ws:${id}`, standIn]);
    // Instance 0 finds its lease gone at its next renewal.
    await placementOf(0).renew();
    return id;
  };

  before(async function () {
    requirePostgres(this);
    url = await freshClusterUrl();
    for (let i = 0; i < 2; i++) dirs.push(tempDir());
    const env = { WSM_STORE: 'cluster', WSM_POSTGRES_URL: url, WSM_CLUSTER_PLACEMENT: 'lease', WSM_CLUSTER_LEASE_MS: '3000' };
    instances.push(...await Promise.all(dirs.map((dir) => startTestServer(env, dir))));
    ({ tokens } = await seedWorkspace(instances[0]!, 'acme'));
  });
  after(async () => {
    for (const t of instances) await t.close();
    for (const dir of dirs) removeDir(dir);
  });

  it('twenty forwards, reads and writes one after another, reach the owner over one or two connections; a forward after the owner\'s keep-alive timeout opens a new one and succeeds', async () => {
    const before = await counts(1);
    for (let n = 0; n < 20; n++) {
      // A request reaching the owner directly now and then: the workspace stays there (it would move to the instance its requests all come from).
      if (n % 5 === 4) expect((await instances[0]!.http.get('/api/v1/workspaces/acme').set(bearer(tokens.owner))).headers['x-wsm-owner']).to.equal(undefined);
      const res = n % 2 === 0
        ? await instances[1]!.http.get('/api/v1/workspaces/acme').set(bearer(tokens.owner))
        : await instances[1]!.http.put(`/api/v1/workspaces/acme/members/kept-${n}`).set(bearer(tokens.owner)).send({});
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.headers['x-wsm-owner']).to.equal(instances[0]!.url);
    }
    const sent = await gained(1, before);
    expect(sent.forwarded).to.equal(20);
    expect(sent.connections).to.be.within(1, 2);
    expect(sent.failures).to.equal(0);

    // Past the owner's keep-alive timeout: the kept connection was closed (by the forwarder first); the next forward opens one.
    await sleep(KEEP_ALIVE_MS + 500);
    const idle = await counts(1);
    const res = await instances[1]!.http.put('/api/v1/workspaces/acme/members/after-idle').set(bearer(tokens.owner)).send({});
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.headers['x-wsm-owner']).to.equal(instances[0]!.url);
    expect(await gained(1, idle)).to.deep.equal({ forwarded: 1, connections: 1, retries: 0, failures: 0 });
    expect((await instances[0]!.http.get('/api/v1/workspaces/acme').set(bearer(await instances[0]!.token('after-idle')))).status).to.equal(200);
  });

  it('a request sent on a kept connection the owner closes without answering is sent again on a new one, body and all; a failure after part of the answer is not (502)', async () => {
    let closeReused: Behaviour = 'close';
    const owner = await standInOwner(({ onConnection }) => (onConnection > 1 ? closeReused : 'answer'));
    try {
      const id = await ownedBy('kept-closed', owner.url);
      const before = await counts(1);
      const first = await instances[1]!.http.get('/api/v1/workspaces/kept-closed').set(bearer(tokens.owner));
      expect(first.status).to.equal(200);
      expect(first.headers['x-wsm-owner']).to.equal(owner.url);
      // Sent on the kept connection, which the stand-in closes on receiving it: sent again on a new connection, with its body.
      const second = await instances[1]!.http.put('/api/v1/workspaces/kept-closed/members/someone').set(bearer(tokens.owner)).send({ note: 'sent twice' });
      expect(second.status, JSON.stringify(second.body)).to.equal(200);
      expect(second.body.data).to.deep.equal({ standIn: true, connection: 2, body: JSON.stringify({ note: 'sent twice' }) });
      expect(owner.requests.map((r) => [r.method, r.connection])).to.deep.equal([['GET', 1], ['PUT', 1], ['PUT', 2]]);
      expect(await gained(1, before)).to.deep.equal({ forwarded: 2, connections: 2, retries: 1, failures: 0 });

      // Part of an answer, then the connection closes: the owner took the request, its outcome is unknown. Not sent again.
      closeReused = 'partial';
      expect((await instances[1]!.http.get('/api/v1/workspaces/kept-closed').set(bearer(tokens.owner))).status).to.equal(200);
      const partial = await instances[1]!.http.put('/api/v1/workspaces/kept-closed/members/other').set(bearer(tokens.owner)).send({});
      expect(partial.status).to.equal(502);
      expect(partial.body.error.code).to.equal('BAD_GATEWAY');
      expect(owner.requests.filter((r) => r.url.endsWith('/other'))).to.have.length(1);
      expect((await gained(1, before)).retries).to.equal(1);
      expect(await ownerRow(id)).to.deep.include({ instance: 'stand-in', url: owner.url });
    } finally {
      await owner.close();
    }
  });

  it('a kept connection that breaks under a request, to an owner then found gone (refused): taken over; a read is served where it arrived, a write answers 502 (the owner may have taken it) and is served there when sent again', async () => {
    for (const [slug, write] of [['gone-read', false], ['gone-write', true]] as const) {
      const owner = await standInOwner(({ onConnection }) => (onConnection > 1 ? 'close' : 'answer'));
      try {
        const id = await ownedBy(slug, owner.url);
        const seen = (await ownerRow(id))!;
        expect((await instances[1]!.http.get(`/api/v1/workspaces/${slug}`).set(bearer(tokens.owner))).headers['x-wsm-owner']).to.equal(owner.url);
        // New connections refused from now on; the kept one stays open until a request comes on it.
        owner.stopListening();
        const res = write
          ? await instances[1]!.http.put(`/api/v1/workspaces/${slug}/members/acme-member`).set(bearer(tokens.owner)).send({})
          : await instances[1]!.http.get(`/api/v1/workspaces/${slug}`).set(bearer(tokens.owner));
        expect(owner.requests.map((r) => r.connection), slug).to.deep.equal([1, 1]);
        expect(await ownerRow(id), slug).to.deep.include({ instance: placementOf(1).instance, epoch: Number(seen.epoch) + 1 });
        if (write) {
          expect(res.status, JSON.stringify(res.body)).to.equal(502);
          expect(res.body.error.code).to.equal('BAD_GATEWAY');
          const again = await instances[1]!.http.put(`/api/v1/workspaces/${slug}/members/acme-member`).set(bearer(tokens.owner)).send({});
          expect(again.status, JSON.stringify(again.body)).to.equal(200);
          expect(again.headers['x-wsm-owner']).to.equal(undefined);
        } else {
          expect(res.status, JSON.stringify(res.body)).to.equal(200);
          expect(res.headers['x-wsm-owner']).to.equal(undefined);
          expect(res.body.data.slug).to.equal(slug);
        }
      } finally {
        await owner.close();
      }
    }
  });
});
