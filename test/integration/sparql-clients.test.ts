import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import n3 from 'n3';
import oxigraph from 'oxigraph';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { installMatrices, supportMatrixTurtle } from '../helpers/installs.js';

/*
 * The SPARQL endpoint as Python's two standard clients use it, with their
 * defaults: SPARQLWrapper 1.8 and rdflib 6.1's SPARQLStore (Debian's
 * python3-sparqlwrapper and python3-rdflib). Both ask for RDF/XML first for
 * CONSTRUCT and DESCRIBE. Their exact requests are replayed here; the
 * clients themselves run too, through test/fixtures/sparql-clients.py,
 * where Python has them (.ci/run installs them).
 */

const S = 'https://example.org/matrices/support';
const IAM = 'https://poliglot.io/os/spec/iam#';
const RDFS = 'http://www.w3.org/2000/01/rdf-schema#';
const XSD_STRING = 'http://www.w3.org/2001/XMLSchema#string';
const run = promisify(execFile);
const clientsScript = fileURLToPath(new URL('../fixtures/sparql-clients.py', import.meta.url));

/** A literal RDF/XML must escape, and one it must keep a carriage return in. */
const matrixTurtle = `${supportMatrixTurtle(S)}
<${S}#Triage> <${RDFS}seeAlso> "Tickets <first> & \\"then\\" answers: caf\u00e9\\r\\nnext line" .
`;

const QUERIES = {
  SELECT: `SELECT ?r ?label WHERE { GRAPH ?g { ?r a <${IAM}Role> ; <${RDFS}label> ?label } } ORDER BY ?label`,
  'ASK true': `ASK { GRAPH ?g { <${S}#HelpBot> <${IAM}hasRole> ?r } }`,
  'ASK false': `ASK { GRAPH ?g { <${S}#HelpBot> <${IAM}hasRole> <${S}#Supervisor> } }`,
  CONSTRUCT: `PREFIX iam: <${IAM}> CONSTRUCT { ?a iam:hasRole ?r } WHERE { GRAPH ?g { ?a iam:hasRole ?r } }`,
  DESCRIBE: `DESCRIBE <${S}#Triage>`,
};

type Term = { type: 'uri' | 'literal' | 'bnode'; value: string; datatype?: string; lang?: string };
type Answer = { rows?: Array<Record<string, Term>>; boolean?: boolean; triples?: Term[][]; contentType?: string; error?: string };

/** A term as the Python script writes it (`xsd:string` left implicit, as RDF 1.1 says). */
function plain(term: n3.Term): Term {
  if (term.termType === 'NamedNode') return { type: 'uri', value: term.value };
  if (term.termType === 'BlankNode') return { type: 'bnode', value: term.value };
  const literal = term as n3.Literal;
  if (literal.language) return { type: 'literal', value: literal.value, lang: literal.language };
  if (literal.datatype.value !== XSD_STRING) return { type: 'literal', value: literal.value, datatype: literal.datatype.value };
  return { type: 'literal', value: literal.value };
}

const sortTriples = (triples: Term[][]) => triples.sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));
const triplesOf = (ntriples: string) => sortTriples(new n3.Parser({ format: 'N-Triples' }).parse(ntriples).map((q) => [plain(q.subject), plain(q.predicate), plain(q.object)]));

/** RDF/XML read back (in the test only: the service reads no RDF/XML) as the same plain triples. */
const rdfXmlTriples = (xml: string) => sortTriples(oxigraph.parse(xml, { format: 'application/rdf+xml' })
  .map((q) => [plain(q.subject as n3.Term), plain(q.predicate as n3.Term), plain(q.object as n3.Term)]));

describe('SPARQL endpoint with Python\'s standard clients (SPARQLWrapper, rdflib SPARQLStore)', function () {
  this.timeout(120_000);
  let t: TestServer;
  let token: string;
  let endpoint: string;
  /** What the endpoint answers each query, in its own formats (the expected answers). */
  const expected: Record<string, Answer> = {};

  before(async () => {
    t = await startTestServer();
    const seeded = await seedWorkspace(t, 'acme');
    token = seeded.tokens.owner;
    await installMatrices(t, token, 'acme', 'support', [{ uri: S, turtle: matrixTurtle }]);
    endpoint = `${t.url}/api/v1/sparql/acme`;
    for (const [name, query] of Object.entries(QUERIES)) {
      if (name.startsWith('CONSTRUCT') || name.startsWith('DESCRIBE')) {
        const nt = await t.http.get('/api/v1/sparql/acme').query({ query }).set(bearer(token)).set('Accept', 'application/n-triples');
        expected[name] = { triples: triplesOf(nt.text) };
        continue;
      }
      const json = await t.http.get('/api/v1/sparql/acme').query({ query }).set(bearer(token)).set('Accept', 'application/sparql-results+json');
      expected[name] = typeof json.body.boolean === 'boolean' ? { boolean: json.body.boolean }
        : { rows: (json.body.results.bindings as Array<Record<string, { type: Term['type']; value: string; datatype?: string; 'xml:lang'?: string }>>)
          .map((row) => Object.fromEntries(Object.entries(row).map(([v, cell]) => [v, {
            type: cell.type, value: cell.value,
            ...(cell['xml:lang'] ? { lang: cell['xml:lang'] } : cell.datatype && cell.datatype !== XSD_STRING ? { datatype: cell.datatype } : {}),
          }]))) };
    }
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('the expected answers are not empty (the data is there)', () => {
    expect(expected.SELECT!.rows).to.have.length(3);
    expect(expected['ASK true']!.boolean).to.equal(true);
    expect(expected['ASK false']!.boolean).to.equal(false);
    expect(expected.CONSTRUCT!.triples).to.have.length(3);
    expect(expected.DESCRIBE!.triples!.length).to.be.greaterThan(3);
  });

  describe('their exact requests', () => {
    // SPARQLWrapper 1.8 by default: GET, its return-format parameters, Accept by query form.
    const wrapper = (query: string, accept: string) => t.http.get('/api/v1/sparql/acme').set(bearer(token)).set('Accept', accept)
      .query({ query, format: 'xml', output: 'xml', results: 'xml' });
    // rdflib's SPARQLStore by default: GET, one Accept for every form.
    const store = (query: string) => t.http.get('/api/v1/sparql/acme').set(bearer(token))
      .set('Accept', 'application/sparql-results+xml, application/rdf+xml').query({ query });

    for (const form of ['CONSTRUCT', 'DESCRIBE'] as const) {
      it(`${form}: RDF/XML holding exactly the graph of the N-Triples answer`, async () => {
        for (const res of [await wrapper(QUERIES[form], 'application/rdf+xml'), await store(QUERIES[form])]) {
          expect(res.status, res.text).to.equal(200);
          expect(res.headers['content-type']).to.match(/^application\/rdf\+xml/);
          expect(rdfXmlTriples(res.text)).to.deep.equal(expected[form]!.triples);
        }
      });
    }

    it('SELECT and ASK: SPARQL XML results', async () => {
      for (const res of [await wrapper(QUERIES.SELECT, 'application/sparql-results+xml'), await store(QUERIES.SELECT)]) {
        expect(res.headers['content-type']).to.match(/^application\/sparql-results\+xml/);
        expect(res.text).to.include(`<binding name="r"><uri>${S}#Responder</uri></binding>`);
      }
      expect((await store(QUERIES['ASK true'])).text).to.include('<boolean>true</boolean>');
    });

    it('keeps a carriage return of a literal in RDF/XML (written as &#13;)', async () => {
      const res = await store(`CONSTRUCT { ?s <${RDFS}seeAlso> ?o } WHERE { GRAPH ?g { ?s <${RDFS}seeAlso> ?o } }`);
      expect(res.text).to.include('&#13;');
      const [triple] = rdfXmlTriples(res.text);
      expect(triple![2]!.value).to.equal('Tickets <first> & "then" answers: caf\u00e9\r\nnext line');
    });

    it('answers 406 saying why when RDF/XML cannot carry the graph, and the other formats still work', async () => {
      const cases: Array<[string, RegExp]> = [
        ['CONSTRUCT { <urn:a> <https://example.org/terms/1> "x" } WHERE {}', /predicate <https:\/\/example\.org\/terms\/1> does not end in an XML name/],
        ['CONSTRUCT { <urn:a> <urn:isbn:123> "x" } WHERE {}', /predicate <urn:isbn:123>/],
        ['CONSTRUCT { <urn:a> <https://example.org/p> "bell\\u0007" } WHERE {}', /control character/],
        ['CONSTRUCT { <urn:a> <http://www.w3.org/1999/02/22-rdf-syntax-ns#li> "x" } WHERE {}', /RDF\/XML/],
      ];
      for (const [query, message] of cases) {
        const res = await store(query);
        expect(res.status, query).to.equal(406);
        expect(res.body.error.code).to.equal('NOT_ACCEPTABLE');
        expect(res.body.error.message).to.match(message);
        expect(res.body.error.message).to.include('text/turtle');
        const nt = await t.http.get('/api/v1/sparql/acme').query({ query }).set(bearer(token)).set('Accept', 'application/n-triples');
        expect(nt.status).to.equal(200);
        expect(nt.text.trim().split('\n')).to.have.length(1);
      }
    });
  });

  describe('the clients themselves', () => {
    let answers: Record<string, Record<string, Answer>>;

    before(async function () {
      // Debian's packages are for the system's Python, which another python3 on the PATH may hide.
      let python: string | undefined;
      for (const candidate of ['python3', '/usr/bin/python3']) {
        if (await run(candidate, ['-c', 'import SPARQLWrapper, rdflib']).then(() => true, () => false)) { python = candidate; break; }
      }
      if (!python) {
        // CI installs them (.ci/run); elsewhere: apt-get install python3-sparqlwrapper python3-rdflib.
        console.warn('    (skipped: python3 with SPARQLWrapper and rdflib is not installed)');
        this.skip();
      }
      const { stdout } = await run(python, [clientsScript, endpoint, token, JSON.stringify(QUERIES)], { maxBuffer: 16 * 2 ** 20 });
      answers = JSON.parse(stdout) as typeof answers;
    });

    for (const client of ['SPARQLWrapper', 'SPARQLStore'] as const) {
      for (const name of Object.keys(QUERIES)) {
        it(`${client}: ${name} with its defaults gives the endpoint's answer`, () => {
          const { contentType, ...answer } = answers[client]![name]!;
          expect(answer.error, answer.error).to.equal(undefined);
          if (answer.triples) sortTriples(answer.triples);
          expect(answer).to.deep.equal(expected[name]);
          if (client === 'SPARQLWrapper' && answer.triples) expect(contentType).to.match(/^application\/rdf\+xml/);
        });
      }
    }

    for (const name of ['CONSTRUCT', 'DESCRIBE']) {
      it(`rdflib's JSON-LD parser (SPARQLWrapper's JSON-LD path) reads the ${name} answer as the same graph`, () => {
        const answer = answers['JSON-LD']![name]!;
        expect(answer.error, answer.error).to.equal(undefined);
        expect(sortTriples(answer.triples!)).to.deep.equal(expected[name]!.triples);
      });
    }
  });
});
