import { expect } from 'chai';
import path from 'node:path';
import { bearer, removeDir, seedWorkspace, startTestServer, tempDir, type TestServer } from '../helpers/server.js';
import { freshClusterUrl, requirePostgres } from '../helpers/cluster.js';
import { spawnInstance } from '../helpers/instances.js';
import { runWsm } from '../helpers/cli.js';
import { tinyPackage } from '../helpers/packages.js';
import { publish } from '../helpers/lifecycle.js';

/** Short, so the test sees a lease end; the instances renew every third of it. */
const LEASE_MS = 5000;

/**
 * Three service instances on one PostgreSQL (WSM_STORE=cluster), each with
 * a data directory of its own (nothing shared through files: the issuer key
 * comes from PostgreSQL), one registry directory; one more instance runs as
 * a child process so it can be killed.
 */
const variants: Array<[string, Record<string, string>]> = [
  ['', {}],
  // Every workspace let go a second after its last use, or at once past the budget (docs/cluster.md, "Residency").
  [', each holding only the workspaces in use', { WSM_CLUSTER_RESIDENT_QUADS: '1000', WSM_CLUSTER_IDLE_SECONDS: '1' }],
  // Each workspace written only by the instance holding its lease, the others forwarding its requests there (docs/cluster.md, "Placement").
  [', each workspace placed on one of them', { WSM_CLUSTER_PLACEMENT: 'lease' }],
  [', placed and resident', { WSM_CLUSTER_PLACEMENT: 'lease', WSM_CLUSTER_RESIDENT_QUADS: '1000', WSM_CLUSTER_IDLE_SECONDS: '1' }],
];

for (const [variant, extra] of variants) describe(`three service instances on one PostgreSQL (WSM_STORE=cluster)${variant}`, function () {
  this.timeout(600_000);
  let url: string;
  const dirs: string[] = [];
  const instances: TestServer[] = [];
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  const statuses = (responses: Array<{ status: number }>) => responses.map((r) => r.status).sort((a, b) => a - b);
  const count = (list: number[], status: number) => list.filter((s) => s === status).length;
  const on = (i: number) => instances[i % instances.length]!.http;
  const env = () => ({
    WSM_STORE: 'cluster', WSM_POSTGRES_URL: url, WSM_LEASE_MS: String(LEASE_MS),
    WSM_REGISTRY: path.join(dirs[0]!, 'registry'), WSM_LOG_LEVEL: process.env.WSM_TEST_LOG_LEVEL ?? 'error',
    ...extra,
  });

  before(async function () {
    requirePostgres(this);
    url = await freshClusterUrl();
    for (let i = 0; i < 4; i++) dirs.push(tempDir());
    // At the same moment: every first-start step must hold when instances race it.
    instances.push(...await Promise.all([0, 1, 2].map((i) => startTestServer(env(), dirs[i]))));
    ({ tokens } = await seedWorkspace(instances[0]!, 'acme'));
  });
  after(async () => {
    for (const t of instances) await t.close();
    for (const dir of dirs) removeDir(dir);
  });

  const finished = async (i: number, id: string, timeoutMs = 240_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const res = await on(i).get(`/api/v1/packages/acme/commands/${id}`).set(bearer(tokens.root));
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      if (res.body.data.status === 'completed' || res.body.data.status === 'failed') return res.body.data as { status: string; errorMessage: string | null };
      if (Date.now() > deadline) throw new Error(`command ${id} still ${res.body.data.status}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  it('a token minted with `wsm token` against a data directory of its own is accepted by all three', async () => {
    const minted = await runWsm(['token', 'cli-admin', '--system-admin'], { WSM_DATA_DIR: dirs[3]!, WSM_STORE: 'cluster', WSM_POSTGRES_URL: url });
    expect(minted.code, minted.stderr).to.equal(0);
    const token = minted.stdout.trim();
    for (let i = 0; i < 3; i++) {
      const res = await on(i).get('/api/v1/workspaces/acme').set(bearer(token));
      expect(res.status, `instance ${i}: ${JSON.stringify(res.body)}`).to.equal(200);
    }
  });

  it('a write answered by one instance is read at once by another: 50 rounds, alternating instances', async () => {
    for (let round = 0; round < 50; round++) {
      const slug = `round-${round}`;
      const created = await on(round).post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug, owner: 'acme-owner' });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const read = await on(round + 1).get(`/api/v1/workspaces/${slug}`).set(bearer(tokens.owner));
      expect(read.status, `round ${round}: read on instance ${(round + 1) % 3}`).to.equal(200);
      // A change of membership, read (and cached) on one instance, changed on another, read again.
      expect((await on(round + 2).get(`/api/v1/workspaces/${slug}`).set(bearer(tokens.outsider))).status).to.be.oneOf([403, 404]);
      expect((await on(round + 1).put(`/api/v1/workspaces/${slug}/members/acme-outsider`).set(bearer(tokens.owner)).send({})).status).to.equal(200);
      expect((await on(round + 2).get(`/api/v1/workspaces/${slug}`).set(bearer(tokens.outsider))).status, `round ${round}: member on instance ${(round + 2) % 3}`).to.equal(200);
    }
  });

  it('20 creates of one workspace slug over the three instances: one 201, 19 409, one workspace seen by each', async () => {
    const res = await Promise.all(Array.from({ length: 20 }, (_, i) =>
      on(i).post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug: 'contested', owner: `contender-${i}` })));
    const got = statuses(res);
    expect(count(got, 201), JSON.stringify(got)).to.equal(1);
    expect(count(got, 409)).to.equal(19);
    for (let i = 0; i < 3; i++) {
      const all = (await on(i).get('/api/v1/workspaces').set(bearer(tokens.root))).body.data as Array<{ slug: string }>;
      expect(all.filter((w) => w.slug === 'contested')).to.have.length(1);
    }
  });

  it('20 creates of one alias over the three instances: one 200, 19 409', async () => {
    const body = { scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT WHERE { ?s ?p ?o }' };
    const res = await Promise.all(Array.from({ length: 20 }, (_, i) => on(i).post('/api/v1/commands/acme').set(bearer(tokens.member)).send({ ...body, alias: 'raced' })));
    const got = statuses(res);
    expect(count(got, 200), JSON.stringify(got)).to.equal(1);
    expect(count(got, 409)).to.equal(19);
  });

  it('two removals of the last two administrators on two instances, three rounds: one 200, one 409', async () => {
    for (let round = 0; round < 3; round++) {
      expect((await on(round).put('/api/v1/workspaces/acme/members/acme-member').set(bearer(tokens.root)).send({ admin: true })).status).to.equal(200);
      const res = await Promise.all(['acme-owner', 'acme-member'].map((u, i) => on(round + i + 1).delete(`/api/v1/workspaces/acme/members/${u}`).set(bearer(tokens.root))));
      expect(statuses(res), JSON.stringify(res.map((r) => r.body))).to.deep.equal([200, 409]);
      for (const u of ['acme-owner', 'acme-member']) {
        expect((await on(round + 2).put(`/api/v1/workspaces/acme/members/${u}`).set(bearer(tokens.root)).send({})).status).to.equal(200);
      }
    }
  });

  it('two installs of one package on two instances: one 202, one 409 (one active command per package); the command completes', async () => {
    publish(instances[0]!, 'acme-pub', 'solo', '1.0.0', await tinyPackage({ name: 'solo', version: '1.0.0' }));
    for (let round = 0; round < 2; round++) {
      const res = await Promise.all([0, 1].map((i) => on(round + i).post('/api/v1/packages/acme/registry/acme-pub/solo/install').set(bearer(tokens.root)).send({})));
      expect(statuses(res), JSON.stringify(res.map((r) => r.body))).to.deep.equal([202, 409]);
      const accepted = res.find((r) => r.status === 202)!.body.data.id as string;
      expect((await finished(round + 2, accepted)).status).to.equal('completed');
    }
  });

  it('an instance SIGKILLed during writes loses none it acknowledged; the others go on', async () => {
    const instance = await spawnInstance(env(), dirs[3]!);
    try {
      const acknowledged: string[] = [];
      let stop = false;
      // Eight writers on the child, each creating workspaces one after another until it dies.
      const writers = Array.from({ length: 8 }, async (_, w) => {
        for (let n = 0; !stop; n++) {
          const slug = `killed-${w}-${n}`;
          try {
            const res = await instance.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug, owner: 'acme-owner' });
            if (res.status === 201) acknowledged.push(slug);
          } catch {
            return; // the connection died with the instance
          }
        }
      });
      while (acknowledged.length < 40) await new Promise((r) => setTimeout(r, 10));
      const killed = instance.kill('SIGKILL');
      stop = true;
      await Promise.all(writers);
      await killed;
      expect(acknowledged.length).to.be.greaterThan(39);
      const seen = new Set(((await on(1).get('/api/v1/workspaces').set(bearer(tokens.root))).body.data as Array<{ slug: string }>).map((w) => w.slug));
      expect(acknowledged.filter((slug) => !seen.has(slug)), 'acknowledged and lost').to.deep.equal([]);
      // The others go on writing.
      for (let i = 0; i < 3; i++) {
        expect((await on(i).post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug: `after-kill-${i}`, owner: 'acme-owner' })).status).to.equal(201);
        expect((await on(i + 1).get(`/api/v1/workspaces/after-kill-${i}`).set(bearer(tokens.root))).status).to.equal(200);
      }
    } finally {
      await instance.kill('SIGKILL');
    }
  });
});
