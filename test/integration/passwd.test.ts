import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { startTestServer, removeDir, bearer, type TestServer } from '../helpers/server.js';
import { freePort } from '../helpers/ports.js';
import { signInOverHttp } from '../helpers/sign-in.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** `wsm passwd` as a child process, the password written to its standard input. */
function passwd(t: TestServer, port: number, args: string[], input: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'src/cli.ts'), 'passwd', ...args], {
      cwd: root, env: { ...process.env, WSM_LOG_LEVEL: 'silent', WSM_DATA_DIR: t.dataDir, PORT: String(port), HOST: '127.0.0.1' },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error('wsm passwd timed out')); }, 60_000);
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
    child.stdin.end(input);
  });
}

describe('wsm passwd: passwords for signing in, set through the running service', function () {
  this.timeout(120_000);
  let t: TestServer;
  let port: number;

  before(async () => {
    port = await freePort();
    t = await startTestServer({ PORT: String(port) });
  });
  after(async () => {
    await t?.close();
    if (t) removeDir(t.dataDir);
  });

  it('reads the password from standard input; the user then signs in with it (and not with another)', async () => {
    const out = await passwd(t, port, ['dave', '--system-admin'], 'dave-long-password\n');
    expect(out.code, out.stderr).to.equal(0);
    expect(out.stdout).to.match(/Password set for dave \(system administrator\)/);
    const signedIn = await signInOverHttp(t.url, 'dave', 'dave-long-password');
    expect(signedIn.status, signedIn.page).to.equal(200);
    expect(decodeJwt(signedIn.tokens!.access_token!)).to.include({ preferred_username: 'dave', wsm_system_admin: true });
    const wrong = await signInOverHttp(t.url, 'dave', 'dave-long-passwore');
    expect(wrong.status).to.equal(401);
    expect(wrong.page).to.match(/not right/);

    // Set again without the flag: the new password, still a system administrator.
    expect((await passwd(t, port, ['dave'], 'another-password\n')).code).to.equal(0);
    expect((await signInOverHttp(t.url, 'dave', 'dave-long-password')).status).to.equal(401);
    const again = await signInOverHttp(t.url, 'dave', 'another-password');
    expect(decodeJwt(again.tokens!.access_token!).wsm_system_admin).to.equal(true);
  });

  it('takes no password as an argument, and refuses an empty or short one', async () => {
    const asArgument = await passwd(t, port, ['erin', 'erin-password-here'], '');
    expect(asArgument.code).to.equal(2);
    expect(asArgument.stderr).to.match(/password is read from standard input/);
    const empty = await passwd(t, port, ['erin'], '');
    expect(empty.code).to.equal(1);
    expect(empty.stderr).to.match(/no password given/);
    const short = await passwd(t, port, ['erin'], 'short\n');
    expect(short.code).to.equal(1);
    expect(short.stderr).to.match(/at least 8 characters/);
    expect((await signInOverHttp(t.url, 'erin', 'short')).status).to.equal(401);
  });

  it('is for system administrators only through the API', async () => {
    const plain = await t.token('frank');
    const res = await t.http.put('/api/v1/users/frank/password').set(bearer(plain)).send({ password: 'frank-password', systemAdmin: true });
    expect(res.status).to.equal(403);
    expect((await signInOverHttp(t.url, 'frank', 'frank-password')).status).to.equal(401);
  });
});
