import http from 'node:http';
import { expect } from 'chai';
import { bearer, removeDir, seedWorkspace, startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Issue 12, acceptances 6 and 9: access is checked before a body is read
 * (an upload by a caller who may not make it is answered while the client
 * has sent only a small part of it), and an existing user's profile is
 * changed only by that user or a system administrator.
 */
const UPLOAD_BYTES = 20 * 1024 * 1024;
const FIRST_PART = 64 * 1024;

interface EarlyAnswer {
  status: number;
  body: { success: boolean; error?: { code: string; message: string } };
  /** Bytes of the body the client had sent when the answer came. */
  sentWhenAnswered: number;
}

/**
 * Starts a 20 MB multipart upload, sends its first 64 KB, and waits for the
 * answer without sending more. Resolves with the answer, or rejects when
 * none comes within `waitMs` (the server is waiting for the body).
 */
function startUpload(t: TestServer, path: string, token: string, waitMs = 10_000, method = 'POST'): Promise<EarlyAnswer> {
  const url = new URL(path, t.url);
  const boundary = '----wsmsecurityboundary';
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.tgz"\r\nContent-Type: application/gzip\r\n\r\n`);
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const total = head.length + UPLOAD_BYTES + tail.length;
  return new Promise((resolve, reject) => {
    const sent = head.length + FIRST_PART;
    const req = http.request({
      host: url.hostname, port: url.port, path: url.pathname + url.search, method,
      headers: { ...bearer(token), 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': String(total) },
    });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`no answer within ${waitMs} ms while the client had sent ${sent} of ${total} bytes: the body is being waited for`));
    }, waitMs);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        clearTimeout(timer);
        req.destroy();
        resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')), sentWhenAnswered: sent });
      });
    });
    req.on('error', (err) => {
      // The server may close the connection after answering; the answer has been read by then.
      if ((err as NodeJS.ErrnoException).code !== 'ECONNRESET' && (err as NodeJS.ErrnoException).code !== 'EPIPE') {
        clearTimeout(timer);
        reject(err);
      }
    });
    req.write(head);
    req.write(Buffer.alloc(FIRST_PART, 0x61));
  });
}

describe('Security: access before the body, and who may change a profile', function () {
  this.timeout(120_000);
  let t: TestServer;
  let tokens: { root: string; owner: string; member: string; outsider: string };

  before(async () => {
    t = await startTestServer();
    ({ tokens } = await seedWorkspace(t, 'acme'));
    await seedWorkspace(t, 'other');
  });

  after(async () => {
    await t.close();
    removeDir(t.dataDir);
  });

  it('refuses an upload by a non-member (404) and a member (403) before the body is read', async () => {
    for (const [method, path] of [['POST', '/api/v1/packages/acme/install'], ['POST', '/api/v1/extensions/acme?targetMatrix=https%3A%2F%2Fexample.org%2Fm'],
      ['PUT', `/api/v1/extensions/acme/${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}`]] as const) {
      const outsider = await startUpload(t, path, tokens.outsider, 10_000, method);
      expect(outsider.status, path).to.equal(404);
      expect(outsider.body.success).to.equal(false);
      expect(outsider.body.error!.code).to.equal('NOT_FOUND');
      expect(outsider.sentWhenAnswered).to.be.lessThan(UPLOAD_BYTES / 100);
    }
    const member = await startUpload(t, '/api/v1/packages/acme/install', tokens.member);
    expect(member.status).to.equal(403);
    expect(member.body.error!.code).to.equal('FORBIDDEN');
    const noWorkspace = await startUpload(t, '/api/v1/packages/nowhere/install', tokens.owner);
    expect(noWorkspace.status).to.equal(404);
  });

  it('checks access before reading a JSON body on every workspace route', async () => {
    const broken = '{"this is": not json';
    const cases: Array<[string, string, string, number]> = [
      ['post', '/api/v1/commands/acme', tokens.outsider, 404],
      ['put', '/api/v1/workspaces/acme/members/acme-member', tokens.member, 403],
      ['patch', '/api/v1/packages/acme/plain/auto-update', tokens.member, 403],
      ['post', '/api/v1/packages/acme/registry/examples/x/install', tokens.outsider, 404],
      ['post', '/api/v1/workspaces', tokens.owner, 403],
    ];
    for (const [method, path, token, status] of cases) {
      const res = await (t.http as unknown as Record<string, (p: string) => import('supertest').Test>)[method]!(path)
        .set(bearer(token)).type('application/json').send(broken);
      expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).to.equal(status);
      expect(res.body.success).to.equal(false);
    }
  });

  it('keeps memory flat over 30 refused 20 MB uploads', async () => {
    const before = process.memoryUsage().rss;
    for (let i = 0; i < 30; i++) {
      const answer = await startUpload(t, '/api/v1/packages/acme/install', tokens.outsider);
      expect(answer.status).to.equal(404);
    }
    const grown = process.memoryUsage().rss - before;
    // Generous: 30 bodies read whole would be 600 MB.
    expect(grown).to.be.lessThan(150 * 1024 * 1024);
  });

  it('lets a workspace administrator add an existing user but not change their profile (403)', async () => {
    // other-member belongs only to workspace "other"; its profile comes from its own token.
    const victimToken = await t.token('other-member', { email: 'victim@example.org', firstName: 'Vic' });
    expect((await t.http.get('/api/v1/workspaces').set(bearer(victimToken))).status).to.equal(200);
    const rewrite = await t.http.put('/api/v1/workspaces/acme/members/other-member').set(bearer(tokens.owner))
      .send({ email: 'attacker@example.org', website: 'https://evil.example' });
    expect(rewrite.status).to.equal(403);
    expect(rewrite.body.error.code).to.equal('FORBIDDEN');
    expect(rewrite.body.error.message).to.include('email').and.include('website').and.include('system administrator');
    // Nothing changed, not even the membership.
    const users = await t.http.get('/api/v1/iam/other/users').set(bearer(tokens.root));
    const victim = users.body.data.items.find((u: { username: string }) => u.username === 'other-member');
    expect(victim).to.include({ email: 'victim@example.org', firstName: 'Vic', website: null });
    const acmeUsers = await t.http.get('/api/v1/iam/acme/users').set(bearer(tokens.owner));
    expect(acmeUsers.body.data.items.map((u: { username: string }) => u.username)).to.not.include('other-member');
    // Adding without profile fields, or with the values it already has, is allowed.
    const add = await t.http.put('/api/v1/workspaces/acme/members/other-member').set(bearer(tokens.owner)).send({ email: 'victim@example.org' });
    expect(add.status, JSON.stringify(add.body)).to.equal(200);
    expect(add.body.data).to.include({ email: 'victim@example.org' });
    // A system administrator may change it; so may the user (as an administrator of a workspace).
    const root = await t.http.put('/api/v1/workspaces/acme/members/other-member').set(bearer(tokens.root)).send({ website: 'https://vic.example' });
    expect(root.status).to.equal(200);
    expect(root.body.data.website).to.equal('https://vic.example');
    const self = await t.http.put('/api/v1/workspaces/other/members/other-owner').set(bearer(await t.token('other-owner'))).send({ lastName: 'Self' });
    expect(self.status).to.equal(200);
    expect(self.body.data.lastName).to.equal('Self');
    // A user the service does not know yet gets the profile the administrator gives.
    const fresh = await t.http.put('/api/v1/workspaces/acme/members/newcomer').set(bearer(tokens.owner)).send({ email: 'new@example.org' });
    expect(fresh.status).to.equal(200);
    expect(fresh.body.data.email).to.equal('new@example.org');
  });
});
