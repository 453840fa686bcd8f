/**
 * Roles probe (not part of `npm run bench`): installs a package of N roles
 * (default 15,000: the "event loop during installs" figure's package) twice
 * into one workspace of a service started in-process, printing each event
 * of the command as it appears (with the time since the request) and P9's
 * time. Shows which step of a large install takes the time.
 *
 *   node --import tsx bench/roles-probe.ts [roles]
 */
import path from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { startServer } from '../src/server.js';
import { mintToken } from '../src/auth/tokens.js';
import { api } from './lib.js';
import { rolesPackageArchive } from './data.js';

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'wsm-roles-probe-'));
const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', WSM_DATA_DIR: dataDir, WSM_REGISTRY: path.join(dataDir, 'registry'), WSM_LOG_LEVEL: 'silent', WSM_DEMO: 'false' });
const server = await startServer(config, createLogger('silent'));
try {
  const root = await mintToken(dataDir, 'root', { systemAdmin: true, ttlSeconds: 7200 });
  const created = await api(server.url, root, 'POST', '/api/v1/workspaces', { slug: 'probe', owner: 'owner' });
  if (created.status !== 201) throw new Error(`workspace creation answered ${created.status}`);
  const owner = await mintToken(dataDir, 'owner', { ttlSeconds: 7200 });
  const n = Number(process.argv[2] ?? 15000);
  for (let round = 0; round < 2; round++) {
    const pkg = await rolesPackageArchive(`roles${round}`, '1.0.0', `https://bench.example/matrix/roles${round}`, n);
    const t0 = performance.now();
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(pkg)], { type: 'application/gzip' }), 'package.tgz');
    const res = await fetch(`${server.url}/api/v1/packages/probe/install`, { method: 'POST', headers: { Authorization: `Bearer ${owner}` }, body: form });
    const commandId = ((await res.json()) as any).data.id as string;
    let seen = 0;
    let ev: any;
    for (;;) {
      ev = await api(server.url, owner, 'GET', `/api/v1/packages/probe/commands/${commandId}/events`);
      const list = ev.json.data as Array<Record<string, string>>;
      for (; seen < list.length; seen++) console.log(`   [${(performance.now() - t0).toFixed(0)} ms] ${list[seen]!.message}`);
      const st = await api(server.url, owner, 'GET', `/api/v1/packages/probe/commands/${commandId}`);
      if (st.json.data.status === 'completed' || st.json.data.status === 'failed') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const ms = performance.now() - t0;
    console.log(`install ${n} roles: ${ms.toFixed(0)} ms`);
    let prev = 0;
    for (const e of ev.json.data as Array<Record<string, string>>) {
      const t = Date.parse(e.timestamp ?? e.at ?? e.createdAt ?? '');
      console.log(`  +${prev ? t - prev : 0} ms ${e.message ?? JSON.stringify(e)}`);
      prev = t;
    }
    const s = performance.now();
    const r = await api(server.url, owner, 'GET', `/api/v1/packages/probe/commands/${commandId}/validation-report`);
    console.log(`  P9 ${r.status} ${(performance.now() - s).toFixed(0)} ms`);
  }
} finally {
  await server.close();
  rmSync(dataDir, { recursive: true, force: true });
}
// The pipeline's kept-warm worker would hold the process open for its idle time.
process.exit(0);
