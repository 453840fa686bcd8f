import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import supertest from 'supertest';
import { bearer, removeDir, seedWorkspace, startTestServer, tempDir, type TestServer } from '../helpers/server.js';
import { emptyEngine, engineEnv, requireRemote } from '../helpers/remote.js';
import { freePort } from '../helpers/ports.js';
import { tinyPackage } from '../helpers/packages.js';
import { bigMatrixTurtle, publish } from '../helpers/lifecycle.js';
import { iri, sparql } from '../../src/rdf/sparql.js';
import type { SparqlEndpointOptions } from '../../src/store/remote/sparql-client.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** Short, so the test sees a lease end; the instances renew every third of it. */
const LEASE_MS = 5000;

/**
 * The engine's settings, with the short lease. The instances log their
 * errors (a command failed "because of an internal error" says why only
 * there), so a failure of this test in CI shows its cause.
 */
const instanceEnv = (settings: SparqlEndpointOptions): Record<string, string> => ({
  ...engineEnv(settings), WSM_LEASE_MS: String(LEASE_MS), WSM_LOG_LEVEL: process.env.WSM_TEST_LOG_LEVEL ?? 'error',
});

/**
 * Several service instances on one engine (docs/remote-store.md; issue 15):
 * three instances share one data directory (the token issuer's key) and one
 * Virtuoso; racing requests are spread over them, and one more instance runs
 * as a child process so it can be killed.
 */
describe('three service instances on one engine (WSM_STORE=sparql)', function () {
  this.timeout(600_000);
  let settings: SparqlEndpointOptions;
  let dataDir: string;
  const instances: TestServer[] = [];
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  const statuses = (responses: Array<{ status: number }>) => responses.map((r) => r.status).sort((a, b) => a - b);
  const count = (list: number[], status: number) => list.filter((s) => s === status).length;
  /** Instance i of the three, round robin. */
  const on = (i: number) => instances[i % instances.length]!.http;

  before(async function () {
    settings = requireRemote(this);
    // An engine emptied of the service's graphs (as WSM_TEST_STORE=sparql does for one server).
    await emptyEngine(settings, 'https://workspaces.local/');
    dataDir = tempDir();
    // One after the other: the first creates the issuer key the others read.
    for (let i = 0; i < 3; i++) instances.push(await startTestServer(instanceEnv(settings), dataDir));
    ({ tokens } = await seedWorkspace(instances[0]!, 'acme'));
  });
  after(async () => {
    for (const t of instances) await t.close();
    if (dataDir) removeDir(dataDir);
  });

  /** Polls P8 on instance `i` until the command finished; slowly, so the engine is not kept busy by the poll. */
  const finished = async (i: number, id: string, timeoutMs = 240_000, everyMs = 500) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const res = await on(i).get(`/api/v1/packages/acme/commands/${id}`).set(bearer(tokens.root));
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      if (res.body.data.status === 'completed' || res.body.data.status === 'failed') return res.body.data as { status: string; errorMessage: string | null; createdAt: string; updatedAt: string };
      if (Date.now() > deadline) throw new Error(`command ${id} still ${res.body.data.status}`);
      await new Promise((r) => setTimeout(r, everyMs));
    }
  };

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
    for (let i = 0; i < 3; i++) expect((await on(i).post('/api/v1/commands/acme').set(bearer(tokens.member)).send({ ...body, alias: `warm-up-${i}` })).status).to.equal(200);
    const res = await Promise.all(Array.from({ length: 20 }, (_, i) => on(i).post('/api/v1/commands/acme').set(bearer(tokens.member)).send({ ...body, alias: 'raced' })));
    const got = statuses(res);
    expect(count(got, 200), JSON.stringify(got)).to.equal(1);
    expect(count(got, 409)).to.equal(19);
    for (let i = 0; i < 3; i++) {
      const own = (await on(i).get('/api/v1/commands/acme').set(bearer(tokens.member))).body.data as Array<{ alias: string }>;
      expect(own.filter((c) => c.alias === 'raced')).to.have.length(1);
    }
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

  it('a write answered by one instance is seen by the next read on another (cached reads included)', async () => {
    const outsider = tokens.outsider;
    // Warm every instance's caches: the workspace, the outsider's membership (none), the slash command lookups.
    for (let i = 0; i < 3; i++) {
      expect((await on(i).get('/api/v1/workspaces/acme').set(bearer(outsider))).status).to.be.oneOf([403, 404]);
      expect((await on(i).get('/api/v1/workspaces/acme').set(bearer(outsider))).status).to.be.oneOf([403, 404]);
    }
    for (let round = 0; round < 3; round++) {
      const writer = round;
      const reader = round + 1;
      expect((await on(writer).put('/api/v1/workspaces/acme/members/acme-outsider').set(bearer(tokens.owner)).send({})).status).to.equal(200);
      expect((await on(reader).get('/api/v1/workspaces/acme').set(bearer(outsider))).status, `round ${round}: member on ${reader}`).to.equal(200);
      expect((await on(reader + 1).get('/api/v1/workspaces/acme').set(bearer(outsider))).status).to.equal(200);
      expect((await on(writer).delete('/api/v1/workspaces/acme/members/acme-outsider').set(bearer(tokens.owner))).status).to.equal(200);
      expect((await on(reader).get('/api/v1/workspaces/acme').set(bearer(outsider))).status, `round ${round}: removed on ${reader}`).to.be.oneOf([403, 404]);
    }
    // A slash command created on one, read (and cached) on another, renamed on the third, read again on the second.
    const created = await on(0).post('/api/v1/commands/acme').set(bearer(tokens.member))
      .send({ alias: 'fresh-one', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT WHERE { ?s ?p ?o }' });
    expect(created.status).to.equal(200);
    const id = created.body.data.id as string;
    expect((await on(1).get(`/api/v1/commands/acme/${id}`).set(bearer(tokens.member))).body.data.alias).to.equal('fresh-one');
    expect((await on(1).get(`/api/v1/commands/acme/${id}`).set(bearer(tokens.member))).body.data.alias).to.equal('fresh-one');
    const renamed = await on(2).put(`/api/v1/commands/acme/${id}`).set(bearer(tokens.member))
      .send({ alias: 'fresh-two', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT WHERE { ?s ?p ?o }' });
    expect(renamed.status, JSON.stringify(renamed.body)).to.equal(200);
    expect((await on(1).get(`/api/v1/commands/acme/${id}`).set(bearer(tokens.member))).body.data.alias).to.equal('fresh-two');
    expect((await on(2).delete(`/api/v1/commands/acme/${id}`).set(bearer(tokens.member))).status).to.equal(200);
    expect((await on(1).get(`/api/v1/commands/acme/${id}`).set(bearer(tokens.member))).status).to.equal(404);
  });

  it('two installs of one package on two instances: one 202, one 409; the command completes', async () => {
    publish(instances[0]!, 'acme-pub', 'solo', '1.0.0', await tinyPackage({ name: 'solo', version: '1.0.0' }));
    for (let round = 0; round < 2; round++) {
      const res = await Promise.all([0, 1].map((i) => on(round + i).post('/api/v1/packages/acme/registry/acme-pub/solo/install').set(bearer(tokens.root)).send({})));
      expect(statuses(res), JSON.stringify(res.map((r) => r.body))).to.deep.equal([202, 409]);
      const accepted = res.find((r) => r.status === 202)!.body.data.id as string;
      expect((await finished(round + 2, accepted)).status).to.equal('completed');
    }
    const commands = (await on(0).get('/api/v1/packages/acme/solo/commands').set(bearer(tokens.root))).body.data as unknown[];
    expect(commands).to.have.length(2);
  });

  it('an install whose instance is SIGKILLed is failed ("interrupted") by another once its lease ends, nothing of it left; one whose owner is alive is never taken', async () => {
    const port = await freePort();
    const env = {
      ...process.env, ...instanceEnv(settings),
      PORT: String(port), HOST: '127.0.0.1', WSM_DATA_DIR: dataDir, WSM_REGISTRY: path.join(dataDir, 'registry'), WSM_LOG_LEVEL: 'warn', WSM_DEMO: 'false',
    };
    const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'src/cli.ts'), 'serve'], { cwd: root, env, stdio: 'ignore' });
    const exited = new Promise((resolve) => child.on('exit', resolve));
    try {
      let up = false;
      for (let i = 0; i < 2400 && !up; i++) {
        try { up = (await fetch(`http://127.0.0.1:${port}/health`)).ok; } catch { /* starting */ }
        if (!up) await new Promise((r) => setTimeout(r, 25));
      }
      expect(up, 'the child instance started').to.equal(true);
      const http = supertest(`http://127.0.0.1:${port}`);
      const uri = 'https://example.org/packages/huge/main';
      const archive = await tinyPackage({ name: 'huge', matrices: [{ name: 'main', uri, turtle: bigMatrixTurtle(uri, 100_000) }] });
      const res = await http.post('/api/v1/packages/acme/install').set(bearer(tokens.root)).attach('file', archive, 'huge.tgz');
      expect(res.status, JSON.stringify(res.body)).to.equal(202);
      const id = res.body.data.id as string;
      let status = 'pending';
      while (status === 'pending') {
        status = (await on(0).get(`/api/v1/packages/acme/commands/${id}`).set(bearer(tokens.root))).body.data.status;
        if (status === 'pending') await new Promise((r) => setTimeout(r, 50));
      }
      expect(status).to.equal('in_progress');
      // Let it get into its work (parsing, validation, staging), then kill it.
      await new Promise((r) => setTimeout(r, 1500));
      child.kill('SIGKILL');
      await exited;
      const killedAt = Date.now();

      const cmd = await finished(1, id, 120_000);
      expect(cmd.status).to.equal('failed');
      expect(cmd.errorMessage).to.match(/interrupted/i);
      // Not before its lease could have ended.
      expect(Date.now() - killedAt).to.be.greaterThan(LEASE_MS / 2);
      const events = (await on(2).get(`/api/v1/packages/acme/commands/${id}/events`).set(bearer(tokens.root))).body.data as Array<{ level: string; message: string }>;
      expect(events.at(-1)!.level).to.equal('ERROR');
      expect(events.at(-1)!.message).to.match(/interrupted/i);
      expect(events.filter((e) => /interrupted/i.test(e.message))).to.have.length(1);
      // Nothing of it: no package, no matrix graph, no triple of the matrix anywhere, no staging graph left.
      expect((await on(0).get('/api/v1/packages/acme/huge').set(bearer(tokens.root))).status).to.equal(404);
      const { store } = instances[0]!.server.services;
      expect(await store.ask(sparql`ASK { GRAPH ?g { ${iri(uri)} ?p ?o } }`)).to.equal(false);
      expect(await store.ask(sparql`ASK { GRAPH ?g { ${iri(`${uri}#item7`)} ?p ?o } }`)).to.equal(false);
      const staged = await store.select(sparql`SELECT ?g WHERE { GRAPH ?g { ?s ?p ?o } FILTER(STRSTARTS(STR(?g), "https://workspaces.local/staging/")) } LIMIT 1`);
      expect(staged).to.deep.equal([]);

      // An install on a live instance that runs longer than a lease (the others sweep twice per lease) is never taken from it.
      // (30,000 triples took over 5 s until installs stopped looking up every IRI they name 500 at a time: 0.9 s since;
      // 100,000 take about 3 s, two matrices of 150,000 about 7 s; each file within the archive limit of 20 MiB.)
      const second = 'https://example.org/packages/huge/second';
      const large = await tinyPackage({ name: 'huge', matrices: [{ name: 'main', uri, turtle: bigMatrixTurtle(uri, 150_000) }, { name: 'second', uri: second, turtle: bigMatrixTurtle(second, 150_000) }] });
      const again = await on(0).post('/api/v1/packages/acme/install').set(bearer(tokens.root)).attach('file', large, 'huge.tgz');
      expect(again.status, JSON.stringify(again.body)).to.equal(202);
      // Polled seldom: on Virtuoso a reader of the packages graph can deadlock a large install's final move
      // (docs/remote-store.md, "Known failure"), which is not what this checks.
      const done = await finished(2, again.body.data.id as string, 240_000, 2000);
      expect(done.status, done.errorMessage ?? '').to.equal('completed');
      const took = Date.parse(done.updatedAt) - Date.parse(done.createdAt);
      if (process.env.WSM_TEST_VERBOSE) console.log({ took });
      expect(took, `the install outlived a lease, so the others swept while it ran (it took ${took} ms)`).to.be.greaterThan(LEASE_MS);
      expect((await on(1).get('/api/v1/packages/acme/huge').set(bearer(tokens.root))).status).to.equal(200);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    }
  });
});
