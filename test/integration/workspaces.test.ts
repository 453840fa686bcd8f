import { expect } from 'chai';
import { startTestServer, removeDir, bearer, type TestServer, withSeededServer, type Tokens, type SeededWorkspace } from '../helpers/server.js';

describe('workspaces and members', () => {
  let t: TestServer;
  let tokens: Tokens;
  let workspace: SeededWorkspace;
  withSeededServer('acme', (s) => ({ t, tokens, workspace } = s));

  it('creates a workspace (system admin) with its owner as administrator', async () => {
    const res = await t.http.get('/api/v1/workspaces/acme').set(bearer(tokens.owner));
    expect(res.status).to.equal(200);
    expect(res.body.data).to.include({ slug: 'acme', engineVersion: '1.0.0' });
    expect(res.body.data.owner.username).to.equal('acme-owner');
    expect(res.body.data.createdAt).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it('answers the same workspace by slug or by id', async () => {
    const byId = await t.http.get(`/api/v1/workspaces/${workspace.id}`).set(bearer(tokens.member));
    expect(byId.status).to.equal(200);
    expect(byId.body.data.slug).to.equal('acme');
  });

  it('refuses a taken slug (409), a bad slug and a bad engine version (400), and non-admins (403)', async () => {
    const taken = await t.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug: 'acme' });
    expect(taken.status).to.equal(409);
    expect(taken.body.error.code).to.equal('CONFLICT');
    for (const slug of ['Acme', '-x', 'a b', '', 'x'.repeat(65), 'ünï']) {
      const bad = await t.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug });
      expect(bad.status, slug).to.equal(400);
      expect(bad.body.error.message).to.match(/slug/);
    }
    const engine = await t.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug: 'eng', engineVersion: '1.2' });
    expect(engine.status).to.equal(400);
    expect(engine.body.error.message).to.match(/engineVersion/);
    const forbidden = await t.http.post('/api/v1/workspaces').set(bearer(tokens.owner)).send({ slug: 'mine' });
    expect(forbidden.status).to.equal(403);
    const list = await t.http.get('/api/v1/workspaces').set(bearer(tokens.root));
    expect(list.body.data.map((w: { slug: string }) => w.slug)).to.deep.equal(['acme']);
  });

  it('hides the workspace from non-members (404) and lists only own workspaces', async () => {
    const res = await t.http.get('/api/v1/workspaces/acme').set(bearer(tokens.outsider));
    expect(res.status).to.equal(404);
    expect(res.body.error.code).to.equal('NOT_FOUND');
    const list = await t.http.get('/api/v1/workspaces').set(bearer(tokens.outsider));
    expect(list.body.data).to.deep.equal([]);
    const mine = await t.http.get('/api/v1/workspaces').set(bearer(tokens.member));
    expect(mine.body.data.map((w: { slug: string }) => w.slug)).to.deep.equal(['acme']);
  });

  it('lets only administrators manage members', async () => {
    const res = await t.http.put('/api/v1/workspaces/acme/members/zed').set(bearer(tokens.member)).send({});
    expect(res.status).to.equal(403);
    const out = await t.http.put('/api/v1/workspaces/acme/members/zed').set(bearer(tokens.outsider)).send({});
    expect(out.status).to.equal(404);
  });

  it('adds a member with a profile, creating the user record', async () => {
    const res = await t.http.put('/api/v1/workspaces/acme/members/carol').set(bearer(tokens.owner))
      .send({ email: 'carol@example.org', firstName: 'Carol', website: 'https://carol.example' });
    expect(res.status).to.equal(200);
    expect(res.body.data).to.include({ username: 'carol', email: 'carol@example.org', firstName: 'Carol', lastName: null, emailVerified: false });
    const carol = await t.token('carol');
    expect((await t.http.get('/api/v1/workspaces/acme').set(bearer(carol))).status).to.equal(200);
  });

  it('keeps the last administrator (409) and lets a second admin remove the first', async () => {
    const last = await t.http.delete('/api/v1/workspaces/acme/members/acme-owner').set(bearer(tokens.owner));
    expect(last.status).to.equal(409);
    expect(last.body.error.message).to.match(/last administrator/);
    const promote = await t.http.put('/api/v1/workspaces/acme/members/dave').set(bearer(tokens.owner)).send({ admin: true });
    expect(promote.status).to.equal(200);
    const dave = await t.token('dave');
    // dave is now an administrator: he may manage members.
    const byDave = await t.http.put('/api/v1/workspaces/acme/members/erin').set(bearer(dave)).send({});
    expect(byDave.status).to.equal(200);
    const demote = await t.http.put('/api/v1/workspaces/acme/members/dave').set(bearer(dave)).send({ admin: false });
    expect(demote.status).to.equal(200);
    expect((await t.http.put('/api/v1/workspaces/acme/members/frank').set(bearer(dave)).send({})).status).to.equal(403);
  });

  it('removes a member, who then gets 404', async () => {
    const res = await t.http.delete('/api/v1/workspaces/acme/members/erin').set(bearer(tokens.owner));
    expect(res.status).to.equal(200);
    expect(res.body.data).to.be.a('string');
    const erin = await t.token('erin');
    expect((await t.http.get('/api/v1/workspaces/acme').set(bearer(erin))).status).to.equal(404);
    const again = await t.http.delete('/api/v1/workspaces/acme/members/erin').set(bearer(tokens.owner));
    expect(again.status).to.equal(404);
  });

  it('keeps a fellow administrator from removing the owner (409); a system administrator may, and may add the owner back', async () => {
    const owner = await t.token('solo-owner');
    expect((await t.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug: 'solo', owner: 'solo-owner' })).status).to.equal(201);
    const gina = await t.token('gina');
    expect((await t.http.put('/api/v1/workspaces/solo/members/gina').set(bearer(owner)).send({ admin: true })).status).to.equal(200);
    const refused = await t.http.delete('/api/v1/workspaces/solo/members/solo-owner').set(bearer(gina));
    expect(refused.status, JSON.stringify(refused.body)).to.equal(409);
    expect(refused.body.error.message).to.match(/only be removed from the workspace by a system administrator/);
    expect((await t.http.get('/api/v1/workspaces/solo').set(bearer(owner))).status, 'the owner is still in').to.equal(200);
    // The owner may not leave either: nobody but a system administrator could let them back in.
    expect((await t.http.delete('/api/v1/workspaces/solo/members/solo-owner').set(bearer(owner))).status).to.equal(409);
    expect((await t.http.delete('/api/v1/workspaces/solo/members/solo-owner').set(bearer(tokens.root))).status).to.equal(200);
    expect((await t.http.get('/api/v1/workspaces/solo').set(bearer(owner))).status).to.equal(404);
    expect((await t.http.put('/api/v1/workspaces/solo/members/solo-owner').set(bearer(tokens.root)).send({})).status).to.equal(200);
    expect((await t.http.get('/api/v1/workspaces/solo').set(bearer(owner))).status).to.equal(200);
  });
});

describe('request errors', () => {
  let t: TestServer;
  let root: string;
  before(async () => { t = await startTestServer({ WSM_MAX_BODY_BYTES: '2048' }); root = await t.token('root', { systemAdmin: true }); });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('answers malformed JSON with 400 and the envelope', async () => {
    const res = await t.http.post('/api/v1/workspaces').set(bearer(root)).set('Content-Type', 'application/json').send('{"slug": ');
    expect(res.status).to.equal(400);
    expect(res.body).to.deep.include({ success: false });
    expect(res.body.error.code).to.equal('BAD_REQUEST');
  });

  it('answers a wrong content type with 415', async () => {
    const res = await t.http.post('/api/v1/workspaces').set(bearer(root)).set('Content-Type', 'text/plain').send('slug=x');
    expect(res.status).to.equal(415);
    expect(res.body.error.code).to.equal('UNSUPPORTED_MEDIA_TYPE');
  });

  it('answers an oversized body with 413', async () => {
    const res = await t.http.post('/api/v1/workspaces').set(bearer(root)).send({ slug: 'big', name: 'x'.repeat(5000) });
    expect(res.status).to.equal(413);
    expect(res.body.error.code).to.equal('PAYLOAD_TOO_LARGE');
  });

  it('refuses unknown fields with a message naming them', async () => {
    const res = await t.http.post('/api/v1/workspaces').set(bearer(root)).send({ slug: 'ok', colour: 'red' });
    expect(res.status).to.equal(400);
    expect(res.body.error.message).to.match(/colour/);
  });

  it('serves the OpenAPI document and the docs page', async () => {
    const doc = await t.http.get('/api/v1/openapi.json').set(bearer(root));
    expect(doc.status).to.equal(200);
    expect(doc.body.openapi).to.equal('3.1.0');
    expect(doc.body.paths['/api/v1/workspaces'].post.requestBody).to.exist;
    const docs = await t.http.get('/docs/').set(bearer(root));
    expect(docs.status).to.equal(200);
    expect(docs.text).to.match(/swagger/i);
  });
});
