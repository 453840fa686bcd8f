import { expect } from 'chai';
import { bearer, withSeededServer, type TestServer, type Tokens } from '../helpers/server.js';
import { createExtension, installMatrices } from '../helpers/installs.js';
import { bigMatrixTurtle } from '../helpers/lifecycle.js';

/**
 * Literals holding the characters that are hard to carry (every C0 control,
 * NUL first, DEL, quotes, backslash, line breaks, U+2028/U+2029, NEL), in a
 * package's Turtle and an extension's, installed and read back exactly. On
 * the remote store (WSM_TEST_STORE=sparql) they travel in update text to the
 * engine, in small writes and in large ones loaded through staging graphs.
 */
const SPECIAL: Array<[name: string, char: string]> = [
  ['NUL', '\u0000'], ['SOH', '\u0001'], ['BEL', '\u0007'], ['BS', '\b'], ['TAB', '\t'], ['LF', '\n'], ['VT', '\u000b'],
  ['FF', '\f'], ['CR', '\r'], ['ESC', '\u001b'], ['US', '\u001f'], ['DEL', '\u007f'], ['QUOTE', '"'], ['APOSTROPHE', "'"],
  ['BACKSLASH', '\\'], ['NEL', '\u0085'], ['LINE SEPARATOR', '\u2028'], ['PARAGRAPH SEPARATOR', '\u2029'],
];

const uchar = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * Two statements per character on `<base#cN>`: `ex:escaped`, the character
 * as a Turtle escape; `ex:raw`, as it is in a long string (the backslash,
 * which Turtle does not take raw, as `\\`).
 */
function specialTurtle(base: string, subjectsOnly = false): string {
  const lines = SPECIAL.map(([, c], i) => `<${base}#c${i}> <${base}#escaped> "a${uchar(c)}b" ; <${base}#raw> """a${c === '\\' ? '\\\\' : c}b""" .`);
  if (subjectsOnly) return lines.join('\n');
  return `@prefix mtx: <https://poliglot.io/os/spec/matrix#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
<${base}> a mtx:Matrix ; rdfs:label "Special characters" .
${lines.join('\n')}
`;
}

/** Every `escaped` and `raw` value of `base`'s statements, read through the SPARQL endpoint. */
async function readBack(t: TestServer, token: string, base: string): Promise<Map<string, string>> {
  const res = await t.http.get('/api/v1/sparql/acme').set(bearer(token)).set('Accept', 'application/sparql-results+json')
    .query({ query: `SELECT ?s ?p ?o WHERE { GRAPH ?g { ?s ?p ?o FILTER(?p IN (<${base}#escaped>, <${base}#raw>)) } }` });
  expect(res.status, JSON.stringify(res.body)).to.equal(200);
  const out = new Map<string, string>();
  for (const b of res.body.results.bindings as Array<Record<string, { value: string }>>) out.set(`${b.s!.value} ${b.p!.value}`, b.o!.value);
  return out;
}

function expectAll(values: Map<string, string>, base: string): void {
  for (const [i, [name, c]] of SPECIAL.entries()) {
    for (const form of ['escaped', 'raw']) expect(values.get(`${base}#c${i} ${base}#${form}`), `${name} (${form})`).to.equal(`a${c}b`);
  }
}

describe('special characters in literals, installed and read back', function () {
  this.timeout(300_000);
  let t: TestServer;
  let tokens: Tokens;
  withSeededServer('acme', (seeded) => ({ t, tokens } = seeded));

  it('a package install (a small write)', async () => {
    const base = 'https://example.org/matrices/special';
    await installMatrices(t, tokens.owner, 'acme', 'special', [{ uri: base, turtle: specialTurtle(base) }]);
    expectAll(await readBack(t, tokens.owner, base), base);
  });

  it('a large package install (on the remote store, loaded through staging graphs)', async () => {
    const base = 'https://example.org/matrices/special-large';
    const turtle = `${bigMatrixTurtle(base, 30_000)}\n${specialTurtle(base, true)}\n`;
    await installMatrices(t, tokens.owner, 'acme', 'special-large', [{ uri: base, turtle }]);
    expectAll(await readBack(t, tokens.owner, base), base);
  });

  it('an extension', async () => {
    const target = 'https://example.org/matrices/special';
    const base = 'https://example.org/extensions/special';
    const extension = await createExtension(t, tokens.owner, 'acme', target, specialTurtle(base, true), 'Special characters');
    expect(extension.active, JSON.stringify(extension.command)).to.equal(true);
    expectAll(await readBack(t, tokens.owner, base), base);
  });
});
