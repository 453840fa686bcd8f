import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bearer, removeDir, seedWorkspace, startTestServer, tempDir, type TestServer } from '../helpers/server.js';
import { requireRemote } from '../helpers/remote.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Runs `npm run virtuoso -- <command>` for an engine of its own under `dataDir`; answers the settings it prints. */
function virtuoso(dataDir: string, command: 'start' | 'stop'): Record<string, string> {
  const env: Record<string, string | undefined> = { ...process.env, WSM_DATA_DIR: dataDir };
  for (const name of Object.keys(env)) if (name.startsWith('WSM_SPARQL_') || name === 'WSM_STORE') delete env[name];
  const run = spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'scripts/virtuoso.ts'), command], { cwd: ROOT, env, encoding: 'utf8', timeout: 120_000 });
  if (run.status !== 0) throw new Error(`npm run virtuoso -- ${command} failed: ${run.stderr}`);
  return Object.fromEntries(run.stdout.split('\n').filter((line) => line.startsWith('WSM_')).map((line) => {
    const at = line.indexOf('=');
    return [line.slice(0, at), line.slice(at + 1)];
  }));
}

/** The engine's process id, from the lock file Virtuoso writes beside its database; undefined when there is none. */
function enginePid(dataDir: string): number | undefined {
  try {
    const pid = /VIRT_PID=(\d+)/.exec(readFileSync(path.join(dataDir, 'virtuoso', 'virtuoso.lck'), 'utf8'));
    return pid ? Number(pid[1]) : undefined;
  } catch {
    return undefined;
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/**
 * The engine's process itself killed (SIGKILL) under a running service,
 * then started again by the same script: the service answers 503 meanwhile
 * and comes back by itself, and what it had acknowledged is still there.
 */
describe('service on the remote store when the engine is killed and started again', function () {
  this.timeout(300_000);
  let engineDir: string;
  let t: TestServer | undefined;

  before(function () {
    // Needs Virtuoso installed, as the rest of the remote suite does.
    requireRemote(this);
    engineDir = tempDir('wsm-engine-');
  });
  after(async () => {
    if (t) { await t.close(); removeDir(t.dataDir); }
    try {
      virtuoso(engineDir, 'stop');
    } catch {
      // It could not be stopped by its password (a failed run): its process goes instead.
      const pid = enginePid(engineDir);
      if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
    } finally {
      removeDir(engineDir);
    }
  });

  it('answers 503 while the engine is down, recovers once it is back, and keeps every acknowledged write', async () => {
    const settings = virtuoso(engineDir, 'start');
    expect(settings.WSM_STORE).to.equal('sparql');
    t = await startTestServer(settings);
    const { tokens } = await seedWorkspace(t, 'acme');
    const created = await t.http.post('/api/v1/commands/acme').set(bearer(tokens.owner))
      .send({ alias: 'kept', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT WHERE { ?s ?p ?o }' });
    expect(created.status, JSON.stringify(created.body)).to.equal(200);

    // No checkpoint since the engine's set-up and these writes: the restart rolls its log forward.
    const pid = enginePid(engineDir)!;
    process.kill(pid, 'SIGKILL');
    for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 100));
    expect(alive(pid), 'the engine process is gone').to.equal(false);

    const during = await t.http.get('/api/v1/commands/acme').set(bearer(tokens.owner));
    expect(during.status, JSON.stringify(during.body)).to.equal(503);
    expect(during.body.error.code).to.equal('STORE_UNAVAILABLE');
    expect((await t.http.get('/health')).status).to.equal(503);

    // The same script starts it again, with the same settings (set-up, password and user survive the kill).
    expect(virtuoso(engineDir, 'start')).to.deep.equal(settings);
    const deadline = Date.now() + 60_000;
    let status = 0;
    while (Date.now() < deadline && (status = (await t.http.get('/health')).status) !== 200) await new Promise((r) => setTimeout(r, 200));
    expect(status, '/health once the engine is back').to.equal(200);

    const list = await t.http.get('/api/v1/commands/acme').set(bearer(tokens.owner));
    expect(list.status, JSON.stringify(list.body)).to.equal(200);
    expect(list.body.data.map((c: { alias: string }) => c.alias)).to.deep.equal(['kept']);
    const again = await t.http.post('/api/v1/commands/acme').set(bearer(tokens.owner))
      .send({ alias: 'after', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT WHERE { ?s ?p ?o }' });
    expect(again.status, JSON.stringify(again.body)).to.equal(200);
    const taken = await t.http.post('/api/v1/commands/acme').set(bearer(tokens.owner))
      .send({ alias: 'kept', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT WHERE { ?s ?p ?o }' });
    expect(taken.status).to.equal(409);
  });

  it('a service refuses to start on an engine whose procedures are older than it needs, naming the command that brings them', async () => {
    const settings = virtuoso(engineDir, 'start');
    // The engine as the previous version of `npm run virtuoso` left it: no version procedure (its writes narrowed text beyond ASCII to '?').
    const c = JSON.parse(readFileSync(path.join(engineDir, 'virtuoso', 'credentials.json'), 'utf8')) as { sqlPort: number; dbaPassword: string };
    const drop = spawnSync('isql-vt', [`127.0.0.1:${c.sqlPort}`, 'dba', c.dbaPassword], { input: 'DROP PROCEDURE DB.DBA.WSM_PROCEDURES_VERSION;\n', encoding: 'utf8' });
    expect(drop.stdout + drop.stderr).to.not.match(/\*\*\* Error/);
    let refused: unknown;
    try {
      const started = await startTestServer(settings);
      await started.close();
      removeDir(started.dataDir);
    } catch (err) {
      refused = err;
    }
    expect(refused, 'the service did not start').to.be.instanceOf(Error);
    expect((refused as Error).message).to.contain('procedures are version 1').and.to.contain('npm run virtuoso');
    // The script applies the current procedures to the running engine.
    virtuoso(engineDir, 'start');
    const again = await startTestServer(settings);
    try {
      expect((await again.http.get('/health')).status).to.equal(200);
    } finally {
      await again.close();
      removeDir(again.dataDir);
    }
  });
});
