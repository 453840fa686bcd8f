import { expect } from 'chai';
import { tempDir, removeDir } from '../helpers/server.js';
import { createVerifier } from '../../src/auth/tokens.js';
import { runWsm as runCli } from '../helpers/cli.js';


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
