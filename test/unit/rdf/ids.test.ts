import { expect } from 'chai';
import { cachedStableId, stableId, UUID_PATTERN } from '../../../src/rdf/ids.js';

/**
 * Stable ids name records in data already written (role assignments point
 * at role ids, reinstalls find their matrices by id): the id of given keys
 * must never change. The values below are what the first version's
 * implementation gave for them.
 */
describe('rdf/ids stableId', () => {
  const pinned: Array<[string[], string]> = [
    [['role', 'ws-1', 'https://example.org/roles#Manager'], '17d1663c-4518-55b6-8c46-7f23771671fb'],
    [['principal', 'ws-1', 'agent', 'https://example.org/agents#Bot'], '6e240c6e-9cc9-5b47-a0a6-a87f2b1a62d0'],
    [['matrix', 'ws-1', 'https://example.org/matrices/größe'], '173feb32-2d63-5ff4-bc3e-5dcda045b066'],
    [['workspace', '😀'], '141eb6a5-efa2-59b2-a718-ef3e2b10a05d'],
  ];

  for (const [keys, id] of pinned) {
    it(`gives ${keys.join(', ')} the id it always had`, () => {
      expect(stableId(...keys)).to.equal(id);
      expect(cachedStableId(...keys)).to.equal(id);
    });
  }

  it('gives name-based (version 5) UUIDs that tell keys apart, also where joining them would not', () => {
    const a = stableId('role', 'ab', 'c');
    expect(a).to.match(UUID_PATTERN);
    expect(a[14]).to.equal('5');
    expect(stableId('role', 'a', 'bc')).to.not.equal(a);
    expect(stableId('role', 'ab', 'c')).to.equal(a);
  });
});
