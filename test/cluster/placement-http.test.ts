import { expect } from 'chai';
import path from 'node:path';
import { bearer, removeDir, seedWorkspace, startTestServer, tempDir, type TestServer, type Tokens } from '../helpers/server.js';
import { freshClusterUrl, requirePostgres, sqlAt } from '../helpers/cluster.js';
import { tinyPackage } from '../helpers/packages.js';
import { publish, readEventStream } from '../helpers/lifecycle.js';
import type { ClusterStore } from '../../src/store/cluster/cluster-store.js';
import { HANDOVER_AFTER } from '../../src/http/placement-forward.js';

/**
 * Placement over HTTP (WSM_CLUSTER_PLACEMENT=lease, docs/cluster.md
 * "Placement"): three instances on one PostgreSQL; a request naming a
 * workspace is served by the instance holding the workspace's lease, and
 * forwarded there by any other.
 */
describe('placement over HTTP: three instances forward a workspace\'s requests to its owner', function () {
  this.timeout(300_000);
  let url: string;
  const dirs: string[] = [];
  const instances: TestServer[] = [];
  let tokens: Tokens;
  let acme: { id: string; slug: string };
  const placementOf = (i: number) => (instances[i]!.server.services.store as ClusterStore).placement!;
  const ownerRow = async (id: string) => (await sqlAt(url, 'SELECT instance, epoch::int AS epoch FROM wsm_owners WHERE stream = $1', [`ws:${id}`]))[0];
  /** The instance holding the workspace's lease now, and the two others. */
  const roles = async (id: string) => {
    const row = (await ownerRow(id))!;
    const owner = instances.findIndex((_, i) => placementOf(i).instance === row.instance);
    expect(owner, 'an instance holds the workspace').to.be.at.least(0);
    return { owner, others: [0, 1, 2].filter((i) => i !== owner) as [number, number] };
  };

  before(async function () {
    requirePostgres(this);
    url = await freshClusterUrl();
    for (let i = 0; i < 3; i++) dirs.push(tempDir());
    const env = {
      WSM_STORE: 'cluster', WSM_POSTGRES_URL: url, WSM_CLUSTER_PLACEMENT: 'lease', WSM_CLUSTER_LEASE_MS: '3000',
      WSM_REGISTRY: path.join(dirs[0]!, 'registry'),
    };
    instances.push(...await Promise.all(dirs.map((dir) => startTestServer(env, dir))));
    ({ tokens, workspace: acme } = await seedWorkspace(instances[0]!, 'acme'));
  });
  after(async () => {
    for (const t of instances) await t.close();
    for (const dir of dirs) removeDir(dir);
  });

  it('the instance that created a workspace holds it; a read through another is forwarded there and answers the same', async () => {
    expect(await ownerRow(acme.id)).to.deep.equal({ instance: placementOf(0).instance, epoch: 1 });
    const direct = await instances[0]!.http.get('/api/v1/workspaces/acme').set(bearer(tokens.owner));
    expect(direct.status).to.equal(200);
    expect(direct.headers['x-wsm-owner'], 'served by the owner itself').to.equal(undefined);
    for (const i of [1, 2]) {
      const res = await instances[i]!.http.get('/api/v1/workspaces/acme').set(bearer(tokens.owner));
      expect(res.status).to.equal(200);
      expect(res.headers['x-wsm-owner']).to.equal(instances[0]!.url);
      expect(res.body).to.deep.equal(direct.body);
      // By id as by slug; a workspace that does not exist is answered where asked.
      expect((await instances[i]!.http.get(`/api/v1/workspaces/${acme.id}`).set(bearer(tokens.owner))).headers['x-wsm-owner']).to.equal(instances[0]!.url);
      const missing = await instances[i]!.http.get('/api/v1/workspaces/nowhere').set(bearer(tokens.owner));
      expect(missing.status).to.equal(404);
      expect(missing.headers['x-wsm-owner']).to.equal(undefined);
      // The owner's refusals come back as they are.
      expect((await instances[i]!.http.get('/api/v1/workspaces/acme').set(bearer(tokens.outsider))).status).to.be.oneOf([403, 404]);
      expect((await instances[i]!.http.get('/api/v1/workspaces/acme')).status).to.equal(401);
    }
  });

  it('writes through the non-owners are acknowledged, made by the owner, and read on every instance', async () => {
    for (let n = 0; n < 10; n++) {
      const via = instances[1 + (n % 2)]!;
      const added = await via.http.put(`/api/v1/workspaces/acme/members/visitor-${n}`).set(bearer(tokens.owner)).send({});
      expect(added.status, JSON.stringify(added.body)).to.equal(200);
      expect(added.headers['x-wsm-owner']).to.equal(instances[0]!.url);
      const created = await via.http.post('/api/v1/commands/acme').set(bearer(tokens.member))
        .send({ alias: `via-${n}`, scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT WHERE { ?s ?p ?o }' });
      expect(created.status, JSON.stringify(created.body)).to.equal(200);
    }
    // Still the first owner's, at its first epoch: every write was made by it (the requests came from two instances in turn).
    expect(await ownerRow(acme.id)).to.deep.equal({ instance: placementOf(0).instance, epoch: 1 });
    expect(placementOf(1).streams()).to.not.include(`ws:${acme.id}`);
    // (Ten requests in a row from one instance move the workspace to it: see below.)
    for (let i = 0; i < 3; i++) {
      for (let n = 0; n < 10; n++) {
        const visitor = await instances[0]!.token(`visitor-${n}`);
        expect((await instances[i]!.http.get('/api/v1/workspaces/acme').set(bearer(visitor))).status, `visitor-${n} on instance ${i}`).to.equal(200);
      }
      const commands = (await instances[i]!.http.get('/api/v1/commands/acme?scope=all').set(bearer(tokens.member))).body.data as Array<{ alias: string }>;
      expect(commands.filter((c) => c.alias?.startsWith('via-')), `instance ${i}`).to.have.length(10);
    }
  });

  it('an install through a non-owner runs on the owner; its event stream passes through the non-owner as it comes', async () => {
    publish({ dataDir: dirs[0]! }, 'acme-pub', 'solo', '1.0.0', await tinyPackage({ name: 'solo', version: '1.0.0' }));
    const { owner, others: [one, two] } = await roles(acme.id);
    const accepted = await instances[two]!.http.post('/api/v1/packages/acme/registry/acme-pub/solo/install').set(bearer(tokens.root)).send({});
    expect(accepted.status, JSON.stringify(accepted.body)).to.equal(202);
    const res = await fetch(`${instances[one]!.url}/api/v1/packages/acme/commands/${accepted.body.data.id as string}/events`, {
      headers: { Authorization: `Bearer ${tokens.root}`, Accept: 'text/event-stream' }, signal: AbortSignal.timeout(120_000),
    });
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/event-stream/);
    expect(res.headers.get('x-wsm-owner')).to.equal(instances[owner]!.url);
    const { events, end } = await readEventStream(res);
    expect(events).to.be.greaterThan(0);
    expect(end?.status).to.equal('completed');
  });

  it('a forwarded request is served where it arrives: a read answers from its replica, a write it may not make answers 503 with Retry-After and changes nothing', async () => {
    const hop = { 'X-Wsm-Forwarded-By': 'another-instance' };
    const { others: [other] } = await roles(acme.id);
    const before = await ownerRow(acme.id);
    const read = await instances[other]!.http.get('/api/v1/workspaces/acme').set(bearer(tokens.owner)).set(hop);
    expect(read.status).to.equal(200);
    expect(read.headers['x-wsm-owner']).to.equal(undefined);
    const refused = await instances[other]!.http.put('/api/v1/workspaces/acme/members/hopped').set(bearer(tokens.owner)).set(hop).send({});
    expect(refused.status, JSON.stringify(refused.body)).to.equal(503);
    expect(refused.headers['retry-after']).to.equal('1');
    expect(refused.body.error.code).to.equal('STORE_UNAVAILABLE');
    const hopped = await instances[0]!.token('hopped');
    for (let i = 0; i < 3; i++) {
      expect((await instances[i]!.http.get('/api/v1/workspaces/acme').set(bearer(hopped))).status, `instance ${i}`).to.be.oneOf([403, 404]);
    }
    expect(await ownerRow(acme.id)).to.deep.equal(before);
  });

  it('a workspace whose requests all come forwarded from one instance moves to it (the balancer sends them there)', async () => {
    const created = await instances[0]!.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug: 'gamma', owner: 'acme-owner' });
    expect(created.status).to.equal(201);
    const gamma = created.body.data as { id: string };
    expect(await ownerRow(gamma.id)).to.deep.equal({ instance: placementOf(0).instance, epoch: 1 });
    let forwarded = 0;
    for (let n = 0; n < 30; n++) {
      const res = await instances[2]!.http.put(`/api/v1/workspaces/gamma/members/moving-${n}`).set(bearer(tokens.owner)).send({});
      expect(res.status).to.equal(200);
      if (res.headers['x-wsm-owner'] === undefined) break;
      forwarded++;
    }
    expect(forwarded).to.be.within(HANDOVER_AFTER, 29);
    expect(await ownerRow(gamma.id)).to.deep.equal({ instance: placementOf(2).instance, epoch: 2 });
    const moved = await instances[2]!.http.get('/api/v1/workspaces/gamma').set(bearer(tokens.owner));
    expect(moved.headers['x-wsm-owner']).to.equal(undefined);
    expect((await instances[0]!.http.get('/api/v1/workspaces/gamma').set(bearer(tokens.owner))).headers['x-wsm-owner']).to.equal(instances[2]!.url);
    for (let n = 0; n <= forwarded; n++) {
      const visitor = await instances[0]!.token(`moving-${n}`);
      expect((await instances[1]!.http.get('/api/v1/workspaces/gamma').set(bearer(visitor))).status, `moving-${n}`).to.equal(200);
    }
  });

  it('a workspace whose lease ended is taken by the first instance a request reaches; the others then forward to it', async () => {
    const created = await instances[1]!.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug: 'beta', owner: 'acme-owner' });
    expect(created.status).to.equal(201);
    const beta = created.body.data as { id: string };
    expect(await ownerRow(beta.id)).to.deep.equal({ instance: placementOf(1).instance, epoch: 1 });
    // As when its owner stopped renewing (by PostgreSQL's clock); its owner drops it at its next renewal.
    await sqlAt(url, 'UPDATE wsm_owners SET expires_at = now() WHERE stream = $1', [`ws:${beta.id}`]);
    await placementOf(1).renew();
    const read = await instances[2]!.http.get('/api/v1/workspaces/beta').set(bearer(tokens.owner));
    expect(read.status).to.equal(200);
    expect(read.headers['x-wsm-owner']).to.equal(undefined);
    expect(await ownerRow(beta.id)).to.deep.equal({ instance: placementOf(2).instance, epoch: 2 });
    const written = await instances[1]!.http.put('/api/v1/workspaces/beta/members/acme-member').set(bearer(tokens.owner)).send({});
    expect(written.status).to.equal(200);
    expect(written.headers['x-wsm-owner']).to.equal(instances[2]!.url);
    expect((await instances[0]!.http.get('/api/v1/workspaces/beta').set(bearer(tokens.member))).status).to.equal(200);
  });
});
