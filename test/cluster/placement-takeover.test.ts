import { expect } from 'chai';
import path from 'node:path';
import { bearer, removeDir, seedWorkspace, startTestServer, tempDir, type TestServer, type Tokens } from '../helpers/server.js';
import { freshClusterUrl, requirePostgres, sqlAt } from '../helpers/cluster.js';
import { spawnInstance, type InstanceProcess } from '../helpers/instances.js';
import { sample } from '../helpers/metrics.js';
import type { ClusterStore } from '../../src/store/cluster/cluster-store.js';

const LEASE_MS = 3000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Placement when an owner dies or stops (docs/cluster.md, "Placement"): two
 * instances in this process, the owner of the workspaces under test a child
 * process that is killed (SIGKILL) or paused (SIGSTOP, SIGCONT).
 */
describe('placement: an owner that dies or pauses is taken over; nothing acknowledged is lost or made twice', function () {
  this.timeout(300_000);
  let url: string;
  const dirs: string[] = [];
  const instances: TestServer[] = [];
  let tokens: Tokens;
  const env = () => ({
    WSM_STORE: 'cluster', WSM_POSTGRES_URL: url, WSM_CLUSTER_PLACEMENT: 'lease', WSM_CLUSTER_LEASE_MS: String(LEASE_MS),
    WSM_REGISTRY: path.join(dirs[0]!, 'registry'), WSM_LOG_LEVEL: process.env.WSM_TEST_LOG_LEVEL ?? 'error',
  });
  const placementOf = (i: number) => (instances[i]!.server.services.store as ClusterStore).placement!;
  const ownerRow = async (id: string) => (await sqlAt(url, 'SELECT instance, epoch::int AS epoch, url FROM wsm_owners WHERE stream = $1', [`ws:${id}`]))[0];
  /** The aliases of the slash commands of `slug`, as instance `i` reads them (each once per command). */
  const aliases = async (i: number, slug: string): Promise<string[]> => {
    const res = await instances[i]!.http.get(`/api/v1/commands/${slug}?scope=all`).set(bearer(tokens.root));
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return (res.body.data as Array<{ alias?: string }>).map((c) => c.alias ?? '').filter(Boolean);
  };
  const createOn = async (owner: InstanceProcess, slug: string): Promise<string> => {
    const res = await owner.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug, owner: 'acme-owner' });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.data.id as string;
  };
  const command = (alias: string) => ({ alias, scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT WHERE { ?s ?p ?o }' });

  before(async function () {
    requirePostgres(this);
    url = await freshClusterUrl();
    for (let i = 0; i < 4; i++) dirs.push(tempDir());
    instances.push(await startTestServer(env(), dirs[0]), await startTestServer(env(), dirs[1]));
    ({ tokens } = await seedWorkspace(instances[0]!, 'acme'));
  });
  after(async () => {
    for (const t of instances) await t.close();
    for (const dir of dirs) removeDir(dir);
  });

  it('SIGKILL of the owner during writes through the other instances: its workspaces answer on another instance, every acknowledged write is there once', async () => {
    const owner = await spawnInstance(env(), dirs[2]!);
    try {
      const slugs = ['killed-a', 'killed-b', 'killed-c'];
      const ids = await Promise.all(slugs.map((slug) => createOn(owner, slug)));
      for (const id of ids) expect((await ownerRow(id))!.url).to.equal(owner.url);

      const acknowledged: string[] = [];
      const unknown: string[] = [];
      const statuses: number[] = [];
      let stop = false;
      let killedAt = 0;
      let firstAfterKill: number | undefined;
      // Six writers, each through one of the two instances that stay, to one of the owner's workspaces.
      const writers = Array.from({ length: 6 }, async (_, w) => {
        const via = instances[w % 2]!;
        const slug = slugs[w % 3]!;
        for (let n = 0; !stop; n++) {
          const alias = `w${w}-${n}`;
          const sent = performance.now();
          const res = await via.http.post(`/api/v1/commands/${slug}`).set(bearer(tokens.root)).send(command(alias)).catch(() => undefined);
          statuses.push(res?.status ?? 0);
          if (res?.status === 200) {
            acknowledged.push(`${slug}/${alias}`);
            if (killedAt && sent > killedAt && firstAfterKill === undefined) firstAfterKill = performance.now() - killedAt;
          } else {
            unknown.push(`${slug}/${alias}`);
          }
        }
      });
      while (acknowledged.length < 30) await sleep(10);
      killedAt = performance.now();
      await owner.kill('SIGKILL');
      while (acknowledged.length < 60 || firstAfterKill === undefined) await sleep(10);
      stop = true;
      await Promise.all(writers);
      process.stdout.write(`      (first write sent after the kill acknowledged ${Math.round(firstAfterKill)} ms after it; ${acknowledged.length} acknowledged, statuses other than 200: ${JSON.stringify(statuses.filter((s) => s !== 200))})\n`);

      // Taken over by the two that stay (an epoch more, or more when it moved on between them: one of their URLs), and read alike on both.
      for (const id of ids) {
        const row = (await ownerRow(id))!;
        expect(row.epoch).to.be.at.least(2);
        expect([instances[0]!.url, instances[1]!.url]).to.include(row.url);
      }
      for (const i of [0, 1]) {
        const seen = (await Promise.all(slugs.map(async (slug) => (await aliases(i, slug)).map((a) => `${slug}/${a}`)))).flat();
        expect(acknowledged.filter((a) => !seen.includes(a)), `acknowledged and lost, instance ${i}`).to.deep.equal([]);
        expect(seen.filter((a, k) => seen.indexOf(a) !== k), `made twice, instance ${i}`).to.deep.equal([]);
        expect(seen.filter((a) => !acknowledged.includes(a) && !unknown.includes(a)), 'never sent').to.deep.equal([]);
      }
      // Only a request the owner held when it died has an unknown outcome (502); every other answer is 200.
      expect(statuses.filter((s) => s !== 200 && s !== 502 && s !== 0)).to.deep.equal([]);
      expect(statuses.filter((s) => s !== 200).length).to.be.at.most(6);
    } finally {
      await owner.kill('SIGKILL');
    }
  });

  it('SIGSTOP of the owner past its lease: another takes the workspace over and writes; after SIGCONT the paused owner\'s writes are refused (never appended), and its next request goes to the new owner', async () => {
    const owner = await spawnInstance(env(), dirs[3]!);
    let resumed = false;
    try {
      const id = await createOn(owner, 'paused');
      const before = (await ownerRow(id))!;
      expect(before.url).to.equal(owner.url);
      const journalRows = async () => Number((await sqlAt(url, 'SELECT count(*) AS n FROM wsm_journal WHERE stream = $1', [`ws:${id}`]))[0]!.n);
      expect((await instances[1]!.http.post('/api/v1/commands/paused').set(bearer(tokens.root)).send(command('before-pause'))).status).to.equal(200);
      const rowsBeforePause = await journalRows();

      owner.child.kill('SIGSTOP');
      // Held by the paused owner when it resumes: one sent to it directly (served there, as a forwarded request is),
      // one forwarded to it by another instance while its lease still ran.
      const direct = owner.http.post('/api/v1/commands/paused').set(bearer(tokens.root)).set('X-Wsm-Forwarded-By', 'test').send(command('held-direct')).then((r) => r, () => undefined);
      const forwarded = instances[1]!.http.post('/api/v1/commands/paused').set(bearer(tokens.root)).send(command('held-forwarded')).then((r) => r, () => undefined);
      // Its lease ends by PostgreSQL's clock; the next request another instance gets takes the workspace over.
      while ((await sqlAt(url, 'SELECT expires_at > now() AS live FROM wsm_owners WHERE stream = $1', [`ws:${id}`]))[0]!.live) await sleep(100);
      const taken = await instances[0]!.http.post('/api/v1/commands/paused').set(bearer(tokens.root)).send(command('after-takeover'));
      expect(taken.status, JSON.stringify(taken.body)).to.equal(200);
      expect(taken.headers['x-wsm-owner'], 'served by the instance that took it over').to.equal(undefined);
      expect(await ownerRow(id)).to.deep.include({ instance: placementOf(0).instance, epoch: before.epoch + 1 });
      const rowsPerWrite = await journalRows() - rowsBeforePause;

      owner.child.kill('SIGCONT');
      resumed = true;
      const held = { direct: await direct, forwarded: await forwarded };
      for (const [name, res] of Object.entries(held)) {
        expect(res, name).to.not.equal(undefined);
        expect(res!.status, `${name}: ${JSON.stringify(res!.body)}`).to.equal(503);
        expect(res!.headers['retry-after'], name).to.equal('1');
      }
      // The paused owner's next request for the workspace goes to the one that took it over.
      const next = await owner.http.post('/api/v1/commands/paused').set(bearer(tokens.root)).send(command('after-resume'));
      expect(next.status, JSON.stringify(next.body)).to.equal(200);
      expect(next.headers['x-wsm-owner']).to.equal(instances[0]!.url);

      for (const i of [0, 1]) {
        expect((await aliases(i, 'paused')).sort(), `instance ${i}`).to.deep.equal(['after-resume', 'after-takeover', 'before-pause']);
      }
      // Never appended: since the pause the workspace's journal holds the two acknowledged writes only.
      expect(await journalRows()).to.equal(rowsBeforePause + 2 * rowsPerWrite);
      // The paused owner forwarded its last request.
      const metrics = (await owner.http.get('/metrics').set(bearer(tokens.root))).text;
      expect(sample(metrics, 'wsm_cluster_requests_forwarded_total')).to.be.greaterThan(0);
    } finally {
      if (!resumed) owner.child.kill('SIGCONT');
      await owner.kill('SIGKILL');
    }
  });
});
