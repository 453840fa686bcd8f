import { expect } from 'chai';
import { createHash } from 'node:crypto';
import http from 'node:http';
import type net from 'node:net';
import { bearer, removeDir, seedWorkspace, startTestServer, tempDir, type TestServer, type Tokens } from '../helpers/server.js';
import { freshClusterUrl, requirePostgres, sqlAt } from '../helpers/cluster.js';
import { tinyPackage } from '../helpers/packages.js';
import { spawnInstance } from '../helpers/instances.js';
import type { CommandJson } from '../helpers/lifecycle.js';

const LEASE_MS = 3000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A lifecycle command whose instance loses the workspace's lease against
 * its will (docs/cluster.md, "Placement"): two instances in this process,
 * installing from an HTTP registry that holds the archive's download until
 * the test lets it go, so the command is still running when the lease goes.
 */
describe('placement: a lifecycle command whose instance loses the workspace\'s lease is failed by the new holder and stopped where it ran', function () {
  this.timeout(300_000);
  let url: string;
  const dirs: string[] = [];
  const instances: TestServer[] = [];
  let tokens: Tokens;
  let acme: { id: string; slug: string };
  let registry: http.Server;
  let archive: Buffer;
  /** While true, a download of the archive is held (answered only once `hold` is false again and the test lets it go). */
  let hold = true;
  const downloads: Array<{ res: http.ServerResponse; closed: boolean; answered: boolean }> = [];
  let env: Record<string, string>;

  const command = async (i: number, id: string, ws = 'acme') => {
    const res = await instances[i]!.http.get(`/api/v1/packages/${ws}/commands/${id}`).set(bearer(tokens.root));
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return { command: res.body.data as CommandJson, servedBy: res.headers['x-wsm-owner'] as string | undefined };
  };
  const eventsOn = async (i: number, id: string, ws = 'acme') => {
    const res = await instances[i]!.http.get(`/api/v1/packages/${ws}/commands/${id}/events`).set(bearer(tokens.root));
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res.body.data as Array<{ level: string; message: string }>;
  };
  /** Polls until `check` answers something, for at most `ms`. */
  const within = async <T>(ms: number, what: string, check: () => Promise<T | undefined>): Promise<T> => {
    const deadline = performance.now() + ms;
    for (;;) {
      const got = await check();
      if (got !== undefined) return got;
      if (performance.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
      await sleep(50);
    }
  };
  const ownerRow = async (id: string) => (await sqlAt(url, 'SELECT instance, epoch::int AS epoch FROM wsm_owners WHERE stream = $1', [`ws:${id}`]))[0];
  const placementOf = (i: number) => (instances[i]!.server.services.store as unknown as { placement: { instance: string } }).placement;

  before(async function () {
    requirePostgres(this);
    url = await freshClusterUrl();
    archive = await tinyPackage({ name: 'slow', version: '1.0.0' });
    const checksum = createHash('sha256').update(archive).digest('hex');
    registry = http.createServer((req, res) => {
      const m = /^\/api\/v1\/registry\/packages\/acme-pub\/slow(?:\/([^/]+)\/archive)?$/.exec(req.url ?? '');
      if (!m) { res.writeHead(404).end(); return; }
      if (!m[1]) {
        res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ versions: [{ version: '1.0.0', engineVersion: '>=1.0 <2.0', publishedAt: null }] }));
        return;
      }
      const answer = () => res.writeHead(200, { 'Content-Type': 'application/gzip', 'X-Archive-Checksum': `sha256:${checksum}` }).end(archive);
      if (!hold) return answer();
      const download = { res, closed: false, answered: false };
      downloads.push(download);
      res.on('close', () => { download.closed = true; });
    });
    await new Promise<void>((resolve) => registry.listen(0, '127.0.0.1', resolve));
    const registryUrl = `http://127.0.0.1:${(registry.address() as net.AddressInfo).port}`;
    for (let i = 0; i < 3; i++) dirs.push(tempDir());
    // Leases on commands as short as those on workspaces: the sweeps come every 1.5 s.
    env = { WSM_STORE: 'cluster', WSM_POSTGRES_URL: url, WSM_CLUSTER_PLACEMENT: 'lease', WSM_CLUSTER_LEASE_MS: String(LEASE_MS), WSM_LEASE_MS: String(LEASE_MS), WSM_REGISTRY: registryUrl };
    instances.push(...await Promise.all(dirs.slice(0, 2).map((dir) => startTestServer(env, dir))));
    ({ tokens, workspace: acme } = await seedWorkspace(instances[0]!, 'acme'));
  });
  after(async () => {
    for (const t of instances) await t.close();
    for (const dir of dirs) removeDir(dir);
    registry.closeAllConnections();
    registry.close();
  });

  it('an install running on A when B takes the workspace\'s lease: failed "interrupted" as B reads it within a few lease periods, A\'s download stopped, and the package installs again', async () => {
    expect(await ownerRow(acme.id)).to.deep.include({ instance: placementOf(0).instance });
    const accepted = await instances[0]!.http.post('/api/v1/packages/acme/registry/acme-pub/slow/install').set(bearer(tokens.root)).send({});
    expect(accepted.status, JSON.stringify(accepted.body)).to.equal(202);
    const id = accepted.body.data.id as string;
    // Running on A: in progress, its download held by the registry, its events written.
    await within(30_000, 'the download begins', async () => (downloads.length > 0 ? true : undefined));
    await within(30_000, 'in progress with its download event', async () => {
      const { command: c } = await command(0, id);
      return c.status === 'in_progress' && (await eventsOn(0, id)).some((e) => /Downloading/.test(e.message)) ? true : undefined;
    });

    // A's lease on the workspace ends against its will (as when it did not renew it: PostgreSQL's clock); B's next request takes it.
    await sqlAt(url, 'UPDATE wsm_owners SET expires_at = now() WHERE stream = $1', [`ws:${acme.id}`]);
    const taken = await command(1, id);
    expect(taken.servedBy, 'served by B, which took the lease').to.equal(undefined);
    expect(await ownerRow(acme.id)).to.deep.include({ instance: placementOf(1).instance });

    // B fails the command A claimed (A can no longer write it), within a few lease periods.
    const failed = await within(5 * LEASE_MS, 'the command failed on B', async () => {
      const { command: c } = await command(1, id);
      return c.status === 'failed' ? c : undefined;
    });
    expect(failed.errorMessage).to.match(/^Interrupted: .*lost its lease on the workspace/);
    const events = await eventsOn(1, id);
    expect(events.at(-1)).to.deep.include({ level: 'ERROR' });
    expect(events.at(-1)!.message).to.match(/^Interrupted/);

    // A stops the command: its held download is given up (not waited for, not retried).
    await within(5 * LEASE_MS, 'A gave up the download', async () => (downloads[0]!.closed ? true : undefined));
    expect(downloads).to.have.length(1);

    // The package installs again, through A (forwarded to B, which holds the workspace now).
    hold = false;
    const again = await instances[0]!.http.post('/api/v1/packages/acme/registry/acme-pub/slow/install').set(bearer(tokens.root)).send({});
    expect(again.status, JSON.stringify(again.body)).to.equal(202);
    expect(again.headers['x-wsm-owner']).to.equal(instances[1]!.url);
    const done = await within(60_000, 'the second install ends', async () => {
      const { command: c } = await command(1, again.body.data.id as string);
      return c.status === 'completed' || c.status === 'failed' ? c : undefined;
    });
    expect(done.status, JSON.stringify(done)).to.equal('completed');
    // The first command is still as B failed it: nothing A did afterwards reached it.
    for (const i of [0, 1]) {
      const { command: first } = await command(i, id);
      expect(first).to.deep.include({ status: 'failed', errorMessage: failed.errorMessage });
      expect(await eventsOn(i, id), `instance ${i}`).to.deep.equal(events);
    }
  });

  it('the instance running the install is paused (SIGSTOP) past its lease and another takes the workspace: failed there; once resumed, the paused one stops the command and writes nothing of it', async () => {
    const a = await spawnInstance(env, dirs[2]!);
    let resumed = false;
    try {
      hold = true;
      downloads.length = 0;
      const created = await a.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug: 'paused', owner: 'acme-owner' });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const ws = created.body.data.id as string;
      const accepted = await a.http.post('/api/v1/packages/paused/registry/acme-pub/slow/install').set(bearer(tokens.root)).send({});
      expect(accepted.status, JSON.stringify(accepted.body)).to.equal(202);
      const id = accepted.body.data.id as string;
      await within(30_000, 'the download begins', async () => (downloads.length > 0 ? true : undefined));
      await within(30_000, 'in progress with its download event', async () => {
        const { command: c, servedBy } = await command(1, id, 'paused');
        expect(servedBy, 'forwarded to the child, which holds the workspace').to.equal(a.url);
        return c.status === 'in_progress' && (await eventsOn(1, id, 'paused')).some((e) => /Downloading/.test(e.message)) ? true : undefined;
      });
      const rows = async () => Number((await sqlAt(url, 'SELECT count(*) AS n FROM wsm_journal WHERE stream = $1', [`ws:${ws}`]))[0]!.n);

      a.child.kill('SIGSTOP');
      while ((await sqlAt(url, 'SELECT expires_at > now() AS live FROM wsm_owners WHERE stream = $1', [`ws:${ws}`]))[0]!.live) await sleep(100);
      // The next request for the workspace takes it (its owner's lease ended), and the command is failed there.
      const failed = await within(5 * LEASE_MS, 'the command failed on instance 1', async () => {
        const { command: c, servedBy } = await command(1, id, 'paused');
        expect(servedBy).to.equal(undefined);
        return c.status === 'failed' ? c : undefined;
      });
      expect(failed.errorMessage).to.match(/^Interrupted: .*lost its lease on the workspace/);
      expect(await ownerRow(ws)).to.deep.include({ instance: placementOf(1).instance });
      const events = await eventsOn(1, id, 'paused');
      const journal = await rows();

      a.child.kill('SIGCONT');
      resumed = true;
      // Resumed, it finds its lease gone and another instance holding the workspace: it stops the command (its download given up).
      await within(5 * LEASE_MS, 'the resumed instance gave up the download', async () => (downloads[0]!.closed ? true : undefined));
      hold = false;
      const again = await a.http.post('/api/v1/packages/paused/registry/acme-pub/slow/install').set(bearer(tokens.root)).send({});
      expect(again.status, JSON.stringify(again.body)).to.equal(202);
      expect(again.headers['x-wsm-owner'], 'forwarded to the holder').to.equal(instances[1]!.url);
      const done = await within(60_000, 'the second install ends', async () => {
        const { command: c } = await command(1, again.body.data.id as string, 'paused');
        return c.status === 'completed' || c.status === 'failed' ? c : undefined;
      });
      expect(done.status, JSON.stringify(done)).to.equal('completed');
      // The first command as the holder failed it; of the workspace's journal since, only the holder's second install.
      expect((await command(0, id, 'paused')).command).to.deep.include({ status: 'failed', errorMessage: failed.errorMessage });
      expect(await eventsOn(0, id, 'paused')).to.deep.equal(events);
      const sinceRows = await sqlAt(url, 'SELECT record FROM wsm_journal WHERE stream = $1 AND seq > $2', [`ws:${ws}`, journal]);
      expect(sinceRows.every((r) => !String(r.record).includes(id)), 'nothing written to the first command since it failed').to.equal(true);
    } finally {
      if (!resumed) a.child.kill('SIGCONT');
      await a.kill('SIGKILL');
    }
  });
});
