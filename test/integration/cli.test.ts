import { expect } from 'chai';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir, removeDir } from '../helpers/server.js';
import { createVerifier } from '../../src/auth/tokens.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Runs the real CLI (`wsm`) as a child process. */
export function runCli(args: string[], env: Record<string, string>, timeoutMs = 20_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'src/cli.ts'), ...args], {
      cwd: root, env: { ...process.env, WSM_LOG_LEVEL: 'silent', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`wsm ${args.join(' ')} timed out`)); }, timeoutMs);
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
  });
}

describe('wsm command-line tool', () => {
  let dataDir: string;
  before(() => { dataDir = tempDir(); });
  after(() => removeDir(dataDir));

  it('prints a token of the embedded issuer alone on the last line', async () => {
    const res = await runCli(['token', 'alice', '--system-admin', '--email', 'a@example.org', '--first-name', 'Alice', '--ttl', '600'], { WSM_DATA_DIR: dataDir });
    expect(res.code, res.stderr).to.equal(0);
    const token = res.stdout.trim().split('\n').pop()!;
    const verify = await createVerifier({ dataDir, adminClaim: 'wsm_system_admin', adminValue: 'x' });
    const auth = await verify(token);
    expect(auth).to.deep.include({ username: 'alice', systemAdmin: true });
    expect(auth.profile).to.include({ email: 'a@example.org', firstName: 'Alice' });
  });

  it('refuses a bad --ttl and a missing username', async () => {
    expect((await runCli(['token', 'alice', '--ttl', 'soon'], { WSM_DATA_DIR: dataDir })).code).to.equal(2);
    const missing = await runCli(['token'], { WSM_DATA_DIR: dataDir });
    expect(missing.code).to.equal(2);
    expect(missing.stderr).to.match(/usage: wsm token/);
  });

  it('stops the start with one clear line naming a bad setting', async () => {
    const res = await runCli(['serve'], { WSM_DATA_DIR: dataDir, PORT: 'eighty' });
    expect(res.code).to.equal(1);
    expect(res.stderr.trim().split('\n')).to.have.length(1);
    expect(res.stderr).to.match(/Invalid setting PORT="eighty"/);
  });
});
