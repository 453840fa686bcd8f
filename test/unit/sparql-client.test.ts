import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SparqlStore } from '../../src/store/sparql-store.js';
import type { SparqlDialect } from '../../src/store/sparql-client.js';
import { sparql } from '../../src/rdf/sparql.js';

/**
 * What the remote store sends for its reads and writes (no engine: a local
 * HTTP server records the requests). On Virtuoso every read first asks the
 * large-write gate, and a large write's final transaction takes the gate
 * before its additions, so readers wait for it instead of making it roll
 * back as deadlocked (docs/remote-store.md).
 */
describe('remote store requests (no engine)', () => {
  let server: http.Server;
  let url: string;
  const sent: string[] = [];

  before(async () => {
    server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => { body += chunk.toString(); });
      req.on('end', () => {
        const query = new URLSearchParams(body).get('query') ?? '';
        sent.push(query);
        res.setHeader('Content-Type', 'application/sparql-results+json');
        if (/\bASK\b/.test(query) && !/WSM_APPLY/.test(query)) res.end('{"head":{},"boolean":true}');
        else res.end('{"head":{"vars":["n"]},"results":{"bindings":[{"n":{"type":"literal","value":"1"}}]}}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/sparql`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  beforeEach(() => { sent.length = 0; });

  const store = (dialect: SparqlDialect) => new SparqlStore({ queryUrl: url, updateUrl: url, dialect }, 'https://t.example/', { checkGraphs: false });

  const GATE_ASK = 'ASK { GRAPH <https://t.example/store/gate> { <https://t.example/store/gate> <https://w3id.org/wsm/ns#largeWriteGate> true } }';

  it('virtuoso: select, ask, construct, queryRaw and dumpGraph each ask the gate first', async () => {
    const s = store('virtuoso');
    await s.select(sparql`SELECT ?n WHERE { ?s ?p ?n }`);
    await s.ask(sparql`ASK { ?s ?p ?o }`);
    await s.construct(sparql`CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }`);
    await s.queryRaw(sparql`SELECT ?n WHERE { ?s ?p ?n }`, 'text/csv');
    await s.dumpGraph('https://t.example/g');
    expect(sent).to.have.length(10);
    for (let i = 0; i < 10; i += 2) expect(sent[i]).to.equal(GATE_ASK);
    expect(sent[1]).to.equal('SELECT ?n WHERE { ?s ?p ?n }');
  });

  it('virtuoso: a small write leaves the gate alone; a large write\'s final transaction takes it before its additions', async () => {
    const s = store('virtuoso');
    await s.write([{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH <https://t.example/g> { <urn:s> <urn:p> 1 } }`, graphs: ['https://t.example/g'] }]);
    expect(sent).to.have.length(1);
    expect(sent[0]).to.match(/WSM_APPLY/);
    expect(sent[0]).to.not.include('largeWriteGate');
    sent.length = 0;
    let data = '';
    for (let i = 0; i < 12_000; i++) data += `<urn:l:${i}> <urn:p:n> "value ${i} of a load large enough to be staged" .\n`;
    await s.write([{ kind: 'load', graph: 'https://t.example/big', format: 'application/n-triples', data }]);
    const final = sent.at(-1)!;
    expect(sent.length).to.be.greaterThan(2);
    for (const staged of sent.slice(0, -1)) expect(staged).to.not.include('largeWriteGate');
    const gate = final.indexOf('largeWriteGate');
    expect(gate, 'the final transaction takes the gate').to.be.greaterThan(0);
    expect(gate).to.be.lessThan(final.indexOf('ADD SILENT'));
  });

  it('standard dialect: reads go as they are', async () => {
    const s = store('standard');
    await s.select(sparql`SELECT ?n WHERE { ?s ?p ?n }`);
    await s.ask(sparql`ASK { ?s ?p ?o }`);
    expect(sent).to.deep.equal(['SELECT ?n WHERE { ?s ?p ?n }', 'ASK { ?s ?p ?o }']);
  });
});
