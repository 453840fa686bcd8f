import { expect } from 'chai';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';

const EXT = '/api/v1/extensions';
const UNKNOWN_ID = '6d1f3d4e-8c35-4f0e-9f8e-2b7a5d1c9e01';

const ROLE_TTL = `@prefix iam: <https://poliglot.io/os/spec/iam#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
<https://example.org/ext#Auditor> a iam:Role ; rdfs:label "Auditor" .
`;

describe('extensions: access and request checks (X1-X5)', () => {
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  before(async () => {
    t = await startTestServer({ WSM_MAX_BODY_BYTES: String(64 * 1024) });
    ({ tokens } = await seedWorkspace(t, 'acme'));
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  const calls = () => [
    { name: 'X1', run: () => t.http.get(`${EXT}/acme/${UNKNOWN_ID}`) },
    { name: 'X2', run: () => t.http.put(`${EXT}/acme/${UNKNOWN_ID}?label=x`) },
    { name: 'X3', run: () => t.http.delete(`${EXT}/acme/${UNKNOWN_ID}`) },
    { name: 'X4', run: () => t.http.get(`${EXT}/acme`) },
    { name: 'X5', run: () => t.http.post(`${EXT}/acme?targetMatrix=https://example.org/m`).attach('file', Buffer.from(ROLE_TTL), 'ext.ttl') },
  ];

  it('answers 401 without a token, with WWW-Authenticate', async () => {
    for (const call of calls()) {
      const res = await call.run();
      expect(res.status, call.name).to.equal(401);
      expect(res.headers['www-authenticate'], call.name).to.match(/^Bearer/);
    }
  });

  it('answers 404 to a caller who is not a member, and for an unknown workspace', async () => {
    for (const call of calls()) {
      const res = await call.run().set(bearer(tokens.outsider));
      expect(res.status, call.name).to.equal(404);
      expect(res.body.error.code, call.name).to.equal('NOT_FOUND');
    }
    const res = await t.http.get(`${EXT}/nowhere`).set(bearer(tokens.owner));
    expect(res.status).to.equal(404);
  });

  it('answers 403 to a member who is not an administrator', async () => {
    for (const call of calls()) {
      const res = await call.run().set(bearer(tokens.member));
      expect(res.status, call.name).to.equal(403);
      expect(res.body.error.code, call.name).to.equal('FORBIDDEN');
    }
  });

  it('lets administrators (owner, system admin) list: an empty array at first', async () => {
    for (const token of [tokens.owner, tokens.root]) {
      const res = await t.http.get(`${EXT}/acme`).set(bearer(token));
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.equal({ success: true, data: [] });
    }
  });

  it('answers 404 for an unknown extension on X1, X2, X3 (also for a malformed id)', async () => {
    for (const id of [UNKNOWN_ID, 'not-a-uuid']) {
      const get = await t.http.get(`${EXT}/acme/${id}`).set(bearer(tokens.owner));
      expect(get.status).to.equal(404);
      expect(get.body.error.message).to.match(/Extension/);
      const put = await t.http.put(`${EXT}/acme/${id}?label=x`).set(bearer(tokens.owner));
      expect(put.status).to.equal(404);
      const del = await t.http.delete(`${EXT}/acme/${id}`).set(bearer(tokens.owner));
      expect(del.status).to.equal(404);
    }
  });

  it('X5 needs targetMatrix (400), an absolute IRI (400), and an installed matrix (404)', async () => {
    const missing = await t.http.post(`${EXT}/acme`).set(bearer(tokens.owner)).attach('file', Buffer.from(ROLE_TTL), 'ext.ttl');
    expect(missing.status).to.equal(400);
    expect(missing.body.error.message).to.match(/targetMatrix is required/);
    const relative = await t.http.post(`${EXT}/acme?targetMatrix=not%20an%20iri`).set(bearer(tokens.owner)).attach('file', Buffer.from(ROLE_TTL), 'ext.ttl');
    expect(relative.status).to.equal(400);
    expect(relative.body.error.message).to.match(/absolute IRI/);
    const unknown = await t.http.post(`${EXT}/acme?targetMatrix=${encodeURIComponent('https://example.org/none')}`)
      .set(bearer(tokens.owner)).attach('file', Buffer.from(ROLE_TTL), 'ext.ttl');
    expect(unknown.status).to.equal(404);
    expect(unknown.body.error.message).to.match(/No matrix with URI <https:\/\/example\.org\/none> is installed/);
    // The form field works like the query parameter.
    const form = await t.http.post(`${EXT}/acme`).set(bearer(tokens.owner))
      .field('targetMatrix', 'https://example.org/none').attach('file', Buffer.from(ROLE_TTL), 'ext.ttl');
    expect(form.status).to.equal(404);
    const list = await t.http.get(`${EXT}/acme`).set(bearer(tokens.owner));
    expect(list.body.data).to.deep.equal([]);
  });

  it('X5 refuses a body that is not multipart (415) and a file over the size limit (413)', async () => {
    const json = await t.http.post(`${EXT}/acme?targetMatrix=https://example.org/none`).set(bearer(tokens.owner)).send({ content: ROLE_TTL });
    expect(json.status).to.equal(415);
    expect(json.body.error.message).to.match(/multipart\/form-data/);
    const big = Buffer.from(`# ${'x'.repeat(70 * 1024)}\n${ROLE_TTL}`);
    const tooLarge = await t.http.post(`${EXT}/acme?targetMatrix=https://example.org/none`).set(bearer(tokens.owner)).attach('file', big, 'big.ttl');
    expect(tooLarge.status).to.equal(413);
    expect(tooLarge.body.error.code).to.equal('PAYLOAD_TOO_LARGE');
  });
});

describe('extensions: Turtle checks at the request (X5)', () => {
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  before(async () => {
    t = await startTestServer();
    ({ tokens } = await seedWorkspace(t, 'acme'));
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  const post = (file: Buffer, name = 'ext.ttl', contentType?: string) =>
    t.http.post(`${EXT}/acme?targetMatrix=${encodeURIComponent('https://example.org/none')}`).set(bearer(tokens.owner))
      .attach('file', file, contentType ? { filename: name, contentType } : name);

  it('answers 400 with the line and column of a Turtle syntax error', async () => {
    const broken = `${ROLE_TTL}<https://example.org/ext#X> a iam:Role ;\n  rdfs:label "unterminated .\n`;
    const res = await post(Buffer.from(broken));
    expect(res.status).to.equal(400);
    expect(res.body.error.code).to.equal('BAD_REQUEST');
    expect(res.body.error.message).to.match(/^ext\.ttl: Turtle syntax error at line 5, column 14/);
    expect(res.body.error.details).to.include({ line: 5, column: 14 });
    const undeclared = await post(Buffer.from('<https://example.org/a> a nope:Role .\n'));
    expect(undeclared.status).to.equal(400);
    expect(undeclared.body.error.message).to.match(/line 1, column 27: Undefined prefix "nope:"/);
  });

  it('refuses RDF/XML (400 by content, 415 by declared type), JSON-LD, non-UTF-8 and empty files', async () => {
    const rdfxml = `<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="https://example.org/a"/></rdf:RDF>`;
    const sniffed = await post(Buffer.from(rdfxml), 'ext.ttl');
    expect(sniffed.status).to.equal(400);
    expect(sniffed.body.error.message).to.match(/RDF\/XML/);
    const declared = await post(Buffer.from(rdfxml), 'ext.rdf', 'application/rdf+xml');
    expect(declared.status).to.equal(415);
    expect(declared.body.error.message).to.match(/Turtle/);
    const jsonld = await post(Buffer.from('{"@id": "https://example.org/a"}'), 'ext.ttl');
    expect(jsonld.status).to.equal(400);
    expect(jsonld.body.error.message).to.match(/JSON/);
    const latin1 = await post(Buffer.from([0x3c, 0x61, 0x3e, 0x20, 0xe9, 0xff, 0x0a]), 'ext.ttl');
    expect(latin1.status).to.equal(400);
    expect(latin1.body.error.message).to.match(/UTF-8/);
    const empty = await post(Buffer.from('# nothing here\n@prefix ex: <https://example.org/> .\n'), 'ext.ttl');
    expect(empty.status).to.equal(400);
    expect(empty.body.error.message).to.match(/no triples/);
    const noFile = await t.http.post(`${EXT}/acme?targetMatrix=https://example.org/none`).set(bearer(tokens.owner)).field('label', 'x');
    expect(noFile.status).to.equal(400);
    expect(noFile.body.error.message).to.match(/"file"/);
    const emptyLabel = await post(Buffer.from(ROLE_TTL)).field('label', '  ');
    expect(emptyLabel.status).to.equal(400);
  });
});
