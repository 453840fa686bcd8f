import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { bearer, withSeededServer, type TestServer, type Tokens } from '../helpers/server.js';
import { tinyPackage } from '../helpers/packages.js';
import { waitForCommand } from '../helpers/lifecycle.js';

/**
 * The API's JSON answers (src/http/api.ts, `sendJson`), over HTTP: the
 * headers and validators Express's `res.json` gave them, which clients may
 * cache by.
 */
describe('JSON answers: type, length, weak ETag, 304 and HEAD', () => {
  let t: TestServer;
  let tokens: Tokens;
  withSeededServer('acme', (s) => ({ t, tokens } = s));

  it('carries its type, its length in bytes and a weak ETag of its body', async () => {
    const res = await t.http.get('/api/v1/workspaces/acme').set(bearer(tokens.member)).buffer(true);
    expect(res.status).to.equal(200);
    expect(res.headers['content-type']).to.equal('application/json; charset=utf-8');
    const body = Buffer.from(res.text, 'utf8');
    expect(Number(res.headers['content-length'])).to.equal(body.length);
    const sha1 = createHash('sha1').update(body).digest('base64').slice(0, 27);
    expect(res.headers.etag).to.equal(`W/"${body.length.toString(16)}-${sha1}"`);
    expect(res.headers['x-request-id']).to.match(/^[0-9a-f-]{36}$/);
  });

  it('answers 304 without a body to a matching If-None-Match, 200 to another, and HEAD without a body', async () => {
    const first = await t.http.get('/api/v1/workspaces/acme').set(bearer(tokens.member));
    const tag = first.headers.etag as string;
    const again = await t.http.get('/api/v1/workspaces/acme').set(bearer(tokens.member)).set('If-None-Match', tag);
    expect(again.status).to.equal(304);
    expect(again.text ?? '').to.equal('');
    expect(again.headers['content-type']).to.equal(undefined);
    const other = await t.http.get('/api/v1/workspaces/acme').set(bearer(tokens.member)).set('If-None-Match', 'W/"0-nothing"');
    expect(other.status).to.equal(200);
    expect(other.body.data.slug).to.equal('acme');
    const head = await t.http.head('/api/v1/workspaces/acme').set(bearer(tokens.member));
    expect(head.status).to.equal(200);
    expect(head.text ?? '').to.equal('');
    expect(head.headers.etag).to.equal(tag);
    expect(head.headers['content-length']).to.equal(first.headers['content-length']);
  });

  it('keeps validators to GET and HEAD: a write with If-None-Match is answered whole', async () => {
    const put = await t.http.put('/api/v1/workspaces/acme/members/acme-outsider').set(bearer(tokens.owner)).set('If-None-Match', '*').send({});
    expect(put.status).to.equal(200);
    expect(put.body.success).to.equal(true);
  });
});

/**
 * P5's latestVersion from the registry the service hosts: answered from
 * the registry's kept version list without asking it again, and never stale
 * (a publish or a yank moves the registry graph's revision).
 */
describe('P5 latestVersion with the hosted registry', function () {
  this.timeout(120_000);
  let t: TestServer;
  let tokens: Tokens;
  withSeededServer('acme', (s) => ({ t, tokens } = s), { WSM_REGISTRY: 'self' });

  it('shows a version published or yanked after the answer was kept', async () => {
    const root = await t.token('root', { systemAdmin: true });
    expect((await t.http.post('/api/v1/registry/publishers').set(bearer(root)).send({ slug: 'pub', owners: ['acme-owner'] })).status).to.equal(201);
    const publish = async (version: string) => {
      const res = await t.http.post('/api/v1/registry/publishers/pub/packages/widgets/versions').set(bearer(tokens.owner))
        .attach('file', await tinyPackage({ name: 'widgets', version }), { filename: 'widgets.tgz', contentType: 'application/gzip' });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
    };
    await publish('1.0.0');
    const install = await t.http.post('/api/v1/packages/acme/registry/pub/widgets/install').set(bearer(tokens.owner)).send({});
    expect(install.status).to.equal(202);
    expect((await waitForCommand(t, tokens.owner, 'acme', install.body.data.id)).status).to.equal('completed');
    const read = async () => (await t.http.get('/api/v1/packages/acme/widgets').set(bearer(tokens.member))).body.data;
    for (let i = 0; i < 3; i++) expect(await read()).to.include({ currentVersion: '1.0.0', latestVersion: '1.0.0', updateAvailable: false });

    await publish('1.1.0');
    expect(await read()).to.include({ currentVersion: '1.0.0', latestVersion: '1.1.0', updateAvailable: true });
    expect(await read()).to.include({ latestVersion: '1.1.0' });

    const yank = await t.http.post('/api/v1/registry/publishers/pub/packages/widgets/versions/1.1.0/yank').set(bearer(tokens.owner)).send({ reason: 'broken' });
    expect(yank.status, JSON.stringify(yank.body)).to.equal(200);
    expect(await read()).to.include({ currentVersion: '1.0.0', latestVersion: '1.0.0', updateAvailable: false });
  });
});
