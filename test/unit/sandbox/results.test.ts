import { expect } from 'chai';
import { toCsv, toTsv, toXml, type JsonResults } from '../../../src/sandbox/results.js';

const results: JsonResults = {
  head: { vars: ['s', 'o'] },
  results: {
    bindings: [
      { s: { type: 'uri', value: 'https://example.org/a' }, o: { type: 'literal', value: 'say "hi", then\nleave' } },
      { s: { type: 'bnode', value: 'b0' }, o: { type: 'literal', value: 'hallo', 'xml:lang': 'de' } },
      { s: { type: 'uri', value: 'https://example.org/b' }, o: { type: 'literal', value: '42', datatype: 'http://www.w3.org/2001/XMLSchema#integer' } },
      { s: { type: 'uri', value: 'https://example.org/c' } },
    ],
  },
};

describe('sandbox/results: SPARQL results serializers', () => {
  it('writes CSV per SPARQL 1.1 CSV (quoted fields, CRLF, _: blank nodes, empty unbound)', () => {
    expect(toCsv(results)).to.equal(
      's,o\r\nhttps://example.org/a,"say ""hi"", then\nleave"\r\n_:b0,hallo\r\nhttps://example.org/b,42\r\nhttps://example.org/c,\r\n',
    );
  });

  it('writes TSV with terms in Turtle syntax', () => {
    expect(toTsv(results)).to.equal(
      '?s\t?o\n<https://example.org/a>\t"say \\"hi\\", then\\nleave"\n_:b0\t"hallo"@de\n'
      + '<https://example.org/b>\t"42"^^<http://www.w3.org/2001/XMLSchema#integer>\n<https://example.org/c>\t\n',
    );
  });

  it('writes XML with escaped text, languages, datatypes, and no binding for unbound', () => {
    const xml = toXml({ head: { vars: ['s'] }, results: { bindings: [{ s: { type: 'literal', value: '<a & "b">\u0001', 'xml:lang': 'en' } }, {}] } });
    expect(xml).to.include('<binding name="s"><literal xml:lang="en">&lt;a &amp; &quot;b&quot;&gt;\uFFFD</literal></binding>');
    expect(xml).to.include('<result></result>');
    expect(toXml({ head: {}, boolean: false })).to.include('<boolean>false</boolean>');
  });
});
