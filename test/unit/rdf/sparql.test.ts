import { expect } from 'chai';
import oxigraph from 'oxigraph';
import { sparql, iri, literal, integer, raw } from '../../../src/rdf/sparql.js';

describe('rdf/sparql escaping', () => {
  const hostile = ['x> } ; DROP ALL ; #', '"""', "'''", 'a\\b', 'line\nbreak\r\t', '\u0000\u0007', '"} INSERT DATA { <a> <b> <c> } #', 'ünïcödé 🚀'];

  for (const text of hostile) {
    it(`round-trips ${JSON.stringify(text)} through a real store unchanged`, () => {
      const store = new oxigraph.Store();
      store.update(sparql`INSERT DATA { GRAPH ${iri('urn:g')} { ${iri('urn:s')} ${iri('urn:p')} ${literal(text)} } }`);
      expect(store.size).to.equal(1);
      const [quad] = store.match(null, null, null, null);
      expect(quad!.object.value).to.equal(text);
    });
  }

  it('writes every C0 control and DEL escaped (no raw control character in the text), and a store reads each back', () => {
    for (let code = 0; code <= 0x7f; code = code === 0x1f ? 0x7f : code + 1) {
      const text = `a${String.fromCharCode(code)}b`;
      const built = sparql`INSERT DATA { GRAPH ${iri('urn:g')} { ${iri('urn:s')} ${iri('urn:p')} ${literal(text)} } }`;
      expect(/[\u0000-\u001f\u007f]/.test(built), `U+${code.toString(16)}`).to.equal(false);
      const store = new oxigraph.Store();
      store.update(built);
      expect(store.match(null, null, null, null)[0]!.object.value).to.equal(text);
    }
  });

  it('refuses IRIs that would break out of <...>', () => {
    for (const bad of ['urn:x> <y', 'urn:a b', 'relative/path', '', 'urn:x{']) {
      expect(() => iri(bad), bad).to.throw(/IRI/);
    }
  });

  it('refuses plain strings as interpolated values', () => {
    const unsafe = 'x' as unknown as ReturnType<typeof raw>;
    expect(() => sparql`SELECT * WHERE { ?s ?p ${unsafe} }`).to.throw(/only interpolates/);
  });

  it('writes integers as typed literals and refuses non-integers', () => {
    expect(sparql`${integer(42)}`).to.equal('"42"^^<http://www.w3.org/2001/XMLSchema#integer>');
    expect(() => integer(1.5)).to.throw();
  });
});
