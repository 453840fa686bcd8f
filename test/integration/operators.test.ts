import { expect } from 'chai';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { installMatrices, supportMatrixTurtle } from '../helpers/installs.js';
import { tinyPackage } from '../helpers/packages.js';
import { uploadAndWait } from '../helpers/lifecycle.js';
import { sample } from '../helpers/metrics.js';

const S = 'https://example.org/matrices/support';

describe('operators: health, metrics, matrix URIs, members by name', function () {
  this.timeout(120_000);
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];

  before(async () => {
    t = await startTestServer({ WSM_QUERY_TIMEOUT_MS: '300' });
    ({ tokens } = await seedWorkspace(t, 'acme'));
    await installMatrices(t, tokens.owner, 'acme', 'support', [{ uri: S, turtle: supportMatrixTurtle(S) }]);
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('GET /health answers only that the service is up, without a token', async () => {
    const res = await t.http.get('/health');
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({ success: true, data: { status: 'ok' } });
  });

  it('GET /metrics: 401 without credentials, 403 for anyone but a system administrator', async () => {
    expect((await t.http.get('/metrics')).status).to.equal(401);
    const member = await t.http.get('/metrics').set(bearer(tokens.owner));
    expect(member.status).to.equal(403);
    expect(member.body.error.code).to.equal('FORBIDDEN');
  });

  it('GET /metrics gives a system administrator the figures in Prometheus text', async () => {
    const before = (await t.http.get('/metrics').set(bearer(tokens.root))).text;
    // Traffic to count: reads, a 404, an install that completes and one that fails, a query that times out.
    for (let i = 0; i < 3; i++) await t.http.get('/api/v1/packages/acme').set(bearer(tokens.member));
    await t.http.get('/api/v1/packages/acme/nothing-here').set(bearer(tokens.member));
    await uploadAndWait(t, tokens.owner, 'acme', await tinyPackage({ name: 'ok', version: '1.0.0' }));
    const bad = await tinyPackage({ name: 'bad', version: '1.0.0', matrices: [{ name: 'main', uri: 'https://example.org/bad', turtle: '<https://example.org/bad> a <https://poliglot.io/os/spec/matrix#Matrix> . <x> <y> "unterminated' }] });
    const failed = await uploadAndWait(t, tokens.owner, 'acme', bad);
    expect(failed.status).to.equal('failed');
    const slow = 'SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l . ?m ?n2 ?o }';
    const timedOut = await t.http.get('/api/v1/sparql/acme').query({ query: slow }).set(bearer(tokens.owner));
    expect(timedOut.status).to.equal(503);

    const res = await t.http.get('/metrics').set(bearer(tokens.root));
    expect(res.status).to.equal(200);
    expect(res.headers['content-type']).to.match(/^text\/plain; version=0\.0\.4/);
    const text = res.text;
    const listRoute = { method: 'GET', route: '/api/v1/packages/:workspace', status: '200' };
    expect(sample(text, 'wsm_http_requests_total', listRoute) - sample(before, 'wsm_http_requests_total', listRoute)).to.equal(3);
    expect(sample(text, 'wsm_http_request_duration_seconds_count', listRoute) - sample(before, 'wsm_http_request_duration_seconds_count', listRoute)).to.equal(3);
    expect(sample(text, 'wsm_http_request_duration_seconds_bucket', { ...listRoute, le: '+Inf' })).to.be.at.least(3);
    expect(sample(text, 'wsm_http_requests_total', { method: 'GET', route: '/api/v1/packages/:workspace/:packageName', status: '404' })).to.be.at.least(1);
    // Route patterns, never raw paths.
    expect(text).not.to.contain('nothing-here');
    const delta = (name: string, labels: Record<string, string>) => sample(text, name, labels) - sample(before, name, labels);
    expect(delta('wsm_lifecycle_commands_total', { type: 'INSTALL', outcome: 'completed' })).to.equal(1);
    expect(delta('wsm_lifecycle_commands_total', { type: 'INSTALL', outcome: 'failed' })).to.equal(1);
    // Not on the remote store (WSM_TEST_STORE=sparql), where the engine makes writes durable, nor on the cluster store,
    // where PostgreSQL does: the service keeps no journal file there.
    if (process.env.WSM_TEST_STORE !== 'sparql' && process.env.WSM_TEST_STORE !== 'cluster') expect(sample(text, 'wsm_journal_fsync_seconds_count')).to.be.greaterThan(sample(before, 'wsm_journal_fsync_seconds_count'));
    expect(sample(text, 'wsm_store_quads')).to.be.greaterThan(20);
    expect(sample(text, 'wsm_sandbox_workers')).to.be.at.least(1);
    expect(delta('wsm_query_timeouts_total', {})).to.equal(1);
  });

  it('MatrixSummary carries the matrix uri', async () => {
    const res = await t.http.get('/api/v1/packages/acme/support').set(bearer(tokens.member));
    expect(res.status).to.equal(200);
    expect(res.body.data.matrices.map((m: { uri: string; name: string }) => [m.name, m.uri])).to.deep.equal([['support', S]]);
    const list = await t.http.get('/api/v1/packages/acme').set(bearer(tokens.member));
    const support = list.body.data.items.find((p: { name: string }) => p.name === 'support');
    expect(support.matrices[0].uri).to.equal(S);
  });

  it('I5 finds one member by username=', async () => {
    const one = await t.http.get('/api/v1/iam/acme/users?username=acme-member').set(bearer(tokens.member));
    expect(one.status).to.equal(200);
    expect(one.body.data.items.map((u: { username: string }) => u.username)).to.deep.equal(['acme-member']);
    expect(one.body.data).to.include({ totalItems: 1, page: 1, totalPages: 1 });
    const outsider = await t.http.get('/api/v1/iam/acme/users?username=acme-outsider').set(bearer(tokens.member));
    expect(outsider.body.data).to.include({ totalItems: 0 });
    expect(outsider.body.data.items).to.deep.equal([]);
    const nobody = await t.http.get('/api/v1/iam/acme/users?username=nobody-at-all').set(bearer(tokens.member));
    expect(nobody.body.data.items).to.deep.equal([]);
    const empty = await t.http.get('/api/v1/iam/acme/users?username=').set(bearer(tokens.member));
    expect(empty.status).to.equal(400);
    const all = await t.http.get('/api/v1/iam/acme/users').set(bearer(tokens.member));
    expect(all.body.data.totalItems).to.equal(2);
  });
});
