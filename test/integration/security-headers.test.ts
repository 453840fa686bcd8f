import { expect } from 'chai';
import { chromium } from 'playwright-core';
import type { Response } from 'superagent';
import supertest from 'supertest';
import { bearer, removeDir, seedWorkspace, startTestServer, type TestServer } from '../helpers/server.js';
import { CHROMIUM_FLAGS, findChromium } from '../helpers/browser.js';

/**
 * Every answer says `X-Content-Type-Options: nosniff` and carries a
 * Content-Security-Policy: `default-src 'none'` for everything that is not
 * one of the service's HTML pages, which keep a policy of their own that
 * lets them work.
 */
const API_POLICY = /^default-src 'none'(;|$)/;

function expectApiHeaders(res: Response, what: string): void {
  expect(res.headers['x-content-type-options'], what).to.equal('nosniff');
  expect(res.headers['content-security-policy'], what).to.match(API_POLICY);
}

describe('security headers on every answer', function () {
  this.timeout(120_000);
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];

  before(async () => {
    t = await startTestServer({ WSM_REGISTRY: 'self' });
    ({ tokens } = await seedWorkspace(t, 'acme'));
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('on every route of the OpenAPI document, whatever the answer (2xx, 4xx, 503), for a member, an outsider and nobody', async () => {
    const openapi = await t.http.get('/api/v1/openapi.json');
    expectApiHeaders(openapi, 'openapi.json');
    const paths = openapi.body.paths as Record<string, Record<string, unknown>>;
    let answers = 0;
    for (const [path, methods] of Object.entries(paths)) {
      for (const method of Object.keys(methods) as Array<'get' | 'post' | 'put' | 'patch' | 'delete'>) {
        const url = path.replace(/\{workspace\}/g, 'acme').replace(/\{[^}]+\}/g, 'x');
        for (const auth of [bearer(tokens.member), bearer(tokens.outsider), {}]) {
          const res = await t.http[method](url).set(auth).set('Accept', 'application/json').ok(() => true);
          // 503 is a route's answer too (the secrets routes without a secrets key); no internal error.
          expect(res.status, `${method} ${url}`).not.to.equal(500);
          expectApiHeaders(res, `${method.toUpperCase()} ${url}: ${res.status}`);
          answers++;
        }
      }
    }
    expect(answers).to.be.greaterThan(100);
  });

  it('on answers outside the routes: health, metrics, unknown paths, paths Express reads itself, bad JSON, Turtle and SPARQL results', async () => {
    const cases: Array<[string, () => supertest.Test]> = [
      ['health', () => t.http.get('/health')],
      ['metrics without a token', () => t.http.get('/metrics')],
      ['metrics', () => t.http.get('/metrics').set(bearer(tokens.root))],
      ['an unknown path', () => t.http.get('/nowhere').set(bearer(tokens.member))],
      ['a path with a bad escape', () => t.http.get('/api/v1/workspaces/%zz').set(bearer(tokens.member))],
      ['bad JSON', () => t.http.post('/api/v1/workspaces').set(bearer(tokens.root)).set('Content-Type', 'application/json').send('{"slug":')],
      ['GET of MCP', () => t.http.get('/mcp/acme').set(bearer(tokens.member))],
      ['SPARQL results', () => t.http.get('/api/v1/sparql/acme').set(bearer(tokens.owner)).set('Accept', 'application/sparql-results+json')
        .query({ query: 'SELECT * WHERE { ?s ?p ?o } LIMIT 1' })],
      ['Turtle', () => t.http.get('/api/v1/sparql/acme').set(bearer(tokens.owner)).set('Accept', 'text/turtle')
        .query({ query: 'CONSTRUCT WHERE { ?s ?p ?o } LIMIT 1' })],
    ];
    for (const [what, send] of cases) {
      const res = await send().ok(() => true);
      expect(res.status, what).to.be.below(500);
      expectApiHeaders(res, `${what}: ${res.status}`);
    }
  });

  it('the console and the API docs keep a page policy of their own, still with nosniff', async () => {
    for (const url of ['/console/', '/docs/']) {
      const res = await t.http.get(url);
      expect(res.status, url).to.equal(200);
      expect(res.headers['content-type']).to.match(/^text\/html/);
      expect(res.headers['x-content-type-options']).to.equal('nosniff');
      const policy = res.headers['content-security-policy'] as string;
      expect(policy, url).to.match(/default-src 'self'/);
      expect(policy, url).to.match(/script-src 'self'(;|$)/);
      expect(policy, url).to.match(/frame-ancestors 'none'/);
    }
  });

  it('the API docs work under their policy in Chromium: the operations are listed and nothing was refused', async function () {
    const executablePath = findChromium();
    if (!executablePath) {
      if (process.env.CI === 'true') throw new Error('Chromium not found: install it (apt-get install -y chromium) or set CHROMIUM_PATH');
      this.skip();
    }
    const browser = await chromium.launch({ executablePath: executablePath!, args: CHROMIUM_FLAGS, headless: true });
    try {
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on('pageerror', (err) => errors.push(err.message));
      page.on('console', (msg) => { if (msg.type() === 'error') errors.push(msg.text()); });
      await page.goto(`${t.url}/docs/`);
      await page.locator('.opblock-summary-path').first().waitFor({ timeout: 60_000 });
      expect(await page.locator('.opblock-summary-path').count()).to.be.greaterThan(30);
      expect(errors, errors.join('\n')).to.deep.equal([]);
    } finally {
      await browser.close();
    }
  });
});
