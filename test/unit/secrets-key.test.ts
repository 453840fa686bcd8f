import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import { pino } from 'pino';
import { ConfigError, loadConfig } from '../../src/config.js';
import { loadSecretsKey, parseSecretsKey } from '../../src/secrets/key-file.js';
import { removeDir, tempDir } from '../helpers/server.js';

describe('the secrets key (WSM_SECRETS_KEY_FILE)', () => {
  const dirs: string[] = [];
  const dir = () => { const d = tempDir('wsm-secrets-key-unit-'); dirs.push(d); return d; };
  after(() => dirs.forEach(removeDir));
  const logged: string[] = [];
  const logger = pino({ level: 'info' }, new Writable({ write(chunk, _e, done) { logged.push(String(chunk)); done(); } }));
  const config = (env: Record<string, string>) => loadConfig({ WSM_DEMO: 'false', ...env });

  it('reads 32 bytes as base64 or hex, and nothing else', () => {
    expect(parseSecretsKey(`${Buffer.alloc(32, 7).toString('base64')}\n`)).to.have.length(32);
    expect(parseSecretsKey(Buffer.alloc(32, 7).toString('hex'))).to.have.length(32);
    expect(parseSecretsKey(Buffer.alloc(31, 7).toString('base64'))).to.equal(null);
    expect(parseSecretsKey('not a key')).to.equal(null);
  });

  it('stops the start naming the setting when the file is missing, malformed or inside the data directory', async () => {
    const data = dir();
    const keys = dir();
    const refused = async (file: string, text: string) => {
      const err = await loadSecretsKey(config({ WSM_DATA_DIR: data, WSM_SECRETS_KEY_FILE: file }), logger).then(() => null, (e: unknown) => e);
      expect(err).to.be.instanceOf(ConfigError);
      expect((err as Error).message).to.contain('WSM_SECRETS_KEY_FILE').and.contain(text);
    };
    await refused(path.join(keys, 'missing'), 'cannot read it');
    writeFileSync(path.join(keys, 'short'), 'abc');
    await refused(path.join(keys, 'short'), '32 random bytes');
    writeFileSync(path.join(data, 'inside'), Buffer.alloc(32, 1).toString('base64'));
    await refused(path.join(data, 'inside'), 'outside the data directory');
    writeFileSync(path.join(keys, 'good'), Buffer.alloc(32, 1).toString('base64'));
    expect(await loadSecretsKey(config({ WSM_DATA_DIR: data, WSM_SECRETS_KEY_FILE: path.join(keys, 'good') }), logger)).to.not.equal(null);
  });

  it('the demo setup makes one beside the issuer key and says so; other setups run with secret values off', async () => {
    const data = dir();
    expect(await loadSecretsKey(config({ WSM_DATA_DIR: data }), logger)).to.equal(null);
    expect(existsSync(path.join(data, 'secrets-key'))).to.equal(false);
    const first = await loadSecretsKey(config({ WSM_DATA_DIR: data, WSM_DEMO: 'true' }), logger);
    expect(first).to.not.equal(null);
    const file = path.join(data, 'secrets-key');
    expect(statSync(file).mode & 0o777).to.equal(0o600);
    expect(logged.join('')).to.contain('made a secrets key in the data directory');
    const text = readFileSync(file, 'utf8');
    await loadSecretsKey(config({ WSM_DATA_DIR: data, WSM_DEMO: 'true' }), logger);
    expect(readFileSync(file, 'utf8')).to.equal(text);
  });
});
