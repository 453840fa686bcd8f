/**
 * `npm run screenshots`: the console's main pages at 1280 and 420 px wide,
 * written to docs/console/ (shown in docs/console.md). It starts the
 * service on a free port with a fresh data directory (the demo workspace,
 * the example registry), installs incident-response into `demo` as the
 * README does, adds an extension, and drives Debian's Chromium
 * (CHROMIUM_PATH, else /usr/bin/chromium) through playwright-core.
 * Each page is shot once its loading indicators are gone.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Page } from 'playwright-core';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { startServer } from '../src/server.js';
import { mintToken } from '../src/auth/tokens.js';
import { CHROMIUM_FLAGS, findChromium } from '../test/helpers/browser.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const out = path.join(root, 'docs', 'console');
const WIDTHS = [1280, 420] as const;
const INCIDENT = 'https://example.org/operating-models/incident-response';

async function call(url: string, token: string, method: string, p: string, init: { json?: unknown; form?: FormData } = {}): Promise<{ data: Record<string, unknown> }> {
  const res = await fetch(`${url}${p}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(init.json !== undefined ? { 'Content-Type': 'application/json' } : {}) },
    body: init.json !== undefined ? JSON.stringify(init.json) : init.form,
  });
  const body = (await res.json()) as { data: Record<string, unknown>; error?: { message: string } };
  if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${body.error?.message ?? ''}`);
  return body;
}

async function waitFor(url: string, token: string, commandId: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const { data } = await call(url, token, 'GET', `/api/v1/packages/demo/commands/${commandId}`);
    const status = String(data.status).toLowerCase();
    if (status === 'completed') return;
    if (status === 'failed') throw new Error(`command ${commandId} failed: ${String(data.errorMessage)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`command ${commandId} did not finish`);
}

/** Waits until no part of the page says it is loading. */
const settled = (page: Page) => page.waitForFunction(() => !document.querySelector('.loading, [aria-busy="true"]'), null, { timeout: 60_000 });

async function main(): Promise<void> {
  const executablePath = findChromium();
  if (!executablePath) throw new Error('No Chromium at /usr/bin/chromium: apt-get install -y chromium, or set CHROMIUM_PATH');
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'wsm-screenshots-'));
  const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', WSM_DATA_DIR: dataDir, WSM_REGISTRY: path.join(dataDir, 'registry'), WSM_LOG_LEVEL: 'silent', WSM_DEMO: 'true' });
  const server = await startServer(config, createLogger('silent'));
  const browser = await chromium.launch({ executablePath, args: CHROMIUM_FLAGS, headless: true });
  try {
    const token = await mintToken(dataDir, 'admin', { systemAdmin: true, ttlSeconds: 3600 });
    const { url } = server;
    const install = await call(url, token, 'POST', '/api/v1/packages/demo/registry/examples/incident-response/install', { json: {} });
    const commandId = String(install.data.id);
    await waitFor(url, token, commandId);
    const form = new FormData();
    form.append('file', new Blob([`@prefix iam: <https://poliglot.io/os/spec/iam#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
<${INCIDENT}#Auditor> a iam:Role ; rdfs:label "Auditor" ; rdfs:comment "Reads every incident, changes nothing." .
`], { type: 'text/turtle' }), 'auditor.ttl');
    const extension = await call(url, token, 'POST', `/api/v1/extensions/demo?targetMatrix=${encodeURIComponent(INCIDENT)}&label=Auditors`, { form });
    const redeploy = extension.data.lastCommandId as string | undefined;
    if (redeploy) await waitFor(url, token, redeploy);
    const commands = (await call(url, token, 'GET', '/api/v1/commands/demo?scope=all')).data as unknown as Array<{ id: string; alias: string }>;
    const slash = commands.find((c) => c.alias === 'roles-of-agent');
    if (!slash) throw new Error('the demo workspace has no /roles-of-agent');

    mkdirSync(out, { recursive: true });
    for (const width of WIDTHS) {
      const page = await browser.newPage({ viewport: { width, height: width > 600 ? 860 : 900 } });
      const shot = async (name: string) => {
        await settled(page);
        await page.screenshot({ path: path.join(out, `${name}-${width}.png`), fullPage: true });
        console.log(`docs/console/${name}-${width}.png`);
      };
      const visit = async (hash: string, ready: string) => {
        await page.goto(`${url}/console/${hash}`);
        await page.waitForSelector(ready, { timeout: 60_000 });
      };
      await visit('#/sign-in', '#credential');
      await page.fill('#credential', token);
      await page.click('#sign-in');
      await page.waitForSelector('#packages table', { timeout: 60_000 });
      await shot('packages');
      await visit(`#/w/demo/commands/${commandId}`, '#command[data-finished]');
      await shot('command');
      await visit('#/w/demo/iam', '#roles-table');
      await shot('roles');
      await visit(`#/w/demo/slash/${slash.id}`, '#slash-run');
      await page.click('#slash-run');
      await page.waitForSelector('#result-table tbody tr', { timeout: 60_000 });
      await page.click('#tab-graph');
      await page.waitForSelector('#result-graph[data-ready="true"]');
      await shot('slash-graph');
      await visit('#/w/demo/extensions', '#extensions-list');
      await shot('extensions');
      await visit('#/w/demo/sparql', '#sparql-query .cm-content');
      await page.click('#sparql-run');
      await page.waitForSelector('#result-table tbody tr', { timeout: 60_000 });
      await shot('sparql');
      await page.close();
    }
  } finally {
    await browser.close();
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
// The store's worker threads and timers would keep the process up after the server closed.
process.exit(0);
