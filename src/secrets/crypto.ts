import { randomBytes, randomUUID } from 'node:crypto';
import { x25519 } from '@noble/curves/ed25519.js';
import { blake2b } from '@noble/hashes/blake2.js';
import { xchacha20poly1305 } from '@noble/ciphers/chacha.js';
import { badRequest } from '../errors.js';

/**
 * The cryptography of secret values (docs/secrets.md):
 * - on the wire, end to end: X25519 between a one-exchange server key and
 *   the client's key, the symmetric key BLAKE2b-256 of the raw shared secret
 *   (nothing mixed in), XChaCha20-Poly1305 with a 24-byte nonce sent apart
 *   and the 16-byte tag after the ciphertext, no associated data (libsodium's
 *   `crypto_aead_xchacha20poly1305_ietf_*`);
 * - at rest: XChaCha20-Poly1305 under a key derived from the secrets key
 *   (`WSM_SECRETS_KEY_FILE`), with associated data naming where the value
 *   belongs, so a sealed value moved elsewhere does not open;
 * - a `keyId` is the server key's private half and its owner, sealed the same
 *   way: any instance holding the secrets key can open it.
 */
export const ALGORITHM = 'X25519-XChaCha20-Poly1305';
export const NONCE_BYTES = 24;
const KEY_BYTES = 32;
const TAG_BYTES = 16;
/** How long a keyId serves (one exchange within it). */
export const KEY_ID_TTL_MS = 5 * 60_000;

/** Standard base64 (padded), decoded; a 400 naming the field otherwise. */
export function decodeBase64(field: string, text: string, expectedBytes?: number): Uint8Array {
  if (typeof text !== 'string' || text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) {
    throw badRequest(`${field} is not standard base64 text`);
  }
  const bytes = Buffer.from(text, 'base64');
  if (bytes.toString('base64') !== text) throw badRequest(`${field} is not standard base64 text`);
  if (expectedBytes !== undefined && bytes.length !== expectedBytes) {
    throw badRequest(`${field} must be ${expectedBytes} bytes as base64; it is ${bytes.length}`);
  }
  return new Uint8Array(bytes);
}

export const toBase64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');

/** The symmetric key of one exchange: BLAKE2b-256 of the raw X25519 shared secret. */
export function exchangeKey(privateKey: Uint8Array, peerPublicKey: Uint8Array): Uint8Array {
  let shared: Uint8Array;
  try {
    shared = x25519.getSharedSecret(privateKey, peerPublicKey);
  } catch {
    throw badRequest('clientPublicKey is not a usable X25519 public key');
  }
  if (shared.every((b) => b === 0)) throw badRequest('clientPublicKey is not a usable X25519 public key');
  return blake2b(shared, { dkLen: KEY_BYTES });
}

/** A fresh X25519 key pair. */
export function newKeyPair(): { privateKey: Uint8Array; publicKey: Uint8Array } {
  const privateKey = x25519.utils.randomSecretKey();
  return { privateKey, publicKey: x25519.getPublicKey(privateKey) };
}

/** The public half of an X25519 private key. */
export const publicKeyOf = (privateKey: Uint8Array): Uint8Array => x25519.getPublicKey(privateKey);

/** Opens a client's ciphertext (ciphertext then tag); a 400 when it does not authenticate. */
export function openFromClient(key: Uint8Array, nonce: Uint8Array, ciphertext: Uint8Array): Uint8Array {
  if (ciphertext.length < TAG_BYTES) throw badRequest(`encryptedValue is shorter than the ${TAG_BYTES}-byte tag`);
  try {
    return xchacha20poly1305(key, nonce).decrypt(ciphertext);
  } catch {
    throw badRequest('encryptedValue does not decrypt with this keyId, clientPublicKey and nonce');
  }
}

/** Encrypts for a client: a fresh random nonce, ciphertext then tag. */
export function sealForClient(key: Uint8Array, plaintext: Uint8Array): { nonce: Uint8Array; ciphertext: Uint8Array } {
  const nonce = new Uint8Array(randomBytes(NONCE_BYTES));
  return { nonce, ciphertext: xchacha20poly1305(key, nonce).encrypt(plaintext) };
}

/** What a keyId holds once opened. */
export interface ExchangeKey { id: string; privateKey: Uint8Array; workspaceId: string; username: string; expiresAt: number }

/**
 * The secrets key, read from outside the data directory. It seals values at
 * rest and keyIds; each use has its own derived key.
 */
export class SecretKeyring {
  private readonly valueKey: Uint8Array;
  private readonly exchangeKeyKey: Uint8Array;

  constructor(master: Uint8Array) {
    if (master.length !== KEY_BYTES) throw new Error(`the secrets key must be ${KEY_BYTES} bytes`);
    this.valueKey = blake2b(new TextEncoder().encode('wsm secret values'), { key: master, dkLen: KEY_BYTES });
    this.exchangeKeyKey = blake2b(new TextEncoder().encode('wsm exchange keys'), { key: master, dkLen: KEY_BYTES });
  }

  private static seal(key: Uint8Array, plaintext: Uint8Array, context: string): Uint8Array {
    const nonce = new Uint8Array(randomBytes(NONCE_BYTES));
    const ct = xchacha20poly1305(key, nonce, new TextEncoder().encode(context)).encrypt(plaintext);
    const out = new Uint8Array(NONCE_BYTES + ct.length);
    out.set(nonce);
    out.set(ct, NONCE_BYTES);
    return out;
  }

  private static open(key: Uint8Array, sealed: Uint8Array, context: string): Uint8Array | null {
    if (sealed.length < NONCE_BYTES + TAG_BYTES) return null;
    try {
      return xchacha20poly1305(key, sealed.subarray(0, NONCE_BYTES), new TextEncoder().encode(context)).decrypt(sealed.subarray(NONCE_BYTES));
    } catch {
      return null;
    }
  }

  /** A value sealed for storage; `place` names where it belongs (workspace, secret, scope, entity). */
  sealValue(plaintext: Uint8Array, place: string): string {
    return toBase64(SecretKeyring.seal(this.valueKey, plaintext, place));
  }

  /** A stored value opened; throws when it was sealed for another place or under another key. */
  openValue(sealed: string, place: string): Uint8Array {
    const out = SecretKeyring.open(this.valueKey, Buffer.from(sealed, 'base64'), place);
    if (!out) throw new Error('a stored secret value does not open under the secrets key (another key, or moved)');
    return out;
  }

  /** A new keyId: a fresh key pair's private half, its owner and expiry, sealed. */
  mintExchangeKey(workspaceId: string, username: string, now: number): { keyId: string; serverPublicKey: Uint8Array; id: string; expiresAt: number } {
    const { privateKey, publicKey } = newKeyPair();
    const id = randomUUID();
    const expiresAt = now + KEY_ID_TTL_MS;
    const body = JSON.stringify({ i: id, k: toBase64(privateKey), w: workspaceId, u: username, e: expiresAt });
    const sealed = SecretKeyring.seal(this.exchangeKeyKey, new TextEncoder().encode(body), 'keyId');
    return { keyId: Buffer.from(sealed).toString('base64url'), serverPublicKey: publicKey, id, expiresAt };
  }

  /** A keyId opened, or null when it is not one of ours (malformed, forged, another key). */
  openExchangeKey(keyId: string): ExchangeKey | null {
    if (typeof keyId !== 'string' || keyId.length > 1024 || !/^[A-Za-z0-9_-]+$/.test(keyId)) return null;
    const body = SecretKeyring.open(this.exchangeKeyKey, Buffer.from(keyId, 'base64url'), 'keyId');
    if (!body) return null;
    const parsed = JSON.parse(new TextDecoder().decode(body)) as { i: string; k: string; w: string; u: string; e: number };
    return { id: parsed.i, privateKey: new Uint8Array(Buffer.from(parsed.k, 'base64')), workspaceId: parsed.w, username: parsed.u, expiresAt: parsed.e };
  }
}
