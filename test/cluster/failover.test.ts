import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { freshClusterUrl } from '../helpers/cluster.js';
import { bearer, removeDir, seedWorkspace, startTestServer, tempDir, type TestServer } from '../helpers/server.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const run = promisify(execFile);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const PROGRAMS = ['/usr/bin/patroni', '/usr/bin/etcd', '/usr/bin/pgbackrest', '/usr/sbin/haproxy'];
const NO_HA = "Debian's patroni, etcd-server, pgbackrest and haproxy are not installed (`npm run postgres-ha` installs them, as root; CI=true runs these tests always)";

/**
 * PostgreSQL with failover (`npm run postgres-ha`: etcd, a Patroni primary
 * and synchronous standby, HAProxy on Patroni's /primary, pgBackRest),
 * started for this file under a data directory of its own; the service on
 * it through HAProxy, driven over HTTP.
 */
describe('PostgreSQL with failover and backups (npm run postgres-ha)', function () {
  this.timeout(300_000);
  let dir: string;
  let url: string;
  const dirs: string[] = [];
  const servers: TestServer[] = [];
  const ha = async (...args: string[]) => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', path.join(root, 'scripts/postgres-ha.ts'), ...args], {
      cwd: root, env: { ...process.env, WSM_DATA_DIR: dir }, maxBuffer: 1 << 24,
    });
    return stdout;
  };
  const setting = (out: string) => out.split('\n').find((l) => l.startsWith('WSM_POSTGRES_URL='))!.slice('WSM_POSTGRES_URL='.length);
  const server = async (at: string) => {
    const dataDir = tempDir();
    dirs.push(dataDir);
    const t = await startTestServer({ WSM_STORE: 'cluster', WSM_POSTGRES_URL: at }, dataDir);
    servers.push(t);
    return t;
  };

  before(async function () {
    if (!PROGRAMS.every(existsSync) && process.env.CI !== 'true') {
      console.log(`      skipped: ${NO_HA}`);
      this.skip();
    }
    dir = tempDir('wsm-ha-');
    url = setting(await ha('start'));
  });
  after(async () => {
    for (const t of servers) await t.close().catch(() => undefined);
    for (const d of dirs) removeDir(d);
    if (dir) {
      await ha('stop').catch((err: unknown) => console.error(String(err)));
      removeDir(dir);
    }
  });

  it('a point-in-time restore from pgBackRest to a time between two writes holds the first and not the second', async () => {
    const at = await freshClusterUrl(url);
    const t = await server(at);
    const { tokens } = await seedWorkspace(t, 'acme');
    await ha('backup');
    expect((await t.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug: 'pitr-first', owner: 'acme-owner' })).status).to.equal(201);
    await sleep(1500);
    const between = new Date().toISOString();
    await sleep(1500);
    expect((await t.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug: 'pitr-second', owner: 'acme-owner' })).status).to.equal(201);
    expect((await t.http.get('/api/v1/workspaces/pitr-second').set(bearer(tokens.owner))).status).to.equal(200);

    const restored = new URL(setting(await ha('restore', '--to-time', between)));
    restored.searchParams.set('options', new URL(at).searchParams.get('options')!);
    const r = await server(restored.toString());
    expect((await r.http.get('/api/v1/workspaces/pitr-first').set(bearer(tokens.owner))).status).to.equal(200);
    expect((await r.http.get('/api/v1/workspaces/pitr-second').set(bearer(tokens.owner))).status).to.equal(404);
    expect((await r.http.get('/api/v1/workspaces/acme').set(bearer(tokens.owner))).status).to.equal(200);
  });

  /**
   * Four writers create workspaces over HTTP (each retrying its workspace
   * after a 503 or a dropped connection) while `kill` runs; the seconds from
   * the kill to the first acknowledged write sent after it are printed, not
   * asserted. Every acknowledged write must then be read by a new instance,
   * which replays the journal from the primary of now.
   */
  const drill = async (what: string, kill: string[]) => {
    const at = await freshClusterUrl(url);
    const t = await server(at);
    const { tokens } = await seedWorkspace(t, 'acme');
    const acknowledged: string[] = [];
    const unexpected: string[] = [];
    /** Slugs answered with an error (503, a dropped connection) whose retry found them created: a committed write answered as failed. */
    const erredYetCommitted: string[] = [];
    let refused = 0;
    let killedAt = 0;
    let firstAfterKill = 0;
    let afterKill = 0;
    const stopAt = Date.now() + 120_000;
    const writer = async (w: number) => {
      for (let n = 0; Date.now() < stopAt && afterKill < 40; n++) {
        const slug = `w${w}-${n}`;
        let erred = false;
        for (;;) {
          const sent = Date.now();
          const res = await t.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug, owner: 'acme-owner' }).catch(() => undefined);
          if (res?.status === 201) {
            acknowledged.push(slug);
            if (killedAt && sent > killedAt) {
              afterKill++;
              firstAfterKill ||= Date.now();
            }
            break;
          }
          if (res?.status === 409 && erred) { erredYetCommitted.push(slug); break; }
          if (res && res.status !== 503) { unexpected.push(`${slug}: ${res.status} ${JSON.stringify(res.body)}`); break; }
          erred = true;
          refused++;
          if (Date.now() > stopAt) break;
          await sleep(200);
        }
      }
    };
    const writers = Promise.all([0, 1, 2, 3].map(writer));
    while (acknowledged.length < 20) await sleep(100);
    const killed = (await ha(...kill)).trim();
    killedAt = Date.now();
    await writers;

    expect(unexpected).to.deep.equal([]);
    expect(erredYetCommitted).to.deep.equal([]);
    expect(firstAfterKill, 'no write acknowledged after the kill').to.be.greaterThan(0);
    const seconds = (firstAfterKill - killedAt) / 1000;
    console.log(`      ${what} of ${killed}: first write acknowledged ${seconds.toFixed(1)} s after the kill; ${acknowledged.length} writes acknowledged, ${refused} answers 503 meanwhile`);

    // A primary again (the status command fails without one).
    await ha('status');
    const fresh = await server(at);
    const missing: string[] = [];
    for (const slug of acknowledged) {
      const res = await fresh.http.get(`/api/v1/workspaces/${slug}`).set(bearer(tokens.owner));
      if (res.status !== 200) missing.push(`${slug}: ${res.status}`);
    }
    expect(missing, `${missing.length} of ${acknowledged.length} acknowledged writes lost`).to.deep.equal([]);
  };

  it('the primary\'s postmaster killed (-9) under a stream of writes: writes resume, no acknowledged write lost, none answered an error yet committed', async () => {
    await drill('postmaster killed', ['kill-primary', '--postmaster-only']);
    // The pair whole again (a primary and its synchronous standby) for the next drill.
    await ha('wait-sync', '120');
  });

  it('the primary node killed (its Patroni and postmaster, -9) under a stream of writes: the standby takes over, no acknowledged write lost, none answered an error yet committed', async () => {
    await drill('primary node killed', ['kill-primary']);
  });
});
