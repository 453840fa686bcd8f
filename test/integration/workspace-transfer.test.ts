import { expect } from 'chai';
import { gunzipSync, gzipSync } from 'node:zlib';
import * as canonize from 'rdf-canonize';
import { Parser } from 'n3';
import { bearer, removeDir, seedWorkspace, startTestServer, type TestServer, type Tokens } from '../helpers/server.js';
import { installMatrices } from '../helpers/installs.js';

const MATRIX = 'https://example.org/matrices/transfer';
/** A matrix with text beyond ASCII and blank nodes, both of which must survive a round trip. */
const TURTLE = `@prefix mtx: <https://poliglot.io/os/spec/matrix#> .
@prefix iam: <https://poliglot.io/os/spec/iam#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix ex: <https://example.org/terms#> .
<${MATRIX}> a mtx:Matrix ; rdfs:label "Übertragung — 移動 ✓" ; rdfs:comment "Zeilen\\nund \\"Anführung\\"." ;
  ex:contact [ ex:name "Zoë" ; ex:place [ ex:city "Kraków" ] ] .
<${MATRIX}#reviewer> a iam:Role ; rdfs:label "Prüfer" ; rdfs:comment "Reviews work." .
<${MATRIX}#bot> a iam:Agent ; rdfs:label "Bot" ; rdfs:comment "A bot." ; iam:hasRole <${MATRIX}#reviewer> .
`;

const B_BASE = 'https://b.example/wsm/';

const canonical = (nquads: string): Promise<string> =>
  canonize.canonize(nquads, { algorithm: 'RDFC-1.0', inputFormat: 'application/n-quads' });

async function exportOf(t: TestServer, token: string, ws: string, accept = 'application/n-quads'): Promise<string> {
  const res = await t.http.get(`/api/v1/workspaces/${ws}/export`).set(bearer(token)).set('Accept', accept)
    .set('Accept-Encoding', 'identity').buffer(true).parse((r, done) => {
      const chunks: Buffer[] = [];
      r.on('data', (c: Buffer) => chunks.push(c));
      r.on('end', () => done(null, Buffer.concat(chunks).toString('utf8')));
    });
  expect(res.status, String(res.body)).to.equal(200);
  expect(res.headers['content-type']).to.match(new RegExp(`^${accept}`));
  return res.body as string;
}

function importBody(t: TestServer, token: string, body: string | Buffer, type = 'application/n-quads', query = '') {
  return t.http.post(`/api/v1/workspaces/import${query}`).set(bearer(token)).set('Content-Type', type).send(body);
}

describe('workspace export and import', function () {
  this.timeout(120_000);
  let a: TestServer;
  let b: TestServer;
  let tokens: Tokens;
  let exported: string;

  before(async () => {
    a = await startTestServer();
    // Another base IRI: on the remote store (WSM_TEST_STORE=sparql) two servers up at once share the graphs of one base.
    b = await startTestServer({ WSM_BASE_IRI: B_BASE });
    ({ tokens } = await seedWorkspace(a, 'acme'));
    await installMatrices(a, tokens.owner, 'acme', 'transfer', [{ uri: MATRIX, turtle: TURTLE }]);
    const made = await a.http.post('/api/v1/commands/acme').set(bearer(tokens.member))
      .send({ alias: 'roles:all', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT { ?r a <https://poliglot.io/os/spec/iam#Role> } WHERE { ?r a <https://poliglot.io/os/spec/iam#Role> }' });
    expect(made.status, JSON.stringify(made.body)).to.equal(200);
    exported = await exportOf(a, tokens.owner, 'acme');
  });
  after(async () => {
    for (const t of [a, b]) {
      await t.close();
      removeDir(t.dataDir);
    }
  });

  it('exports the workspace: its graphs, its record and its members, nothing of other users or the registry', async () => {
    const quads = new Parser({ format: 'N-Quads' }).parse(exported);
    const graphs = new Set(quads.map((q) => q.graph.value));
    expect([...graphs].some((g) => g.endsWith('/iam'))).to.equal(true);
    expect([...graphs].some((g) => /\/matrices\/[^/]+$/.test(g))).to.equal(true);
    expect([...graphs].some((g) => /\/commands\/[^/]+$/.test(g)), 'command history').to.equal(true);
    expect([...graphs].some((g) => g.endsWith('/slash-commands'))).to.equal(true);
    expect([...graphs].filter((g) => !g.includes('/workspaces/'))).to.deep.equal(['https://workspaces.local/system']);
    const usernames = quads.filter((q) => q.predicate.value === 'https://w3id.org/wsm/ns#username').map((q) => q.object.value).sort();
    expect(usernames).to.deep.equal(['acme-member', 'acme-owner']);
    // The text itself (an engine may write it with \u escapes).
    expect(quads.map((q) => q.object.value)).to.include('Übertragung — 移動 ✓');
  });

  it('imports into a fresh service (another base IRI), and exporting again gives the same dataset (canonicalized)', async () => {
    const root = await b.token('root', { systemAdmin: true });
    const res = await importBody(b, root, gzipSync(exported)).set('Content-Encoding', 'gzip');
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body.data.slug).to.equal('acme');
    const owner = await b.token('acme-owner');
    const again = await exportOf(b, owner, 'acme');
    // The same dataset, its IRIs under the importing service's base.
    expect(again).to.include(`<${B_BASE}system>`);
    expect(await canonical(again.replaceAll(B_BASE, 'https://workspaces.local/'))).to.equal(await canonical(exported));
    // The imported workspace works: its members, its package, its slash command.
    const member = await b.token('acme-member');
    const roles = await b.http.post('/api/v1/commands/acme/alias/roles:all/execute').set(bearer(member)).send({});
    expect(roles.status, JSON.stringify(roles.body)).to.equal(200);
    expect(JSON.stringify(roles.body)).to.include(`${MATRIX}#reviewer`);
    const packages = await b.http.get('/api/v1/packages/acme').set(bearer(owner));
    expect(JSON.stringify(packages.body)).to.include('transfer');
  });

  it('exports TriG, and gzip when the client accepts it', async () => {
    const trig = await exportOf(a, tokens.owner, 'acme', 'application/trig');
    const fromTrig = new Parser({ format: 'TriG' }).parse(trig);
    const fromNq = new Parser({ format: 'N-Quads' }).parse(exported);
    expect(fromTrig.length).to.equal(fromNq.length);
    const zipped = await a.http.get('/api/v1/workspaces/acme/export').set(bearer(tokens.owner)).set('Accept-Encoding', 'gzip')
      .buffer(true).parse((r, done) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c));
        r.on('end', () => done(null, Buffer.concat(chunks)));
      });
    expect(zipped.headers['content-encoding']).to.equal('gzip');
    // supertest undoes the encoding; the bytes are N-Quads either way.
    const text = Buffer.isBuffer(zipped.body) && zipped.body[0] === 0x1f ? gunzipSync(zipped.body).toString('utf8') : String(zipped.body);
    expect(await canonical(text)).to.equal(await canonical(exported));
  });

  it('imports under another slug, moving IRIs to the importing service\'s base', async () => {
    const c = await startTestServer({ WSM_BASE_IRI: 'https://elsewhere.example/wsm/' });
    try {
      const root = await c.token('root', { systemAdmin: true });
      const res = await importBody(c, root, exported, 'application/n-quads', '?slug=acme-copy');
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      expect(res.body.data.slug).to.equal('acme-copy');
      const owner = await c.token('acme-owner');
      const out = await exportOf(c, owner, 'acme-copy');
      // Every IRI moved (the text of history, such as an event's message, stays as it was written).
      const iris = new Parser({ format: 'N-Quads' }).parse(out).flatMap((q) => [q.subject, q.predicate, q.object, q.graph])
        .filter((term) => term.termType === 'NamedNode').map((term) => term.value);
      expect(iris.filter((v) => v.startsWith('https://workspaces.local/'))).to.deep.equal([]);
      expect(iris).to.include('https://elsewhere.example/wsm/system');
      expect(out).to.include('"acme-copy"');
    } finally {
      await c.close();
      removeDir(c.dataDir);
    }
  });

  it('refuses bodies an export never holds (400), taken slugs and ids (409), leaving nothing behind', async () => {
    const root = await a.token('root', { systemAdmin: true });
    const count = async () => (await a.http.get('/api/v1/workspaces').set(bearer(root))).body.data.length as number;
    const before = await count();
    const broken = await importBody(a, root, '<https://x> <https://y> "unterminated .\n');
    expect(broken.status).to.equal(400);
    expect(broken.body.error.message).to.match(/not valid N-Quads/);
    const registry = await importBody(a, root, `${exported}<https://x.example/p> <https://x.example/q> "r" <https://workspaces.local/registry> .\n`, 'application/n-quads', '?slug=evil');
    expect(registry.status).to.equal(400);
    expect(registry.body.error.message).to.match(/system graph part|not one of the workspace's own graphs/);
    const apiKey = await importBody(a, root, `${exported}<https://workspaces.local/id/user/x> <https://w3id.org/wsm/ns#keyHash> "h" <https://workspaces.local/system> .\n`, 'application/n-quads', '?slug=evil');
    expect(apiKey.status).to.equal(400);
    expect(apiKey.body.error.message).to.match(/keyHash/);
    const empty = await importBody(a, root, '<https://x.example/a> <https://x.example/b> <https://x.example/c> <https://x.example/g> .\n');
    expect(empty.status).to.equal(400);
    expect(empty.body.error.message).to.match(/no workspace record/);
    const sameId = await importBody(a, root, exported, 'application/n-quads', '?slug=acme-two');
    expect(sameId.status).to.equal(409);
    expect(sameId.body.error.message).to.match(/id .* already exists/);
    const badSlug = await importBody(a, root, exported, 'application/n-quads', '?slug=Not%20A%20Slug');
    expect(badSlug.status).to.equal(400);
    const type = await importBody(a, root, exported, 'text/turtle');
    expect(type.status).to.equal(415);
    expect(await count()).to.equal(before);
  });

  it('lets only system administrators import and only administrators export', async () => {
    const importByOwner = await importBody(a, tokens.owner, exported);
    expect(importByOwner.status).to.equal(403);
    const exportByMember = await a.http.get('/api/v1/workspaces/acme/export').set(bearer(tokens.member));
    expect(exportByMember.status).to.equal(403);
    const exportByOutsider = await a.http.get('/api/v1/workspaces/acme/export').set(bearer(tokens.outsider));
    expect(exportByOutsider.status).to.equal(404);
    const unacceptable = await a.http.get('/api/v1/workspaces/acme/export').set(bearer(tokens.owner)).set('Accept', 'text/turtle');
    expect(unacceptable.status).to.equal(406);
  });
});
