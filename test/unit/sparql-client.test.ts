import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SparqlStore } from '../../src/store/remote/sparql-store.js';
import oxigraph from 'oxigraph';
import { READ_COMMITTED, insertOperations, type SparqlDialect } from '../../src/store/remote/sparql-client.js';
import { literal, sparql } from '../../src/rdf/sparql.js';

/** Text that is hard to carry in a literal: every C0 control, DEL, quotes, backslash, line and paragraph separators, NEL. */
const SPECIAL = [...Array.from({ length: 0x20 }, (_, i) => String.fromCharCode(i)), '\u007f', '"', "'", '\\', '\u2028', '\u2029', '\u0085'];
/** A raw control character (C0 or DEL) in request text, but the line feeds between its lines. */
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f]/;

/**
 * What the remote store sends for its reads and writes (no engine: a local
 * HTTP server records the requests). On Virtuoso every read first asks the
 * large-write gate (at read committed) and waits while it is closed; a large
 * write closes it before its final transaction and opens it in that
 * transaction, so readers wait for it instead of making it roll back as
 * deadlocked (docs/remote-store.md).
 */
describe('remote store requests (no engine)', () => {
  let server: http.Server;
  let url: string;
  const sent: string[] = [];
  /** How many more gate checks answer "closed" (for a second from now). */
  let closedChecks = 0;
  /** The plan epoch the gate checks answer ('' for none). */
  let epoch = '';
  /** How many more writes of `<urn:s>` the engine rolls back as deadlocked. */
  let deadlocks = 0;

  before(async () => {
    server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => { body += chunk.toString(); });
      req.on('end', () => {
        const query = new URLSearchParams(body).get('query') ?? '';
        sent.push(query);
        res.setHeader('Content-Type', 'application/sparql-results+json');
        if (deadlocks > 0 && query.includes('WSM_APPLY') && query.includes('urn:s')) {
          deadlocks--;
          res.statusCode = 500;
          res.end('SR172: Transaction deadlocked');
        } else if (isGateCheck(query)) {
          const last = closedChecks > 0 ? Date.now() + 1000 : 0;
          if (closedChecks > 0) closedChecks--;
          const row = { ...(last ? { last: { type: 'literal', value: String(last) } } : {}), ...(epoch ? { plans: { type: 'literal', value: epoch } } : {}) };
          res.end(JSON.stringify({ head: { vars: ['last', 'plans'] }, results: { bindings: [row] } }));
        } else if (/^ASK\b/.test(query)) {
          res.end('{"head":{},"boolean":true}');
        } else {
          res.end('{"head":{"vars":["n"]},"results":{"bindings":[{"n":{"type":"literal","value":"1"}}]}}');
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/sparql`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  beforeEach(() => { sent.length = 0; closedChecks = 0; epoch = ''; deadlocks = 0; });

  const store = (dialect: SparqlDialect) => new SparqlStore({ queryUrl: url, updateUrl: url, dialect }, 'https://t.example/', { checkGraphs: false });
  const isGateCheck = (query: string) => query.startsWith(READ_COMMITTED) && query.includes('largeWriteGateClosedUntil');

  it('virtuoso: select, ask, construct, queryRaw and dumpGraph each ask the gate first (at read committed), then read as they are', async () => {
    const s = store('virtuoso');
    await s.select(sparql`SELECT ?n WHERE { ?s ?p ?n }`);
    await s.ask(sparql`ASK { ?s ?p ?o }`);
    await s.construct(sparql`CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }`);
    await s.queryRaw(sparql`SELECT ?n WHERE { ?s ?p ?n }`, 'text/csv');
    await s.dumpGraph('https://t.example/g');
    expect(sent).to.have.length(10);
    for (let i = 0; i < 10; i += 2) expect(isGateCheck(sent[i]!), sent[i]).to.equal(true);
    for (let i = 1; i < 10; i += 2) expect(sent[i]).to.not.include('isolation');
    expect(sent[1]).to.equal('SELECT ?n WHERE { ?s ?p ?n }');
  });

  it('virtuoso: a read waits while the gate is closed and reads once it is open', async () => {
    const s = store('virtuoso');
    closedChecks = 2;
    await s.select(sparql`SELECT ?n WHERE { ?s ?p ?n }`);
    expect(sent.map((q) => (isGateCheck(q) ? 'gate' : q))).to.deep.equal(['gate', 'gate', 'gate', 'SELECT ?n WHERE { ?s ?p ?n }']);
  });

  it('virtuoso: a small write leaves the gate alone; a large write closes it before its final transaction, which opens it', async () => {
    const s = store('virtuoso');
    await s.write([{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH <https://t.example/g> { <urn:s> <urn:p> 1 } }`, graphs: ['https://t.example/g'] }]);
    expect(sent).to.have.length(1);
    expect(sent[0]).to.match(/WSM_APPLY/);
    expect(sent[0]).to.not.include('largeWriteGate');
    sent.length = 0;
    let data = '';
    for (let i = 0; i < 12_000; i++) data += `<urn:l:${i}> <urn:p:n> "value ${i} of a load large enough to be staged" .\n`;
    await s.write([{ kind: 'load', graph: 'https://t.example/big', format: 'application/n-triples', data }]);
    const closing = sent.findIndex((q) => q.includes('largeWriteGateClosedUntil'));
    expect(closing, 'the gate is closed in a call of its own').to.equal(sent.length - 2);
    expect(sent[closing]).to.include('INSERT DATA').and.not.include('ADD SILENT');
    const final = sent.at(-1)!;
    expect(final).to.include('ADD SILENT');
    const closedBy = /<https:\/\/t\.example\/store\/gate\/[^>]+>/.exec(sent[closing]!)![0];
    expect(final.indexOf(`DELETE DATA { GRAPH <https://t.example/store/gate> { ${closedBy}`), 'the final transaction opens it').to.be.greaterThan(0);
  });

  it('virtuoso: a write that readers roll back as deadlocked 3 times goes again behind the gate, which its transaction opens', async () => {
    const s = store('virtuoso');
    deadlocks = 4;
    await s.write([{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH <https://t.example/g> { <urn:s> <urn:p> 1 } }`, graphs: ['https://t.example/g'] }]);
    const kinds = sent.map((q) => (q.includes('largeWriteGateClosedUntil') ? (q.includes('urn:s') ? 'write+open' : 'close') : q.includes('urn:s') ? 'write' : 'other'));
    expect(kinds).to.deep.equal(['write', 'write', 'write', 'write', 'close', 'write+open']);
    const closedBy = /<https:\/\/t\.example\/store\/gate\/[^>]+>/.exec(sent[4]!)![0];
    expect(sent[5]).to.include(`DELETE DATA { GRAPH <https://t.example/store/gate> { ${closedBy}`);
  });

  it('virtuoso: once a large write set a plan epoch, reads carry it as a comment at their end, so the engine compiles them again', async () => {
    const s = store('virtuoso');
    epoch = 'e1';
    await s.select(sparql`SELECT ?n WHERE { ?s ?p ?n }`);
    epoch = 'e2';
    await s.ask(sparql`ASK { ?s ?p ?o }`);
    expect(sent.filter((q) => !isGateCheck(q))).to.deep.equal(['SELECT ?n WHERE { ?s ?p ?n }\n# wsm-plan e1', 'ASK { ?s ?p ?o }\n# wsm-plan e2']);
  });

  it('virtuoso: a large write\'s final transaction sets a new plan epoch', async () => {
    const s = store('virtuoso');
    let data = '';
    for (let i = 0; i < 12_000; i++) data += `<urn:l:${i}> <urn:p:n> "value ${i} of a load large enough to be staged" .\n`;
    await s.write([{ kind: 'load', graph: 'https://t.example/big', format: 'application/n-triples', data }]);
    const final = sent.at(-1)!;
    expect(final).to.include('ADD SILENT').and.include('queryPlanEpoch');
    expect(sent.slice(0, -1).some((q) => q.includes('queryPlanEpoch'))).to.equal(false);
  });

  it('virtuoso: a load of literals holding control characters sends none of them raw, small or staged', async () => {
    const s = store('virtuoso');
    const specials = SPECIAL.map((c, i) => `<urn:special:${i}> <urn:p:v> ${literal(`a${c}b`).__sparql} .\n`).join('');
    await s.write([{ kind: 'load', graph: 'https://t.example/small', format: 'application/n-triples', data: specials }]);
    let data = specials;
    for (let i = 0; i < 12_000; i++) data += `<urn:l:${i}> <urn:p:n> "value ${i} of a load large enough to be staged" .\n`;
    await s.write([{ kind: 'load', graph: 'https://t.example/big', format: 'application/n-triples', data }]);
    const writes = sent.filter((q) => q.includes('WSM_APPLY'));
    expect(writes.filter((q) => q.includes('urn:special:0'))).to.have.length(2);
    for (const q of writes) expect(RAW_CONTROL.test(q), q.slice(0, 200)).to.equal(false);
  });

  it('standard dialect: reads go as they are', async () => {
    const s = store('standard');
    await s.select(sparql`SELECT ?n WHERE { ?s ?p ?n }`);
    await s.ask(sparql`ASK { ?s ?p ?o }`);
    expect(sent).to.deep.equal(['SELECT ?n WHERE { ?s ?p ?n }', 'ASK { ?s ?p ?o }']);
  });
});

describe('remote store load operations (insertOperations)', () => {
  for (const format of ['application/n-triples', 'text/turtle'] as const) {
    it(`carry every special character of a ${format} literal escaped, and a store reads each back unchanged`, () => {
      // Turtle also takes the characters it allows raw in a long string (all but the backslash) as they are.
      const object = (c: string) => (format === 'text/turtle' && c !== '\\' && c !== '"' ? `"""a${c}b"""` : literal(`a${c}b`).__sparql);
      const data = SPECIAL.map((c, i) => `<urn:special:${i}> <urn:p:v> ${object(c)} .\n`).join('')
        + '_:x <urn:p:v> ' + literal(`bnode${SPECIAL.join('')}`).__sparql + ' .\n';
      const ops = insertOperations('urn:g', data, format);
      for (const op of ops) expect(RAW_CONTROL.test(op), op).to.equal(false);
      const store = new oxigraph.Store();
      for (const op of ops) store.update(op);
      for (const [i, c] of SPECIAL.entries()) {
        const [quad] = store.match(oxigraph.namedNode(`urn:special:${i}`), null, null, null);
        expect(quad?.object.value, `character U+${c.charCodeAt(0).toString(16).padStart(4, '0')}`).to.equal(`a${c}b`);
      }
      const [bnode] = store.match(null, null, null, null).filter((q) => q.subject.termType === 'BlankNode');
      expect(bnode!.object.value).to.equal(`bnode${SPECIAL.join('')}`);
    });
  }
});
