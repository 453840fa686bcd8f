import { expect } from 'chai';
import fc from 'fast-check';
import { packedBuffers, packIris, SortedIris, withIris } from '../../../src/rdf/iri-set.js';

const iriArb = fc.oneof(
  fc.webUrl(),
  fc.string({ maxLength: 12 }).map((s) => `urn:x:${s}`),
  fc.constantFrom('https://a.example/é', 'https://a.example/\u{1F600}', 'https://a.example/', 'https://a.example/a'),
);

describe('Packed IRI sets', () => {
  it('answer membership and members as a Set of the same IRIs does (generated IRIs, with duplicates, non-ASCII and prefixes of each other)', () => {
    fc.assert(fc.property(fc.array(iriArb, { maxLength: 60 }), fc.array(iriArb, { maxLength: 20 }), (members, probes) => {
      const expected = new Set(members);
      const packed = packIris(members);
      const set = new SortedIris(packed);
      expect(set.size).to.equal(expected.size);
      expect([...set]).to.have.members([...expected]);
      for (const iri of [...members, ...probes]) expect(set.has(iri), iri).to.equal(expected.has(iri));
    }));
  });

  it('keep their members after their two buffers are transferred to another thread (structured clone)', () => {
    const members = Array.from({ length: 1000 }, (_, i) => `https://bench.example/data/n${i}`);
    const packed = packIris(members);
    const copy = structuredClone(packed, { transfer: packedBuffers(packed) });
    expect(packed.bytes.length, 'moved, not copied').to.equal(0);
    const set = new SortedIris(copy);
    expect(set.size).to.equal(1000);
    expect(set.has('https://bench.example/data/n999')).to.equal(true);
    expect(set.has('https://bench.example/data/n1000')).to.equal(false);
    expect(set.has('')).to.equal(false);
  });

  it('an empty pack has no member, and a small one moves whole', () => {
    const small = packIris(['urn:x:a']);
    expect(new SortedIris(structuredClone(small, { transfer: packedBuffers(small) })).has('urn:x:a')).to.equal(true);
    const set = new SortedIris(packIris([]));
    expect(set.size).to.equal(0);
    expect(set.has('urn:x:a')).to.equal(false);
    expect([...set]).to.deep.equal([]);
  });

  it('add a few IRIs to a set without copying it, each member once', () => {
    const base = new SortedIris(packIris(['urn:x:a', 'urn:x:b']));
    expect(withIris(base, [])).to.equal(base);
    expect(withIris(base, ['urn:x:a'])).to.equal(base);
    const more = withIris(base, ['urn:x:c', 'urn:x:a', 'urn:x:c']);
    expect(more.size).to.equal(3);
    expect(more.has('urn:x:c')).to.equal(true);
    expect(more.has('urn:x:b')).to.equal(true);
    expect(more.has('urn:x:d')).to.equal(false);
    expect([...more].sort()).to.deep.equal(['urn:x:a', 'urn:x:b', 'urn:x:c']);
  });
});
