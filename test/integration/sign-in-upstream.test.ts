import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { startTestServer, removeDir, type TestServer } from '../helpers/server.js';

/** With WSM_OIDC_ISSUER, people sign in at that issuer: the service names it and sends sign-ins there. */
describe('sign-in with an upstream issuer (WSM_OIDC_ISSUER)', function () {
  this.timeout(60_000);
  let t: TestServer;
  let upstream: http.Server;
  let issuer: string;

  before(async () => {
    upstream = http.createServer((req, res) => {
      if (req.url === '/.well-known/openid-configuration') {
        res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ issuer, authorization_endpoint: `${issuer}/protocol/auth` }));
      } else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    issuer = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    t = await startTestServer({ WSM_OIDC_ISSUER: issuer, WSM_CLI_CLIENT_ID: 'plgt-at-upstream', WSM_MIN_CLI_VERSION: '2.1.0' });
  });
  after(async () => {
    await t?.close();
    if (t) removeDir(t.dataDir);
    upstream?.close();
  });

  it('names the upstream issuer in its discovery documents and runs no provider of its own', async () => {
    const doc = await t.http.get('/.well-known/poliglot.json');
    expect(doc.body).to.deep.include({ oauth: { issuer, cli_client_id: 'plgt-at-upstream' }, min_cli_version: '2.1.0' });
    expect((await t.http.get('/.well-known/oauth-protected-resource')).body.authorization_servers).to.deep.equal([issuer]);
    expect((await t.http.get('/.well-known/openid-configuration')).status).to.equal(401);
    expect((await t.http.post('/oauth2/token').type('form').send({ grant_type: 'authorization_code' })).status).to.equal(401);
  });

  it('sends a sign-in to the upstream issuer\'s authorization endpoint, with the request as it came', async () => {
    const res = await t.http.get('/oauth2/auth?client_id=plgt-at-upstream&response_type=code&state=a%20b').redirects(0);
    expect(res.status).to.equal(302);
    expect(res.headers.location).to.equal(`${issuer}/protocol/auth?client_id=plgt-at-upstream&response_type=code&state=a%20b`);
  });
});
