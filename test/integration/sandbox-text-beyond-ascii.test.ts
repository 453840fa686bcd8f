import { expect } from 'chai';
import { bearer, withSeededServer, type TestServer, type Tokens } from '../helpers/server.js';
import { installMatrices } from '../helpers/installs.js';

const M = 'https://example.org/matrices/écrits';
const COUNT = 3000;

/** A text of one, two, three and four UTF-8 bytes per character (é, 日本, 😀), different for each i. */
const textOf = (i: number) => `note ${i}: café crème, 日本語のテキスト ${i}, 😀🚀 ${'é'.repeat(i % 7)}${'語'.repeat(i % 5)}`;

/**
 * A query worker's copy of a graph holds text beyond ASCII exactly, also
 * when the graph's text is far larger than the pieces it arrives in: on the
 * remote store the worker reads the engine's answer as it comes (pieces of
 * some kilobytes, cut anywhere, so inside characters too); on the embedded
 * store it rebuilds the graph from the journal.
 */
describe('query sandbox: text beyond ASCII in a graph larger than the pieces a worker reads', function () {
  this.timeout(120_000);
  let t: TestServer;
  let tokens: Tokens;
  withSeededServer('acme', (s) => ({ t, tokens } = s));

  it('answers every literal and IRI exactly, from the administrators\' endpoint and a slash command', async () => {
    const lines = Array.from({ length: COUNT }, (_, i) => `<${M}#note-${i}-ü> <${M}#text> "${textOf(i)}" .`);
    await installMatrices(t, tokens.owner, 'acme', 'ecrits', [{
      uri: M,
      name: 'ecrits',
      turtle: `<${M}> a <https://poliglot.io/os/spec/matrix#Matrix> ; <http://www.w3.org/2000/01/rdf-schema#label> "Écrits 📝" .\n${lines.join('\n')}\n`,
    }]);

    const query = `SELECT ?s ?text WHERE { GRAPH ?g { ?s <${M}#text> ?text } }`;
    const res = await t.http.get('/api/v1/sparql/acme').set(bearer(tokens.owner)).query({ query }).set('Accept', 'application/sparql-results+json');
    expect(res.status, res.text.slice(0, 300)).to.equal(200);
    const rows = JSON.parse(res.text).results.bindings as Array<{ s: { value: string }; text: { value: string } }>;
    expect(rows).to.have.length(COUNT);
    const found = new Map(rows.map((r) => [r.s.value, r.text.value]));
    for (let i = 0; i < COUNT; i++) expect(found.get(`${M}#note-${i}-ü`), `note ${i}`).to.equal(textOf(i));

    const created = await t.http.post('/api/v1/commands/acme').set(bearer(tokens.owner)).send({
      alias: 'notes-with-rocket', scriptType: 'CONSTRUCT',
      scriptContent: `CONSTRUCT { ?s <${M}#text> ?text } WHERE { ?s <${M}#text> ?text FILTER(CONTAINS(?text, "😀🚀") && STRENDS(STR(?s), "-ü")) }`,
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(200);
    const run = await t.http.post('/api/v1/commands/acme/alias/notes-with-rocket/execute').set(bearer(tokens.member)).set('Accept', 'application/n-triples');
    expect(run.status, run.text.slice(0, 300)).to.equal(200);
    const triples = run.text.split('\n').filter((line) => line.trim());
    expect(triples).to.have.length(COUNT);
    expect(triples).to.include(`<${M}#note-2999-ü> <${M}#text> "${textOf(2999)}" .`);
  });
});
