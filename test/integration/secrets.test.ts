import { createPrivateKey, createPublicKey, diffieHellman, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import { pino } from 'pino';
import supertest from 'supertest';
import { blake2b } from '@noble/hashes/blake2.js';
import { xchacha20poly1305 } from '@noble/ciphers/chacha.js';
import { loadConfig } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { mintToken } from '../../src/auth/tokens.js';
import { exchangeKey, openFromClient } from '../../src/secrets/crypto.js';
import { bearer, removeDir, startTestServer, tempDir } from '../helpers/server.js';
import { tinyPackage } from '../helpers/packages.js';
import { waitForCommand } from '../helpers/lifecycle.js';

/**
 * The client's construction, as the ecosystem's client (libsodium through
 * PyNaCl) makes it: X25519 (Node's own implementation here), the key
 * BLAKE2b-256 of the raw shared secret, XChaCha20-Poly1305 IETF with no
 * associated data, the tag after the ciphertext.
 */
const client = {
  keyPair(privateKey = randomBytes(32)) {
    const key = createPrivateKey({ key: Buffer.concat([Buffer.from('302e020100300506032b656e04220420', 'hex'), privateKey]), format: 'der', type: 'pkcs8' });
    const publicKey = createPublicKey(key).export({ format: 'der', type: 'spki' }).subarray(-32);
    return { key, publicKey: Buffer.from(publicKey) };
  },
  symmetricKey(own: ReturnType<typeof createPrivateKey>, peerPublic: Uint8Array): Uint8Array {
    const peer = createPublicKey({ key: Buffer.concat([Buffer.from('302a300506032b656e032100', 'hex'), Buffer.from(peerPublic)]), format: 'der', type: 'spki' });
    return blake2b(diffieHellman({ privateKey: own, publicKey: peer }), { dkLen: 32 });
  },
  encrypt(key: Uint8Array, plaintext: string, nonce = randomBytes(24)) {
    return { nonce: Buffer.from(nonce), ciphertext: Buffer.from(xchacha20poly1305(key, nonce).encrypt(new TextEncoder().encode(plaintext))) };
  },
  decrypt(key: Uint8Array, nonce: Uint8Array, ciphertext: Uint8Array): string {
    return new TextDecoder().decode(xchacha20poly1305(key, nonce).decrypt(ciphertext));
  },
};
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
const fromB64 = (text: string) => Buffer.from(text, 'base64');

/** Made with libsodium 1.0.18 (crypto_scalarmult, crypto_generichash(32), crypto_aead_xchacha20poly1305_ietf_encrypt, no AD). */
const VECTOR = {
  clientPrivateKey: 'AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=',
  clientPublicKey: 'B6N8vBQgk8i3VdwbEOhstCY3StFqqFPtC9/AsrhtHHw=',
  serverPrivateKey: 'ZWZnaGlqa2xtbm9wcXJzdHV2d3h5ent8fX5/gIGCg4Q=',
  serverPublicKey: 'VxR2nRFr92Q2rnS8eT0sMK0ZA8WaxSc4BcfiaYtBDDY=',
  key: 'b0pBWZ+2ZaqoNyedzAB08g00LC0+xUannjN0tT0uwLU=',
  nonce: 'yMnKy8zNzs/Q0dLT1NXW19jZ2tvc3d7f',
  plaintext: 'correct horse battery staple ✓',
  ciphertext: '2uqBziUQgW36/c83dNV3CW507UK0h4NsNETcoP7RGjwEPXVylihMbfMawxmyFEmv',
};

const M = 'https://example.org/packages/vault/main';
const MATRIX = `@prefix mtx: <https://poliglot.io/os/spec/matrix#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix build: <https://poliglot.io/os/spec/build#> .
@prefix secrets: <https://poliglot.io/os/spec/secrets#> .
<${M}> a mtx:Matrix ; rdfs:label "Vault" ; rdfs:comment "Declares a variable and a secret." .
<${M}#apiUrl> a build:Variable ; rdfs:isDefinedBy <${M}> ; build:label "API URL" ; build:variableType "string" .
<${M}#region> a build:Variable ; rdfs:isDefinedBy <${M}> ; build:required false .
<${M}#apiToken> a secrets:ManagedSecret ; rdfs:isDefinedBy <${M}> ; secrets:label "API token" ; secrets:description "Token of the upstream API" .
`;

const WORKSPACE_VALUE = 'ws-secret-plaintext-7f3a91';
const PRINCIPAL_VALUE = 'principal-secret-plaintext-c4e2d8';
const SET_VALUE = 'admin-set-plaintext-99b1e0';

/** Every file under a directory, as bytes. */
function filesUnder(dir: string): Array<{ file: string; bytes: Buffer }> {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    return statSync(file).isDirectory() ? filesUnder(file) : [{ file, bytes: readFileSync(file) }];
  });
}

describe('secrets and variables, as the ecosystem client speaks them', function () {
  this.timeout(180_000);
  const keyDir = tempDir('wsm-secrets-key-');
  const dataDir = tempDir('wsm-secrets-data-');
  const keyFile = path.join(keyDir, 'secrets.key');
  writeFileSync(keyFile, `${randomBytes(32).toString('base64')}\n`);
  const log: string[] = [];
  let server: RunningServer;
  let http: ReturnType<typeof supertest>;
  const tokens: Record<string, string> = {};
  const principal: Record<string, string> = {};

  const start = async () => {
    const config = loadConfig({
      PORT: '0', HOST: '127.0.0.1', WSM_DATA_DIR: dataDir, WSM_REGISTRY: 'self', WSM_DEMO: 'false', WSM_LOG_LEVEL: 'trace', WSM_SECRETS_KEY_FILE: keyFile,
    });
    const sink = new Writable({ write(chunk, _enc, done) { log.push(String(chunk)); done(); } });
    server = await startServer(config, pino({ level: 'trace' }, sink));
    http = supertest(server.url);
  };
  const as = (user: string) => bearer(tokens[user]!);
  const pubkey = async (user: string) => {
    const res = await http.post('/api/v1/secrets/vault/pubkey').set(as(user));
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return { keyId: res.body.data.keyId as string, serverPublicKey: fromB64(res.body.data.serverPublicKey) };
  };
  /** A value sealed for the server as the client seals it. */
  const sealed = async (user: string, value: string) => {
    const { keyId, serverPublicKey } = await pubkey(user);
    const own = client.keyPair();
    const { nonce, ciphertext } = client.encrypt(client.symmetricKey(own.key, serverPublicKey), value);
    return { keyId, clientPublicKey: b64(own.publicKey), encryptedValue: b64(ciphertext), nonce: b64(nonce) };
  };
  /** Reads a value as the client does; answers the HTTP answer and the plaintext when 200. */
  const readValue = async (user: string, secretId: string, query: Record<string, string> = {}, keyId?: { keyId: string; serverPublicKey: Buffer }) => {
    const key = keyId ?? await pubkey(user);
    const own = client.keyPair();
    const res = await http.get(`/api/v1/secrets/vault/${encodeURIComponent(secretId)}/value`).set(as(user))
      .query({ clientPublicKey: b64(own.publicKey), keyId: key.keyId, ...query });
    const plaintext = res.status === 200 ? client.decrypt(client.symmetricKey(own.key, key.serverPublicKey), fromB64(res.body.data.nonce), fromB64(res.body.data.encryptedValue)) : null;
    return { res, plaintext, key };
  };
  const reads = async () => (await http.get('/api/v1/secrets/vault/reads').set(as('owner'))).body.data as Array<{ username: string; scope: string; secretUri: string }>;

  before(async () => {
    await start();
    for (const user of ['root', 'owner', 'mia', 'max']) tokens[user] = await mintToken(dataDir, user, { ttlSeconds: 3600, systemAdmin: user === 'root' });
    expect((await http.post('/api/v1/workspaces').set(as('root')).send({ slug: 'vault', owner: 'owner' })).status).to.equal(201);
    for (const user of ['mia', 'max']) expect((await http.put(`/api/v1/workspaces/vault/members/${user}`).set(as('owner')).send({})).status).to.equal(200);
    for (const user of ['owner', 'mia', 'max']) principal[user] = (await http.get('/api/v1/iam/vault/users/me/principal').set(as(user))).body.data.id;
    expect((await http.post('/api/v1/registry/publishers').set(as('root')).send({ slug: 'acme', owners: ['owner'] })).status).to.equal(201);
    const archive = await tinyPackage({ name: 'vault', version: '1.0.0', matrices: [{ name: 'main', uri: M, turtle: MATRIX }] });
    const published = await http.post('/api/v1/registry/publishers/acme/packages/vault/versions').set(as('owner')).attach('file', archive, 'vault.tgz');
    expect(published.status, JSON.stringify(published.body)).to.equal(201);
  });
  after(async () => { await server?.close(); removeDir(dataDir); removeDir(keyDir); });

  it('the client construction and the server agree with libsodium byte for byte', () => {
    const own = client.keyPair(fromB64(VECTOR.clientPrivateKey));
    expect(b64(own.publicKey)).to.equal(VECTOR.clientPublicKey);
    const key = client.symmetricKey(own.key, fromB64(VECTOR.serverPublicKey));
    expect(b64(key)).to.equal(VECTOR.key);
    expect(b64(client.encrypt(key, VECTOR.plaintext, fromB64(VECTOR.nonce)).ciphertext)).to.equal(VECTOR.ciphertext);
    const serverKey = exchangeKey(new Uint8Array(fromB64(VECTOR.serverPrivateKey)), new Uint8Array(fromB64(VECTOR.clientPublicKey)));
    expect(b64(serverKey)).to.equal(VECTOR.key);
    expect(new TextDecoder().decode(openFromClient(serverKey, fromB64(VECTOR.nonce), fromB64(VECTOR.ciphertext)))).to.equal(VECTOR.plaintext);
  });

  it('the registry lists what the version declares', async () => {
    const res = await http.get('/api/v1/registry/packages/acme/vault/1.0.0/declarations');
    expect(res.status).to.equal(200);
    expect(res.body.data.declaredVariables.map((v: { uri: string; required: boolean }) => [v.uri, v.required])).to.deep.equal([[`${M}#apiUrl`, true], [`${M}#region`, false]]);
    expect(res.body.data.declaredSecrets).to.deep.equal([{ uri: `${M}#apiToken`, label: 'API token', description: 'Token of the upstream API', required: true, sourceMatrix: M }]);
  });

  it('an install without values for required declarations fails naming them; a binding of something undeclared is a 400', async () => {
    const bare = await http.post('/api/v1/packages/vault/registry/acme/vault/install').set(as('owner')).send({});
    expect(bare.status).to.equal(202);
    const failed = await waitForCommand({ http } as never, tokens.owner!, 'vault', bare.body.data.id);
    expect(failed.status).to.equal('failed');
    expect(failed.errorMessage).to.contain(`variable <${M}#apiUrl>`).and.contain(`secret <${M}#apiToken>`).and.not.contain('region');
    const binding = await sealed('owner', 'x');
    const undeclared = await http.post('/api/v1/packages/vault/registry/acme/vault/install').set(as('owner'))
      .send({ secretBindings: [{ uri: `${M}#nope`, ...binding }] });
    expect(undeclared.status).to.equal(400);
    expect(undeclared.body.error.message).to.contain(`<${M}#nope>`).and.contain('does not declare');
    const undeclaredVar = await http.post('/api/v1/packages/vault/registry/acme/vault/install').set(as('owner'))
      .send({ variableBindings: [{ uri: `${M}#apiToken`, value: 'v', sourceMatrix: M }] });
    expect(undeclaredVar.status).to.equal(400);
  });

  it('installs with one variable and one secret binding; members read the workspace value, each read recorded', async () => {
    const binding = await sealed('owner', WORKSPACE_VALUE);
    const res = await http.post('/api/v1/packages/vault/registry/acme/vault/install').set(as('owner')).send({
      variableBindings: [{ uri: `${M}#apiUrl`, value: 'https://api.example.org', sourceMatrix: M }],
      secretBindings: [{ uri: `${M}#apiToken`, ...binding }],
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    const done = await waitForCommand({ http } as never, tokens.owner!, 'vault', res.body.data.id);
    expect(done.status, done.errorMessage ?? '').to.equal('completed');
    const variables = (await http.get('/api/v1/variables/vault').set(as('mia'))).body.data;
    expect(variables.map((v: { uri: string; value: string | null; hasValue: boolean; required: boolean }) => [v.uri, v.value, v.hasValue, v.required]))
      .to.deep.equal([[`${M}#apiUrl`, 'https://api.example.org', true, true], [`${M}#region`, null, false, false]]);
    const secrets = (await http.get('/api/v1/secrets/vault').set(as('mia'))).body.data;
    expect(secrets).to.have.length(1);
    expect(secrets[0]).to.include({ uri: `${M}#apiToken`, description: 'Token of the upstream API' });
    expect(secrets[0].allowedScopes).to.deep.equal(['workspace', 'principal']);
    expect(secrets[0].matrix).to.deep.equal({ uri: M, name: 'main' });
    expect((await http.get(`/api/v1/secrets/vault/${encodeURIComponent(`${M}#apiToken`)}`).set(as('mia'))).body.data.id).to.equal(secrets[0].id);
    expect((await http.get('/api/v1/secrets/vault/main:apiToken').set(as('mia'))).body.data.id).to.equal(secrets[0].id);
    // The binding's keyId served its exchange.
    const reuse = await http.put(`/api/v1/secrets/vault/${secrets[0].id}/value`).set(as('owner')).send(binding);
    expect(reuse.status).to.equal(409);
    const read = await readValue('mia', 'main:apiToken');
    expect(read.res.status, JSON.stringify(read.res.body)).to.equal(200);
    expect(read.res.body.data.algorithm).to.equal('X25519-XChaCha20-Poly1305');
    expect(read.plaintext).to.equal(WORKSPACE_VALUE);
    const again = await readValue('mia', 'main:apiToken', {}, read.key);
    expect(again.res.status).to.equal(409);
    expect(again.res.body.error.message).to.contain('used already');
    const recorded = await reads();
    expect(recorded.filter((r) => r.username === 'mia')).to.have.length(1);
    expect(recorded[0]).to.include({ username: 'mia', scope: 'workspace', secretUri: `${M}#apiToken` });
    expect((await http.get('/api/v1/secrets/vault/reads').set(as('mia'))).status).to.equal(403);
  });

  it('a keyId serves one exchange even when several requests race with it', async () => {
    const key = await pubkey('mia');
    const before = (await reads()).length;
    const answers = await Promise.all(Array.from({ length: 10 }, () => readValue('mia', 'main:apiToken', {}, key)));
    expect(answers.map((a) => a.res.status).sort()).to.deep.equal([200, ...Array(9).fill(409)]);
    expect(answers.find((a) => a.res.status === 200)!.plaintext).to.equal(WORKSPACE_VALUE);
    expect((await reads()).length).to.equal(before + 1);
  });

  it('sets and reads a value in each scope with the access rules', async () => {
    const id = 'main:apiToken';
    // Workspace scope: administrators set, members may not.
    expect((await http.put(`/api/v1/secrets/vault/${id}/value`).set(as('mia')).send({ ...await sealed('mia', 'nope'), scope: 'workspace' })).status).to.equal(403);
    expect((await http.put(`/api/v1/secrets/vault/${id}/value`).set(as('owner')).send({ ...await sealed('owner', SET_VALUE), scope: 'workspace' })).status).to.equal(200);
    expect((await readValue('max', id, { scope: 'workspace' })).plaintext).to.equal(SET_VALUE);
    // Principal scope: the principal sets and reads its own; another member is refused it.
    const own = await http.put(`/api/v1/secrets/vault/${id}/value`).set(as('mia')).send({ ...await sealed('mia', PRINCIPAL_VALUE), scope: 'principal' });
    expect(own.status, JSON.stringify(own.body)).to.equal(200);
    expect((await readValue('mia', id, { scope: 'principal' })).plaintext).to.equal(PRINCIPAL_VALUE);
    expect((await readValue('mia', id, { scope: 'principal', scopeEntityId: principal.mia! })).plaintext).to.equal(PRINCIPAL_VALUE);
    const refused = await readValue('max', id, { scope: 'principal', scopeEntityId: principal.mia! });
    expect(refused.res.status).to.equal(403);
    expect(refused.res.body.error.message).to.contain('its principal alone');
    expect((await readValue('owner', id, { scope: 'principal', scopeEntityId: principal.mia! })).res.status).to.equal(403);
    expect((await readValue('max', id, { scope: 'principal' })).res.status).to.equal(404);
    // Administrators may set a principal's value; another member may not.
    expect((await http.put(`/api/v1/secrets/vault/${id}/value`).set(as('max')).send({ ...await sealed('max', 'x'), scope: 'principal', scopeEntityId: principal.mia })).status).to.equal(403);
    expect((await http.put(`/api/v1/secrets/vault/${id}/value`).set(as('owner')).send({ ...await sealed('owner', 'for-max'), scope: 'principal', scopeEntityId: principal.max })).status).to.equal(200);
    expect((await readValue('max', id, { scope: 'principal' })).plaintext).to.equal('for-max');
    expect((await reads()).filter((r) => r.scope === 'principal').map((r) => r.username).sort()).to.deep.equal(['max', 'mia', 'mia']);
  });

  it('refuses bad input with a sentence and stores nothing', async () => {
    const id = 'main:apiToken';
    const good = await sealed('owner', 'never-stored-plaintext');
    const before = (await reads()).length;
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ clientPublicKey: b64(randomBytes(31)) }, 'clientPublicKey must be 32 bytes'],
      [{ clientPublicKey: 'not base64!' }, 'clientPublicKey is not standard base64'],
      [{ nonce: b64(randomBytes(12)) }, 'nonce must be 24 bytes'],
      [{ encryptedValue: b64(Buffer.concat([fromB64(good.encryptedValue).subarray(0, 5), Buffer.from('x'), fromB64(good.encryptedValue).subarray(6)])) }, 'does not decrypt'],
      [{ encryptedValue: b64(randomBytes(8)) }, 'shorter than the 16-byte tag'],
      [{ algorithm: 'RSA-OAEP' }, 'algorithm must be "X25519-XChaCha20-Poly1305"'],
      [{ scope: 'team' }, 'scope must be "workspace" or "principal"'],
      [{ keyId: 'forged' }, 'keyId is not one this service issued'],
    ];
    for (const [change, message] of cases) {
      const res = await http.put(`/api/v1/secrets/vault/${id}/value`).set(as('owner')).send({ ...good, ...change });
      expect(res.status, JSON.stringify(change)).to.equal(400);
      expect(res.body.error.message).to.contain(message);
    }
    const badRead = await readValue('mia', id, { scope: 'team' });
    expect(badRead.res.status).to.equal(400);
    expect(badRead.res.body.error.message).to.contain('scope must be');
    expect((await readValue('mia', id, { clientPublicKey: b64(randomBytes(5)) })).res.status).to.equal(400);
    expect((await reads()).length).to.equal(before);
    // Nothing was stored, and the keyId still serves its one exchange.
    expect((await readValue('max', id)).plaintext).to.equal(SET_VALUE);
    expect((await http.put(`/api/v1/secrets/vault/${id}/value`).set(as('owner')).send(good)).status).to.equal(200);
    expect((await readValue('max', id)).plaintext).to.equal('never-stored-plaintext');
    expect((await http.put(`/api/v1/secrets/vault/${id}/value`).set(as('owner')).send({ ...await sealed('owner', SET_VALUE) })).status).to.equal(200);
  });

  it('variables: administrators set them, members read them, administrators\' SPARQL and slash commands see them', async () => {
    const list = (await http.get('/api/v1/variables/vault').set(as('mia'))).body.data as Array<{ id: string; uri: string }>;
    const region = list.find((v) => v.uri === `${M}#region`)!;
    expect((await http.put(`/api/v1/variables/vault/${region.id}/value`).set(as('mia')).send({ value: 'eu' })).status).to.equal(403);
    const set = await http.put(`/api/v1/variables/vault/${region.id}/value`).set(as('owner')).send({ value: 'eu-west' });
    expect(set.status).to.equal(200);
    expect(set.body.data).to.include({ value: 'eu-west', hasValue: true });
    const apiUrl = list.find((v) => v.uri === `${M}#apiUrl`)!;
    const clear = await http.put(`/api/v1/variables/vault/${apiUrl.id}/value`).set(as('owner')).send({ value: null });
    expect(clear.status).to.equal(400);
    expect(clear.body.error.message).to.contain('required');
    const query = `PREFIX wsm: <https://w3id.org/wsm/ns#> SELECT ?value WHERE { ?v wsm:uri <${M}#region> ; wsm:value ?value }`;
    const sparql = await http.get('/api/v1/sparql/vault').set(as('owner')).query({ query }).set('Accept', 'application/sparql-results+json');
    expect(sparql.status).to.equal(200);
    expect(JSON.parse(sparql.text).results.bindings.map((b: { value: { value: string } }) => b.value.value)).to.deep.equal(['eu-west']);
    const script = `PREFIX wsm: <https://w3id.org/wsm/ns#> CONSTRUCT { ?v wsm:value ?value } WHERE { ?v wsm:uri <${M}#region> ; wsm:value ?value }`;
    const created = await http.post('/api/v1/commands/vault').set(as('owner')).send({ alias: 'region', interpretation: 'The region variable', scriptType: 'CONSTRUCT', scriptContent: script });
    expect(created.status, JSON.stringify(created.body)).to.be.oneOf([200, 201]);
    const run = await http.post(`/api/v1/commands/vault/${created.body.data.id}/execute`).set(as('mia')).send({});
    expect(run.status, JSON.stringify(run.body)).to.equal(200);
    expect(JSON.stringify(run.body)).to.contain('eu-west');
  });

  it('kept values survive a reinstall; a keyId works after a restart; uninstall removes variables and secrets', async () => {
    const re = await http.post('/api/v1/packages/vault/registry/acme/vault/install').set(as('owner')).send({});
    expect(re.body.data.commandType).to.equal('REINSTALL');
    const done = await waitForCommand({ http } as never, tokens.owner!, 'vault', re.body.data.id);
    expect(done.status, done.errorMessage ?? '').to.equal('completed');
    expect((await http.get('/api/v1/variables/vault').set(as('mia'))).body.data.map((v: { value: string | null }) => v.value)).to.deep.equal(['https://api.example.org', 'eu-west']);
    const key = await pubkey('mia');
    await server.close();
    await start();
    expect((await readValue('mia', 'main:apiToken', { scope: 'principal' }, key)).plaintext).to.equal(PRINCIPAL_VALUE);
    const gone = await http.delete('/api/v1/packages/vault/vault').set(as('owner'));
    expect(gone.status).to.equal(202);
    expect((await waitForCommand({ http } as never, tokens.owner!, 'vault', gone.body.data.id)).status).to.equal('completed');
    expect((await http.get('/api/v1/variables/vault').set(as('mia'))).body.data).to.deep.equal([]);
    expect((await http.get('/api/v1/secrets/vault').set(as('mia'))).body.data).to.deep.equal([]);
    expect((await readValue('mia', `${M}#apiToken`)).res.status).to.equal(404);
  });

  it('an upload install takes its bindings as JSON in the multipart field "bindings"; bad ones are a 400', async () => {
    const U = 'https://example.org/packages/uploaded/main';
    const turtle = MATRIX.replaceAll(M, U);
    const archive = await tinyPackage({ name: 'uploaded', version: '1.0.0', matrices: [{ name: 'up', uri: U, turtle }] });
    const send = (bindings: string) => http.post('/api/v1/packages/vault/install').set(as('owner'))
      .field('bindings', bindings).attach('file', archive, { filename: 'uploaded.tgz', contentType: 'application/gzip' });
    const notJson = await send('{variableBindings');
    expect(notJson.status).to.equal(400);
    expect(notJson.body.error.message).to.contain('"bindings" is not JSON');
    const unknownField = await send(JSON.stringify({ variables: [] }));
    expect(unknownField.status).to.equal(400);
    const undeclared = await send(JSON.stringify({ variableBindings: [{ uri: `${U}#nope`, value: 'x' }] }));
    expect(undeclared.status).to.equal(400);
    expect(undeclared.body.error.message).to.contain(`<${U}#nope>`);
    const binding = await sealed('owner', 'uploaded-secret-value');
    const res = await send(JSON.stringify({ variableBindings: [{ uri: `${U}#apiUrl`, value: 'https://up.example.org' }], secretBindings: [{ uri: `${U}#apiToken`, ...binding }] }));
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    const done = await waitForCommand({ http } as never, tokens.owner!, 'vault', res.body.data.id);
    expect(done.status, done.errorMessage ?? '').to.equal('completed');
    expect((await http.get('/api/v1/variables/vault').set(as('mia'))).body.data.find((v: { uri: string }) => v.uri === `${U}#apiUrl`).value).to.equal('https://up.example.org');
    expect((await readValue('mia', 'up:apiToken')).plaintext).to.equal('uploaded-secret-value');
    // Another package may not declare the same URIs.
    const clash = await tinyPackage({ name: 'clash', version: '1.0.0', matrices: [{ name: 'c', uri: `${U}-other`, turtle: `${turtle.replaceAll(`<${U}>`, `<${U}-other>`)}` }] });
    const clashing = await http.post('/api/v1/packages/vault/install').set(as('owner')).attach('file', clash, { filename: 'clash.tgz', contentType: 'application/gzip' });
    const clashed = await waitForCommand({ http } as never, tokens.owner!, 'vault', clashing.body.data.id);
    expect(clashed.status).to.equal('failed');
    expect(clashed.errorMessage).to.contain(`<${U}#apiUrl> is already declared by installed package "uploaded"`);
    const gone = await http.delete('/api/v1/packages/vault/uploaded').set(as('owner'));
    expect((await waitForCommand({ http } as never, tokens.owner!, 'vault', gone.body.data.id)).status).to.equal('completed');
  });

  it('the package shapes refuse a declaration tied to no matrix of the package', async () => {
    const B = 'https://example.org/packages/badly/main';
    const turtle = `${MATRIX.replaceAll(M, B)}<${B}#stray> a <https://poliglot.io/os/spec/build#Variable> ; <http://www.w3.org/2000/01/rdf-schema#isDefinedBy> <https://example.org/elsewhere> .\n`;
    const archive = await tinyPackage({ name: 'badly', version: '1.0.0', matrices: [{ name: 'main', uri: B, turtle }] });
    const res = await http.post('/api/v1/packages/vault/install').set(as('owner')).attach('file', archive, { filename: 'badly.tgz', contentType: 'application/gzip' });
    expect(res.status).to.equal(202);
    const failed = await waitForCommand({ http } as never, tokens.owner!, 'vault', res.body.data.id);
    expect(failed.status).to.equal('failed');
    expect(failed.errorMessage, failed.errorMessage ?? '').to.contain('exactly one rdfs:isDefinedBy naming a matrix of this package').and.contain(`${B}#stray`);
  });

  it('no plaintext in the data directory, the log, an export or the administrators\' SPARQL answers; no ciphertext in SPARQL or the export either', async () => {
    // Set a value again so the store holds one, then look everywhere.
    const binding = await sealed('owner', WORKSPACE_VALUE);
    const res = await http.post('/api/v1/packages/vault/registry/acme/vault/install').set(as('owner')).send({
      variableBindings: [{ uri: `${M}#apiUrl`, value: 'https://api.example.org' }], secretBindings: [{ uri: `${M}#apiToken`, ...binding }],
    });
    expect((await waitForCommand({ http } as never, tokens.owner!, 'vault', res.body.data.id)).status).to.equal('completed');
    const everything = await http.get('/api/v1/sparql/vault').set(as('owner'))
      .query({ query: 'SELECT ?g ?s ?p ?o WHERE { { GRAPH ?g { ?s ?p ?o } } UNION { ?s ?p ?o } }' }).set('Accept', 'application/sparql-results+json');
    expect(everything.status).to.equal(200);
    expect(everything.text).to.contain('apiToken');
    expect(everything.text).to.not.contain('sealedValue').and.not.contain('secret-values');
    const exported = (await http.get('/api/v1/workspaces/vault/export').set(as('owner')).set('Accept', 'application/n-quads').set('Accept-Encoding', 'identity')
      .buffer(true).parse((r, cb) => { let text = ''; r.on('data', (c: Buffer) => { text += String(c); }); r.on('end', () => cb(null, text)); })).body as string;
    expect(exported).to.contain('apiToken').and.contain('https://api.example.org');
    expect(exported).to.not.contain('sealedValue');
    await server.close();
    const plaintexts = [WORKSPACE_VALUE, PRINCIPAL_VALUE, SET_VALUE, 'never-stored-plaintext'];
    const files = filesUnder(dataDir);
    expect(files.some((f) => f.file.includes('journal') || f.file.includes('snapshot'))).to.equal(true);
    // The search can find what is stored in the clear: a variable's value.
    expect(files.some((f) => f.bytes.includes(Buffer.from('https://api.example.org')))).to.equal(true);
    for (const p of plaintexts) {
      expect(everything.text, p).to.not.contain(p);
      expect(exported, p).to.not.contain(p);
      expect(log.join(''), p).to.not.contain(p);
      for (const f of files) expect(f.bytes.includes(Buffer.from(p)), `${p} in ${f.file}`).to.equal(false);
    }
    expect(log.join('')).to.contain('secret value read');
    await start();
  });
});

describe('secret values without a secrets key', function () {
  this.timeout(60_000);
  it('answer 503 naming the setting; metadata and variables still answer', async () => {
    const t = await startTestServer();
    try {
      const root = await t.token('root', { systemAdmin: true });
      expect((await t.http.post('/api/v1/workspaces').set(bearer(root)).send({ slug: 'plain', owner: 'root' })).status).to.equal(201);
      const res = await t.http.post('/api/v1/secrets/plain/pubkey').set(bearer(root));
      expect(res.status).to.equal(503);
      expect(res.body.error.message).to.contain('WSM_SECRETS_KEY_FILE');
      expect((await t.http.get('/api/v1/secrets/plain').set(bearer(root))).body.data).to.deep.equal([]);
      expect((await t.http.get('/api/v1/variables/plain').set(bearer(root))).body.data).to.deep.equal([]);
    } finally {
      await t.close();
      removeDir(t.dataDir);
    }
  });
});
