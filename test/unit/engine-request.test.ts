import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { engineAnswerPieces, EngineRequestError, type EngineRequest } from '../../src/store/remote/engine-request.js';

/**
 * The requests a query worker sends the remote engine itself (no engine: a
 * local HTTP server answers). The answer is read as it arrives, so a piece
 * may end anywhere in the bytes: the text must still come out whole.
 */
describe('engine requests a query worker sends itself (no engine)', () => {
  let server: http.Server;
  let url: string;
  let answer: (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void;

  before(async () => {
    server = http.createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => { body += c; });
      req.on('end', () => answer(req, res, body));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/sparql`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const request = (query: string): EngineRequest => ({
    url,
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/n-triples', Authorization: 'Basic dTpw' },
    body: new URLSearchParams({ query }).toString(),
    timeoutMs: 5_000,
  });

  it('gives the answer whole when its bytes arrive cut inside characters of two, three and four bytes', async () => {
    const text = '<urn:é> <urn:p> "café 日本 😀 ünïcödé" .\n'.repeat(50);
    const bytes = Buffer.from(text, 'utf8');
    // Cut points inside é (2 bytes), 日 (3 bytes) and 😀 (4 bytes) of the first line.
    const cuts = [bytes.indexOf(Buffer.from('é')) + 1, bytes.indexOf(Buffer.from('日')) + 2, bytes.indexOf(Buffer.from('😀')) + 3];
    let seen: { auth?: string; accept?: string; query?: string | null } = {};
    answer = (req, res, body) => {
      seen = { auth: req.headers.authorization, accept: req.headers.accept, query: new URLSearchParams(body).get('query') };
      res.writeHead(200, { 'Content-Type': 'application/n-triples' });
      let at = 0;
      const next = (i: number) => {
        const end = i < cuts.length ? cuts[i]! : bytes.length;
        res.write(bytes.subarray(at, end));
        at = end;
        if (i < cuts.length) setTimeout(() => next(i + 1), 30);
        else res.end();
      };
      next(0);
    };
    const pieces = await engineAnswerPieces(request('CONSTRUCT { ?s ?p ?o } WHERE { GRAPH <urn:g> { ?s ?p ?o } }'));
    expect(pieces.length, 'the answer arrived in several pieces').to.be.at.least(cuts.length);
    expect(pieces.join('')).to.equal(text);
    for (const piece of pieces) expect(piece, 'no replacement character').to.not.include('\uFFFD');
    expect(seen).to.deep.equal({ auth: 'Basic dTpw', accept: 'application/n-triples', query: 'CONSTRUCT { ?s ?p ?o } WHERE { GRAPH <urn:g> { ?s ?p ?o } }' });
  });

  it('sends a request rolled back as deadlocked again, and says what the engine answered to anything else', async () => {
    let calls = 0;
    answer = (_req, res) => {
      calls++;
      if (calls === 1) {
        res.writeHead(500, { 'Content-Type': 'text/plain' });
        res.end('SR172: Transaction deadlocked');
      } else {
        res.writeHead(200, { 'Content-Type': 'application/n-triples' });
        res.end('<urn:s> <urn:p> "after" .\n');
      }
    };
    expect((await engineAnswerPieces(request('q'))).join('')).to.equal('<urn:s> <urn:p> "after" .\n');
    expect(calls).to.equal(2);

    answer = (_req, res) => {
      res.writeHead(400, { 'Content-Type': 'text/plain' });
      res.end('SP030: SPARQL compiler, line 1: syntax error');
    };
    const refused = await engineAnswerPieces(request('q')).then(() => null, (err: unknown) => err);
    expect(refused).to.be.instanceOf(EngineRequestError);
    expect(refused).to.include({ kind: 'answered', status: 400 });
    expect((refused as Error).message).to.include('SP030');
  });

  it('says the engine is unreachable when nothing listens at its address', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const failed = await engineAnswerPieces({ ...request('q'), url: `http://127.0.0.1:${port}/sparql` }).then(() => null, (err: unknown) => err);
    expect(failed).to.be.instanceOf(EngineRequestError);
    expect(failed).to.include({ kind: 'unreachable' });
  });
});
