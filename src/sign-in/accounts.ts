import { createHash, randomBytes, scrypt as scryptCallback, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import type { QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { prefixes } from '../rdf/vocab.js';
import { sparql, iri, literal, boolean } from '../rdf/sparql.js';
import { bool, str } from '../rdf/bindings.js';
import { badRequest } from '../errors.js';

const scrypt = (password: string, salt: Buffer, length: number, options: ScryptOptions): Promise<Buffer> =>
  new Promise((resolve, reject) => { scryptCallback(password, salt, length, options, (err, key) => (err ? reject(err) : resolve(key))); });

/** scrypt's cost: N = 2^15, r = 8, p = 1 (32 MiB, some 50-100 ms a hash). */
const COST = { N: 2 ** 15, r: 8, p: 1 };
const KEY_LENGTH = 32;
const MAX_MEMORY = 64 * 1024 * 1024;
export const MIN_PASSWORD_LENGTH = 8;
export const MAX_PASSWORD_LENGTH = 1024;

/** `scrypt$N$r$p$salt$hash` (salt and hash in base64url): the parameters travel with the hash, so a later cost still checks old ones. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, KEY_LENGTH, { ...COST, maxmem: MAX_MEMORY });
  return ['scrypt', COST.N, COST.r, COST.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

export async function checkPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const key = await scrypt(password, Buffer.from(salt, 'base64url'), expected.length, { N: Number(n), r: Number(r), p: Number(p), maxmem: MAX_MEMORY });
  return timingSafeEqual(key, expected);
}

/** A hash to check against when the user has no password, so an unknown name takes as long as a wrong password. */
const DECOY = hashPassword(randomBytes(16).toString('hex'));

export interface PasswordAccount {
  username: string;
  systemAdmin: boolean;
}

/**
 * Passwords for signing in, one `wsm:PasswordCredential` per user in the
 * `<base>sign-in` graph (never in the system graph, whose user records
 * workspace views show): the scrypt hash and whether the user is a system
 * administrator.
 */
export class PasswordAccounts {
  constructor(private readonly store: QuadStore, private readonly graphs: Graphs) {}

  private credential(username: string) {
    return iri(this.graphs.resource('password', createHash('sha256').update(username, 'utf8').digest('hex')));
  }

  /**
   * Sets a user's password; `systemAdmin` given sets the flag, left out keeps
   * what the credential said (false for a new one).
   */
  async setPassword(username: string, password: string, systemAdmin?: boolean): Promise<PasswordAccount> {
    if (password.length < MIN_PASSWORD_LENGTH) throw badRequest(`The password must have at least ${MIN_PASSWORD_LENGTH} characters`);
    if (password.length > MAX_PASSWORD_LENGTH) throw badRequest(`The password must have at most ${MAX_PASSWORD_LENGTH} characters`);
    const admin = systemAdmin ?? (await this.read(username))?.systemAdmin ?? false;
    const c = this.credential(username);
    const g = iri(this.graphs.signIn);
    await this.store.update(sparql`${prefixes}DELETE WHERE { GRAPH ${g} { ${c} ?p ?o } } ;
      INSERT DATA { GRAPH ${g} { ${c} a wsm:PasswordCredential ; wsm:username ${literal(username)} ;
        wsm:passwordHash ${literal(await hashPassword(password))} ; wsm:systemAdmin ${boolean(admin)} } }`, [this.graphs.signIn]);
    return { username, systemAdmin: admin };
  }

  /** The account when the password is right; null otherwise (an unknown user costs as much as a wrong password). */
  async verify(username: string, password: string): Promise<PasswordAccount | null> {
    const found = await this.read(username);
    if (!found) {
      await checkPassword(password, await DECOY);
      return null;
    }
    return await checkPassword(password, found.hash) ? { username, systemAdmin: found.systemAdmin } : null;
  }

  /** Whether the user may sign in with a password (and is a system administrator). */
  async account(username: string): Promise<PasswordAccount | null> {
    const found = await this.read(username);
    return found ? { username, systemAdmin: found.systemAdmin } : null;
  }

  private async read(username: string): Promise<{ hash: string; systemAdmin: boolean } | null> {
    const c = this.credential(username);
    const rows = await this.store.select(sparql`${prefixes}SELECT ?hash ?admin WHERE { GRAPH ${iri(this.graphs.signIn)} {
      ${c} wsm:username ${literal(username)} ; wsm:passwordHash ?hash ; wsm:systemAdmin ?admin } } LIMIT 1`);
    const row = rows[0];
    return row ? { hash: str(row, 'hash')!, systemAdmin: bool(row, 'admin') === true } : null;
  }
}
