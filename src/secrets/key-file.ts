import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { Config } from '../config.js';
import { ConfigError } from '../config.js';
import type { Logger } from '../logger.js';
import { SecretKeyring } from './crypto.js';

/** The demo's secrets key, beside the embedded issuer's key. */
export const DEMO_KEY_FILE = 'secrets-key';

/** 32 bytes as standard base64 or as hex, surrounding whitespace ignored. */
export function parseSecretsKey(text: string): Uint8Array | null {
  const t = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(t)) return new Uint8Array(Buffer.from(t, 'hex'));
  if (/^[A-Za-z0-9+/]{43}=$/.test(t)) {
    const bytes = Buffer.from(t, 'base64');
    if (bytes.length === 32 && bytes.toString('base64') === t) return new Uint8Array(bytes);
  }
  return null;
}

const inside = (dir: string, file: string): boolean => {
  const rel = path.relative(dir, file);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
};

/**
 * The key that seals secret values at rest (docs/secrets.md):
 * `WSM_SECRETS_KEY_FILE`, a file outside the data directory holding 32
 * bytes as base64 or hex, checked at start (a bad one stops the start).
 * Without it the demo setup makes one in the data directory, beside the
 * issuer key, and says so; any other setup runs with secret values off
 * (their endpoints answer 503 naming the setting).
 */
export async function loadSecretsKey(config: Config, logger: Logger): Promise<SecretKeyring | null> {
  const file = config.WSM_SECRETS_KEY_FILE;
  if (file) {
    const resolved = path.resolve(file);
    if (inside(config.dataDir, resolved)) {
      throw new ConfigError(`Invalid setting WSM_SECRETS_KEY_FILE=${JSON.stringify(file)}: the secrets key must live outside the data directory (${config.dataDir})`);
    }
    let text: string;
    try {
      text = await readFile(resolved, 'utf8');
    } catch (err) {
      throw new ConfigError(`Invalid setting WSM_SECRETS_KEY_FILE=${JSON.stringify(file)}: cannot read it (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
    const key = parseSecretsKey(text);
    if (!key) throw new ConfigError(`Invalid setting WSM_SECRETS_KEY_FILE=${JSON.stringify(file)}: the file must hold 32 random bytes as base64 (44 characters) or hex (64 characters)`);
    return new SecretKeyring(key);
  }
  if (!config.WSM_DEMO) {
    logger.info('secret values are off: set WSM_SECRETS_KEY_FILE to a key file outside the data directory to turn them on');
    return null;
  }
  const demoFile = path.join(config.dataDir, DEMO_KEY_FILE);
  let text: string | null = null;
  try {
    text = await readFile(demoFile, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (text === null) {
    await mkdir(config.dataDir, { recursive: true });
    await writeFile(demoFile, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' }).catch(async (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    await chmod(demoFile, 0o600);
    text = await readFile(demoFile, 'utf8');
    logger.warn({ file: demoFile }, 'demo setup: made a secrets key in the data directory, beside the issuer key; '
      + 'anyone who copies the data directory can open the secret values, so outside a demo set WSM_SECRETS_KEY_FILE to a key kept elsewhere');
  }
  const key = parseSecretsKey(text);
  if (!key) throw new ConfigError(`The demo secrets key ${demoFile} does not hold 32 bytes as base64 or hex; remove it to make a new one (stored secret values are then lost)`);
  return new SecretKeyring(key);
}
