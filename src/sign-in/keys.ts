import { randomBytes, randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import type { QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { prefixes } from '../rdf/vocab.js';
import { sparql, iri, literal } from '../rdf/sparql.js';
import { str } from '../rdf/bindings.js';

/** The algorithm of the provider's signing key (ID tokens and access tokens). */
export const SIGNING_ALG = 'ES256';

/** The OpenID provider's secrets: its private signing keys (JWKs) and the keys that sign its cookies. */
export interface SignInKeys {
  jwks: JWK[];
  cookieKeys: string[];
}

/** The public half of each signing key, as a JWK set publishes it. */
export const publicJwks = (keys: SignInKeys): { keys: JWK[] } => ({
  keys: keys.jwks.map(({ kty, crv, x, y, kid, alg, use }) => ({ kty, crv, x, y, kid, alg, use })),
});

/**
 * Reads the provider's keys from the store, making them on the first start.
 * Making them is a conditional write (only when none exist), and every
 * caller then reads what was kept, so instances starting together on one
 * store agree on one set.
 */
export async function loadSignInKeys(store: QuadStore, graphs: Graphs): Promise<SignInKeys> {
  const g = iri(graphs.signIn);
  const record = iri(graphs.resource('sign-in-keys', 'provider'));
  const read = async (): Promise<SignInKeys | undefined> => {
    const rows = await store.select(sparql`${prefixes}SELECT ?payload WHERE { GRAPH ${g} { ${record} a wsm:SignInKeys ; wsm:payload ?payload } } LIMIT 1`);
    const text = str(rows[0] ?? {}, 'payload');
    return text === null ? undefined : JSON.parse(text) as SignInKeys;
  };
  const kept = await read();
  if (kept) return kept;
  const { privateKey } = await generateKeyPair(SIGNING_ALG, { extractable: true });
  const made: SignInKeys = {
    jwks: [{ ...await exportJWK(privateKey), kid: randomUUID(), alg: SIGNING_ALG, use: 'sig' }],
    cookieKeys: [randomBytes(32).toString('base64url')],
  };
  await store.writeIf(
    { ask: sparql`${prefixes}ASK { GRAPH ${g} { ${record} wsm:payload ?p } }`, expect: false },
    [{ kind: 'update', sparql: sparql`${prefixes}INSERT DATA { GRAPH ${g} { ${record} a wsm:SignInKeys ; wsm:payload ${literal(JSON.stringify(made))} } }`, graphs: [graphs.signIn] }],
  );
  const stored = await read();
  if (!stored) throw new Error('the sign-in keys were written but cannot be read back');
  return stored;
}
