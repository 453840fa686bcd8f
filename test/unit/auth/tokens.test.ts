import { expect } from 'chai';
import { createVerifier, mintToken } from '../../../src/auth/tokens.js';
import { removeDir, tempDir } from '../../helpers/server.js';

/** The verifier remembers verified tokens until their expiry; what it accepts and refuses does not change. */
describe('auth: verified-token cache', () => {
  let dataDir: string;
  before(() => { dataDir = tempDir(); });
  after(() => removeDir(dataDir));

  const refusal = async (p: Promise<unknown>): Promise<string> => {
    try {
      await p;
    } catch (err) {
      return (err as Error).message;
    }
    throw new Error('the token was accepted');
  };

  it('refuses a token once it has expired, though it was verified (and cached) before', async () => {
    let now = Date.now();
    const verify = await createVerifier({ dataDir, adminClaim: 'wsm_system_admin', adminValue: 'x', clock: () => now });
    const token = await mintToken(dataDir, 'alice', { ttlSeconds: 60 });
    expect((await verify(token)).username).to.equal('alice');
    now += 30_000;
    expect((await verify(token)).username).to.equal('alice');
    now += 60_000; // 90 s after minting: past exp and jose's 5 s tolerance
    expect(await refusal(verify(token))).to.match(/expired/);
    expect(await refusal(verify(token))).to.match(/expired/);
  });

  it('does not let a cached token vouch for an altered one', async () => {
    const verify = await createVerifier({ dataDir, adminClaim: 'wsm_system_admin', adminValue: 'x' });
    const token = await mintToken(dataDir, 'bob', { ttlSeconds: 600 });
    await verify(token);
    const [h, p, sig] = token.split('.');
    const claims = JSON.parse(Buffer.from(p!, 'base64url').toString());
    const forged = `${h}.${Buffer.from(JSON.stringify({ ...claims, wsm_system_admin: true })).toString('base64url')}.${sig}`;
    expect(await refusal(verify(forged))).to.match(/signature is not valid/);
    expect((await verify(token)).systemAdmin).to.equal(false);
  });

  it('answers the same contexts with the cache full, off, or on, and hands out copies', async () => {
    const tokens = await Promise.all(['c1', 'c2', 'c3'].map((u, i) => mintToken(dataDir, u, { ttlSeconds: 600, systemAdmin: i === 1, email: `${u}@example.org` })));
    const cached = await createVerifier({ dataDir, adminClaim: 'wsm_system_admin', adminValue: 'x', cacheSize: 2 });
    const plain = await createVerifier({ dataDir, adminClaim: 'wsm_system_admin', adminValue: 'x', cacheSize: 0 });
    for (let round = 0; round < 3; round++) {
      for (const token of tokens) expect(await cached(token)).to.deep.equal(await plain(token));
    }
    const first = await cached(tokens[0]!);
    first.systemAdmin = true;
    first.profile.email = 'changed@example.org';
    expect(await cached(tokens[0]!)).to.deep.include({ systemAdmin: false, profile: { email: 'c1@example.org', firstName: undefined, lastName: undefined, website: undefined, emailVerified: undefined } });
  });
});
