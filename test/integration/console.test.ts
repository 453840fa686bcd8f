import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startTestServer, removeDir, bearer, seedWorkspace, tempDir, type TestServer } from '../helpers/server.js';
import { tinyPackage } from '../helpers/packages.js';
import { bigMatrixTurtle, waitForCommand } from '../helpers/lifecycle.js';
import { artifactDir, CHROMIUM_FLAGS, findChromium } from '../helpers/browser.js';

/**
 * The web console (docs/console.md) driven in Debian's headless
 * Chromium against a real server: each flow a person would follow, checked
 * against what the public API then answers. One screenshot per page goes to
 * test-artifacts/console/.
 */
const PT = 'https://example.org/operating-models/project-tracking';

describe('web console at /console, in headless Chromium', function () {
  this.timeout(180_000);
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  let browser: Browser;
  let page: Page;
  let files: string;
  let shots: string;
  const pageErrors: string[] = [];
  /** Made by the tests below and visited again by the later ones. */
  let installCommandId = '';
  let slashCommandId = '';

  before(async function () {
    const executablePath = findChromium();
    if (!executablePath) {
      if (process.env.CI === 'true') throw new Error('Chromium not found at /usr/bin/chromium: install it (apt-get install -y chromium) or set CHROMIUM_PATH; the console tests need it in CI');
      console.log('    skipped: no Chromium at /usr/bin/chromium (apt-get install -y chromium to run the console tests)');
      this.skip();
    }
    // A generous query time limit: this test is about the pages, not the limit, and a busy machine is slow.
    t = await startTestServer({ WSM_QUERY_TIMEOUT_MS: '60000' });
    ({ tokens } = await seedWorkspace(t, 'acme'));
    files = tempDir('wsm-console-files-');
    shots = artifactDir('console');
    browser = await chromium.launch({ executablePath, args: CHROMIUM_FLAGS, headless: true });
    page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    page.on('pageerror', (err) => pageErrors.push(err.message));
    page.on('console', (msg) => { if (msg.type() === 'error' && !/status of 4\d\d/.test(msg.text())) pageErrors.push(msg.text()); });
  });

  after(async () => {
    await browser?.close();
    await t?.close();
    if (t) removeDir(t.dataDir);
    if (files) removeDir(files);
  });

  /** Errors the page logged, by test; checked by the last test so one bad page does not stop the others. */
  const errorsByTest: Record<string, string[]> = {};
  afterEach(async function () {
    if (this.currentTest?.state === 'failed' && page) await page.screenshot({ path: path.join(shots, `failed-${this.currentTest.title.replace(/\W+/g, '-').slice(0, 60)}.png`), fullPage: true });
    const errors = pageErrors.splice(0);
    if (errors.length) errorsByTest[this.currentTest?.title ?? '?'] = errors;
  });

  const shot = (name: string) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
  const api = (token: string, p: string) => t.http.get(p).set(bearer(token));
  /** Replaces the text of a CodeMirror editor the way a person pastes. */
  const typeInEditor = async (selector: string, text: string) => {
    await page.click(`${selector} .cm-content`);
    await page.keyboard.press('Control+A');
    await page.keyboard.press('Delete');
    await page.keyboard.insertText(text);
  };
  const signIn = async (token: string) => {
    await page.goto(`${t.url}/console/#/sign-in`);
    await page.fill('#credential', token);
    await page.click('#sign-in');
  };

  /** Waits until no part of the page says it is loading (the first answers have replaced every indicator). */
  const settled = (p: Page = page) => p.waitForFunction(() => !document.querySelector('.loading, [aria-busy="true"]'), null, { timeout: 60_000 });
  /** Runs the saved slash command on its page and opens the Graph tab. */
  const openGraph = async (p: Page) => {
    await p.goto(`${t.url}/console/#/w/acme/slash/${slashCommandId}`);
    await p.waitForSelector('#slash-run');
    await p.click('#slash-run');
    await p.waitForSelector('#result-table tbody tr');
    await p.click('#tab-graph');
    await p.waitForSelector('#result-graph[data-ready="true"]');
  };
  const zoomOf = async (p: Page = page) => Number(await p.getAttribute('#result-graph', 'data-zoom'));

  it('serves the console and its bundled scripts from the service, with no other origin', async () => {
    const res = await t.http.get('/console/');
    expect(res.status).to.equal(200);
    expect(res.headers['content-type']).to.match(/text\/html/);
    expect(res.headers['content-security-policy']).to.match(/script-src 'self'/);
    expect(res.text).to.not.match(/https?:\/\//);
    const app = await t.http.get('/console/app.js');
    expect(app.status).to.equal(200);
    expect(app.headers['content-type']).to.match(/javascript/);
    expect((await t.http.get('/console/app.js').set('If-None-Match', app.headers.etag!)).status).to.equal(304);
    expect((await t.http.get('/console/nothing.js')).status).to.equal(401);
    const requests: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    await page.goto(`${t.url}/console`);
    await page.waitForSelector('#credential');
    expect(requests.filter((u) => !u.startsWith(t.url))).to.deep.equal([]);
  });

  it('signs in with a token; refuses a bad one with the service\'s message', async () => {
    await page.goto(`${t.url}/console/`);
    await page.fill('#credential', 'not.a.token');
    await page.selectOption('#credential-kind', 'token');
    await page.click('#sign-in');
    await page.waitForSelector('.notice.error');
    expect(await page.textContent('.notice.error')).to.match(/Not accepted/);
    await shot('01-sign-in');
    await page.selectOption('#credential-kind', 'auto');
    await signIn(tokens.owner);
    // A single workspace: straight to its packages.
    await page.waitForURL(/#\/w\/acme\/packages$/);
    await page.goto(`${t.url}/console/#/workspaces`);
    await page.waitForSelector('#workspaces a.workspace-link');
    expect(await page.textContent('#workspaces')).to.contain('acme');
    await shot('02-workspaces');
  });

  it('installs an example package from the registry and follows its log to the end', async () => {
    await page.goto(`${t.url}/console/#/w/acme/packages`);
    await page.fill('#install-publisher', 'examples');
    await page.fill('#install-name', 'project-tracking');
    await page.dispatchEvent('#install-name', 'change');
    await page.waitForSelector('.version-box[data-ready]');
    // The hosted registry lists versions (a picker); without it the version is typed.
    if (await page.$('#install-version')) await page.selectOption('#install-version', '1.0.0');
    else await page.fill('#install-version-text', '1.0.0');
    await page.check('#install-auto-update');
    await page.click('#install');
    await page.waitForURL(/#\/w\/acme\/commands\/[0-9a-f-]{36}$/);
    const commandId = page.url().split('/').pop()!;
    installCommandId = commandId;
    await page.waitForSelector('#command[data-finished]', { timeout: 60_000 });
    expect(await page.getAttribute('#command', 'data-finished')).to.equal('completed');
    const events = (await api(tokens.owner, `/api/v1/packages/acme/commands/${commandId}/events`)).body.data as Array<{ message: string }>;
    const shown = await page.$$eval('#log li', (lis) => lis.map((li) => li.textContent ?? ''));
    expect(shown).to.have.length(events.length);
    events.forEach((e, i) => expect(shown[i]).to.contain(e.message));
    expect(await page.textContent('#log-mode')).to.equal('(finished)');
    expect(await page.textContent('#report-summary')).to.match(/conforms/);
    await shot('03-command-log');

    const installed = (await api(tokens.owner, '/api/v1/packages/acme/project-tracking')).body.data;
    expect(installed).to.include({ currentVersion: '1.0.0', registryPublisher: 'examples', autoUpdate: true, updateAvailable: true });
  });

  it('shows a log live while the command runs (upload of a slow package)', async () => {
    const uri = 'https://example.org/packages/slow/main';
    const archive = await tinyPackage({ name: 'slow', matrices: [{ name: 'main', uri, turtle: bigMatrixTurtle(uri, 12_000) }] });
    const file = path.join(files, 'slow-1.0.0.tgz');
    writeFileSync(file, archive);
    await page.goto(`${t.url}/console/#/w/acme/packages`);
    await page.setInputFiles('#upload-file', file);
    await page.click('#upload');
    await page.waitForURL(/#\/w\/acme\/commands\/[0-9a-f-]{36}$/);
    // Seen while the command still runs: some lines of the log, and the page saying it follows live.
    await page.waitForFunction(() => document.querySelectorAll('#log li').length > 0 && !document.querySelector('#command[data-finished]'), null, { timeout: 30_000, polling: 50 });
    // Streamed when the service offers P10 as Server-Sent Events, else polled.
    const probe = await fetch(`${t.url}/api/v1/packages/acme/commands/${page.url().split('/').pop()}/events`, { headers: { ...bearer(tokens.owner), Accept: 'text/event-stream' } });
    const streams = (probe.headers.get('content-type') ?? '').startsWith('text/event-stream');
    await probe.body?.cancel();
    expect(await page.textContent('#log-mode')).to.equal(streams ? '(live: event stream)' : '(live: polling)');
    await page.waitForSelector('#command[data-finished="completed"]', { timeout: 90_000 });
  });

  it('manages packages: the list, the auto-update toggle, uninstall', async () => {
    await page.goto(`${t.url}/console/#/w/acme/packages`);
    const toggle = page.locator('input.auto-update[data-package="project-tracking"]');
    await toggle.waitFor();
    expect(await toggle.isChecked()).to.equal(true);
    await toggle.uncheck();
    await page.waitForSelector('.notice.ok');
    expect((await api(tokens.owner, '/api/v1/packages/acme/project-tracking')).body.data.autoUpdate).to.equal(false);
    expect(await page.locator('input.auto-update[data-package="slow"]').isDisabled()).to.equal(true);
    expect(await page.textContent('#packages')).to.match(/project-tracking[\s\S]*1\.0\.0[\s\S]*examples\/project-tracking/);
    await shot('04-packages');
    await page.click('button.uninstall[data-package="slow"]');
    await page.waitForURL(/#\/w\/acme\/commands\/[0-9a-f-]{36}$/);
    await page.waitForSelector('#command[data-finished="completed"]', { timeout: 60_000 });
    expect(await page.textContent('#command')).to.contain('UNINSTALL slow');
    expect((await api(tokens.owner, '/api/v1/packages/acme/slow')).status).to.equal(404);
  });

  it('reads a failed install\'s validation report as a table', async () => {
    const uri = 'https://example.org/packages/broken/main';
    const turtle = `@prefix mtx: <https://poliglot.io/os/spec/matrix#> .
@prefix iam: <https://poliglot.io/os/spec/iam#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
<${uri}> a mtx:Matrix ; rdfs:label "Broken" ; rdfs:comment "A role without a label." .
<${uri}#nameless> a iam:Role .
`;
    const file = path.join(files, 'broken-1.0.0.tgz');
    writeFileSync(file, await tinyPackage({ name: 'broken', matrices: [{ name: 'main', uri, turtle }] }));
    await page.goto(`${t.url}/console/#/w/acme/packages`);
    await page.setInputFiles('#upload-file', file);
    await page.click('#upload');
    await page.waitForURL(/#\/w\/acme\/commands\/[0-9a-f-]{36}$/);
    const commandId = page.url().split('/').pop()!;
    await page.waitForSelector('#command[data-finished]', { timeout: 60_000 });
    expect(await page.getAttribute('#command', 'data-finished')).to.equal('failed');
    await page.waitForSelector('#report tbody tr');
    const report = (await api(tokens.owner, `/api/v1/packages/acme/commands/${commandId}/validation-report`)).body.data;
    const rows = await page.$$eval('#report tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')));
    expect(rows).to.have.length(report.violationCount + report.warningCount + report.infoCount);
    expect(rows[0]![0]).to.equal('Violation');
    expect(rows[0]![1]).to.equal(`${uri}#nameless`);
    expect(rows[0]![4]).to.equal(report.violations[0].message);
    expect(await page.textContent('#report-summary')).to.match(/does not conform/);
    expect(await page.textContent('#command-error')).to.match(/violation/);
    await shot('05-failed-report');
  });

  it('assigns a role to a member and removes it', async () => {
    await page.goto(`${t.url}/console/#/w/acme/iam`);
    await page.waitForSelector('#roles-table');
    await page.selectOption('#assign-role', { label: 'Contributor' });
    await page.selectOption('#assign-user', { label: 'acme-member' });
    await page.click('#assign');
    await page.waitForSelector('.holder[data-role="Contributor"][data-principal="acme-member"]');
    const users = (await api(tokens.owner, '/api/v1/iam/acme/users?username=acme-member')).body.data.items as Array<{ id: string; username: string }>;
    const member = users.find((u) => u.username === 'acme-member')!;
    const roles = (await api(tokens.owner, `/api/v1/iam/acme/users/${member.id}/roles`)).body.data as Array<{ label: string }>;
    expect(roles.map((r) => r.label)).to.include('Contributor');
    expect(await page.textContent('#agents')).to.contain('Task triager');
    await shot('06-roles');
    // Assigning again: the service's 409 message, nothing changed.
    await page.click('#assign');
    await page.waitForSelector('.notice.error');
    expect(await page.textContent('.notice.error')).to.match(/already/);
    await page.click('.holder[data-role="Contributor"][data-principal="acme-member"] button.remove');
    await page.waitForSelector('.holder[data-role="Contributor"][data-principal="acme-member"]', { state: 'detached' });
    const after = (await api(tokens.owner, `/api/v1/iam/acme/users/${member.id}/roles`)).body.data as Array<{ label: string }>;
    expect(after.map((r) => r.label)).to.not.include('Contributor');
  });

  it('writes and runs a slash command; the result as a table and as a graph', async () => {
    await page.goto(`${t.url}/console/#/w/acme/slash`);
    await page.waitForSelector('#slash-script .cm-content');
    await page.fill('#slash-alias', 'roles:labels');
    await page.fill('#slash-description', 'Every role with its label');
    await typeInEditor('#slash-script', `PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
PREFIX iam: <https://poliglot.io/os/spec/iam#>
CONSTRUCT { ?role a iam:Role ; rdfs:label ?label }
WHERE { ?role a iam:Role ; rdfs:label ?label }`);
    await page.click('#slash-save');
    await page.waitForURL(/#\/w\/acme\/slash\/[0-9a-f-]{36}$/);
    const id = page.url().split('/').pop()!;
    slashCommandId = id;
    const saved = (await api(tokens.owner, `/api/v1/commands/acme/${id}`)).body.data;
    expect(saved).to.include({ alias: 'roles:labels', scriptType: 'CONSTRUCT' });
    expect(saved.scriptContent).to.contain('CONSTRUCT { ?role a iam:Role');
    await page.click('#slash-run');
    await page.waitForSelector('#result-table tbody tr');
    const executed = await t.http.post(`/api/v1/commands/acme/${id}/execute`).set(bearer(tokens.owner)).set('Accept', 'application/n-triples');
    const count = Number(executed.headers['x-triple-count']);
    expect(count).to.be.greaterThan(0);
    expect(await page.$$eval('#result-table tbody tr', (trs) => trs.length)).to.equal(count);
    expect(await page.textContent('#result-table')).to.contain('"Contributor"');
    await shot('07-slash-table');
    await page.click('#tab-graph');
    await page.waitForSelector('#result-graph[data-ready="true"]');
    expect(Number(await page.getAttribute('#result-graph', 'data-edges'))).to.equal(count);
    await page.waitForTimeout(300);
    await shot('08-slash-graph');
  });

  it('creates an extension with the Turtle editor; it deploys', async () => {
    await page.goto(`${t.url}/console/#/w/acme/extensions`);
    await page.waitForSelector('#extension-turtle .cm-content');
    await page.fill('#extension-label', 'Auditors');
    await page.fill('#extension-target', PT);
    await typeInEditor('#extension-turtle', `@prefix iam: <https://poliglot.io/os/spec/iam#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
<${PT}#Auditor> a iam:Role ; rdfs:label "Auditor" ; rdfs:comment "Reads everything." .`);
    await page.click('#extension-save');
    await page.waitForURL(/#\/w\/acme\/extensions\/[0-9a-f-]{36}$/);
    const id = page.url().split('/').pop()!;
    const ext = (await api(tokens.owner, `/api/v1/extensions/acme/${id}`)).body.data;
    expect(ext).to.include({ label: 'Auditors', targetMatrixUri: PT });
    expect(ext.content).to.contain('"Auditor"');
    await waitForCommand(t, tokens.owner, 'acme', ext.lastCommandId);
    await page.reload();
    await page.waitForSelector('#extensions-list');
    expect(await page.textContent('#extension-state')).to.match(/active/);
    expect(await page.textContent('#extensions-list')).to.contain('Auditors');
    await shot('09-extensions');
  });

  it('runs SPARQL as an administrator: SELECT as a table, CONSTRUCT as a graph', async () => {
    await page.goto(`${t.url}/console/#/w/acme/sparql`);
    await page.waitForSelector('#sparql-query .cm-content');
    await typeInEditor('#sparql-query', `PREFIX iam: <https://poliglot.io/os/spec/iam#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
SELECT DISTINCT ?label WHERE { ?role a iam:Role ; rdfs:label ?label } ORDER BY ?label`);
    await page.click('#sparql-run');
    await page.waitForSelector('#result-table tbody tr');
    const labels = await page.$$eval('#result-table tbody td', (tds) => tds.map((td) => td.textContent));
    expect(labels).to.include.members(['"Auditor"', '"Contributor"', '"Project lead"']);
    await shot('10-sparql');
    await typeInEditor('#sparql-query', 'CONSTRUCT { ?s ?p ?o } WHERE { ?s a <https://poliglot.io/os/spec/iam#Agent> ; ?p ?o }');
    await page.click('#sparql-run');
    await page.waitForSelector('#tab-graph');
    await page.click('#tab-graph');
    await page.waitForSelector('#result-graph[data-ready="true"]');
    expect(Number(await page.getAttribute('#result-graph', 'data-edges'))).to.be.greaterThan(0);
  });

  it('fits a graph answer in its box on load; the zoom buttons zoom in, out and back to the fit', async () => {
    await openGraph(page);
    const fitted = await zoomOf();
    expect(fitted).to.be.greaterThan(0);
    await page.click('#result-graph .zoom-in');
    await page.waitForFunction((z) => Number(document.querySelector('#result-graph')!.getAttribute('data-zoom')) > z, fitted);
    const zoomedIn = await zoomOf();
    await page.click('#result-graph .zoom-out');
    await page.click('#result-graph .zoom-out');
    await page.waitForFunction((z) => Number(document.querySelector('#result-graph')!.getAttribute('data-zoom')) < z, fitted);
    expect(await zoomOf()).to.be.lessThan(zoomedIn);
    // Fit gives back the zoom the graph was drawn at: it was fitted on load.
    await page.click('#result-graph .zoom-fit');
    await page.waitForFunction((z) => document.querySelector('#result-graph')!.getAttribute('data-zoom') === z.toFixed(4), fitted);
    expect(await zoomOf()).to.equal(fitted);
  });

  it('says a page is loading while the service has not answered, then shows the answer', async () => {
    // The roles are held back until the indicator has been seen; the other requests go through.
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    let seen = 0;
    const roles = /\/api\/v1\/iam\/acme\/roles\?/;
    await page.route(roles, async (route) => {
      seen += 1;
      await held;
      await route.continue();
    });
    try {
      await page.goto(`${t.url}/console/#/w/acme/iam`);
      await page.waitForSelector('#roles .loading[aria-busy="true"]');
      expect(await page.textContent('#roles .loading')).to.match(/Loading the roles/);
      expect(await page.isDisabled('#assign-role')).to.equal(true);
      expect(await page.isDisabled('#assign')).to.equal(true);
      expect(await page.$('#roles-table')).to.equal(null);
      await shot('11-roles-loading');
      expect(seen).to.be.greaterThan(0);
      release();
      await page.waitForSelector('#roles-table');
      await settled();
      expect(await page.$('.loading')).to.equal(null);
      expect(await page.isDisabled('#assign-role')).to.equal(false);
    } finally {
      release();
      await page.unroute(roles);
    }
  });

  it('shows the service\'s message where a page could not load', async () => {
    const packages = (await api(tokens.owner, '/api/v1/packages/no-such-workspace')).body.error.message as string;
    expect(packages).to.be.a('string').and.not.equal('');
    await page.goto(`${t.url}/console/#/w/no-such-workspace/packages`);
    await page.waitForSelector('#packages .notice.error[role="alert"]');
    expect(await page.textContent('#packages .notice.error')).to.equal(packages);
    const roles = (await api(tokens.owner, '/api/v1/iam/no-such-workspace/roles')).body.error.message as string;
    await page.goto(`${t.url}/console/#/w/no-such-workspace/iam`);
    await page.waitForSelector('#roles .notice.error[role="alert"]');
    expect(await page.textContent('#roles .notice.error')).to.equal(roles);
    expect(await page.$('.loading')).to.equal(null);
    await shot('12-load-error');
  });

  it('holds every page at 420 px wide: the page never scrolls sideways, wide tables scroll in their box', async () => {
    const narrow = await browser.newPage({ viewport: { width: 420, height: 860 } });
    narrow.on('pageerror', (err) => pageErrors.push(err.message));
    const signInNarrow = async () => {
      await narrow.fill('#credential', tokens.owner);
      await narrow.click('#sign-in');
      await narrow.waitForURL(/#\/w\/acme\/packages$/);
    };
    /** The page's width beyond the viewport's, if any, after a screenshot for the record. */
    const overflow = async (name: string): Promise<string[]> => {
      await settled(narrow);
      await narrow.screenshot({ path: path.join(shots, `420-${name}.png`), fullPage: true });
      const { scroll, width } = await narrow.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: window.innerWidth }));
      return scroll > width ? [`${name}: ${scroll} px wide in ${width}`] : [];
    };
    try {
      await narrow.goto(`${t.url}/console/#/sign-in`);
      await narrow.waitForSelector('#credential');
      const wide = await overflow('sign-in');
      await signInNarrow();
      const pages: Array<[string, string, string]> = [
        ['workspaces', '#/workspaces', '#workspaces'],
        ['packages', '#/w/acme/packages', '#packages table'],
        ['command', `#/w/acme/commands/${installCommandId}`, '#command[data-finished]'],
        ['roles', '#/w/acme/iam', '#roles-table'],
        ['slash', '#/w/acme/slash', '#slash-list'],
        ['extensions', '#/w/acme/extensions', '#extensions-list'],
        ['sparql', '#/w/acme/sparql', '#sparql-query .cm-content'],
      ];
      for (const [name, hash, ready] of pages) {
        await narrow.goto(`${t.url}/console/${hash}`);
        await narrow.waitForSelector(ready, { timeout: 60_000 });
        wide.push(...await overflow(name));
      }
      // The packages table is wider than a phone: it scrolls inside its box, and the box stays inside the page.
      await narrow.goto(`${t.url}/console/#/w/acme/packages`);
      await narrow.waitForSelector('#packages table');
      await settled(narrow);
      const box = await narrow.$eval('#packages .table-scroll', (el) => ({ scroll: el.scrollWidth, client: el.clientWidth, right: el.getBoundingClientRect().right }));
      expect(box.scroll).to.be.greaterThan(box.client);
      expect(box.right).to.be.at.most(420);
      await narrow.click('#packages button.small:not(.danger)');
      await narrow.waitForSelector('#packages .history table');
      wide.push(...await overflow('packages-history'));
      await openGraph(narrow);
      wide.push(...await overflow('slash-graph'));
      expect(wide).to.deep.equal([]);
    } finally {
      await narrow.close();
    }
  });

  it('refuses the SPARQL page to a plain member with the service\'s message', async () => {
    await signIn(tokens.member);
    await page.waitForURL(/#\/w\/acme\/packages$/);
    await page.goto(`${t.url}/console/#/w/acme/sparql`);
    await page.waitForSelector('#sparql-query .cm-content');
    await page.click('#sparql-run');
    await page.waitForSelector('.notice.error');
    expect(await page.textContent('.notice.error')).to.match(/admin/i);
    expect(await page.$('#result-table')).to.equal(null);
  });

  it('signs in with an API key, sent as X-Api-Key', async function () {
    const made = await t.http.post('/api/v1/users/me/keys').set(bearer(tokens.owner)).send({ name: 'console test', expiresIn: 'SEVEN_DAYS' });
    if (made.status === 404) {
      console.log('    skipped: this service makes no API keys');
      this.skip();
    }
    expect(made.status, JSON.stringify(made.body)).to.equal(201);
    const seen: Array<Record<string, string>> = [];
    const listen = (r: import('playwright-core').Request) => { if (r.url().includes('/api/v1/')) seen.push(r.headers()); };
    page.on('request', listen);
    try {
      await signIn(made.body.data.key);
      await page.waitForSelector('#packages table');
      expect(await page.textContent('#packages')).to.contain('project-tracking');
      expect(seen.length).to.be.greaterThan(1);
      for (const headers of seen) {
        expect(headers['x-api-key']).to.equal(made.body.data.key);
        expect(headers.authorization).to.equal(undefined);
      }
    } finally {
      page.off('request', listen);
    }
  });

  it('logged no errors in the browser on any page', () => {
    expect(errorsByTest).to.deep.equal({});
  });
});
