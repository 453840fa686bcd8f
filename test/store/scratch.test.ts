import { expect } from 'chai';
import type oxigraph from 'oxigraph';
import { withScratchStore } from '../../src/store/scratch.js';

describe('scratch stores', () => {
  it('gives an empty store and frees it after use, also when the work throws', () => {
    let kept: oxigraph.Store | undefined;
    const size = withScratchStore((store) => {
      kept = store;
      store.update('INSERT DATA { <http://example.org/s> <http://example.org/p> "o" }');
      return store.size;
    });
    expect(size).to.equal(1);
    // A freed store's memory is gone: the engine refuses any further use.
    expect(() => kept!.size).to.throw();

    expect(() => withScratchStore((store) => {
      kept = store;
      expect(store.size).to.equal(0);
      store.update('INSERT DATA { <http://a/%zz> <http://example.org/p> "o" }');
    })).to.throw(/IRI|%/);
    expect(() => kept!.size).to.throw();
  });
});
