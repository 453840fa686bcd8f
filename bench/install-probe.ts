/**
 * Install probe (not part of `npm run bench`): how the time of one tiny
 * upload install (P2, waited to completion) grows with the number of
 * packages already installed in the workspace.
 *
 *   node --import tsx [--cpu-prof] bench/install-probe.ts [--packages 1000] [--every 100] [--concurrency 1]
 *
 * Starts the service in-process on a temp data dir, creates a workspace and
 * installs `--packages` one-matrix packages one after another, printing the
 * mean time per install of each block of `--every`. With `--concurrency N`,
 * N clients install at once (as bench/figures/lists.ts does) and the probe
 * prints the installs completed per second of each block instead.
 */
import path from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { startServer } from '../src/server.js';
import { mintToken } from '../src/auth/tokens.js';
import { api, installPackage } from './lib.js';
import { packageArchive } from './data.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const packages = Number(arg('packages') ?? 1000);
const every = Number(arg('every') ?? 100);
const concurrency = Number(arg('concurrency') ?? 1);
/** How often each client polls its command (P8), in ms. */
const pollMs = Number(arg('poll') ?? 2);

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'wsm-install-probe-'));
const config = loadConfig({
  PORT: '0', HOST: '127.0.0.1', WSM_DATA_DIR: dataDir, WSM_REGISTRY: path.join(dataDir, 'registry'),
  WSM_LOG_LEVEL: 'silent', WSM_DEMO: 'false',
});
const server = await startServer(config, createLogger('silent'));
const slug = 'probe';
try {
  const root = await mintToken(dataDir, 'root', { systemAdmin: true, ttlSeconds: 7200 });
  const created = await api(server.url, root, 'POST', '/api/v1/workspaces', { slug, owner: 'owner' });
  if (created.status !== 201) throw new Error(`workspace creation answered ${created.status}`);
  const owner = await mintToken(dataDir, 'owner', { ttlSeconds: 7200 });
  let block = 0;
  let done = 0;
  let next = 0;
  let blockStarted = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < packages) {
      const i = next++;
      const pkg = await packageArchive(`pkg-${i}`, '1.0.0', `https://bench.example/matrix/pkg-${i}`, 0);
      const { ms, commandId } = await installPackage(server.url, owner, slug, pkg, 'package.tgz', pollMs);
      block += ms;
      if (++done % every === 0) {
        const perSecond = every / ((performance.now() - blockStarted) / 1000);
        const pollStarted = performance.now();
        for (let k = 0; k < 100; k++) await api(server.url, owner, 'GET', `/api/v1/packages/${slug}/commands/${commandId}`);
        const poll = (performance.now() - pollStarted) / 100;
        console.log(`${String(done).padStart(6)} packages: ${(block / every).toFixed(1)} ms per install, ${perSecond.toFixed(1)} installs/s, P8 ${poll.toFixed(2)} ms`);
        block = 0;
        blockStarted = performance.now();
      }
    }
  }));
} finally {
  await server.close();
  rmSync(dataDir, { recursive: true, force: true });
}
