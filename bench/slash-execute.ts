/**
 * Slash command execution overhead: p50 latency of running a command over
 * HTTP (authenticated, through the sandbox worker) against the same query
 * run bare in-process on the store, and the parts in between.
 *
 *   npx tsx bench/slash-execute.ts [iterations]
 */
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { startServer } from '../src/server.js';
import { mintToken } from '../src/auth/tokens.js';
import { prefixes } from '../src/rdf/vocab.js';
import { sparql, iri, literal, integer, boolean } from '../src/rdf/sparql.js';
import { stableId } from '../src/rdf/ids.js';

const iterations = Number(process.argv[2] ?? 2000);
const M = 'https://example.org/matrices/bench';
const SCRIPT = sparql`PREFIX iam: <https://poliglot.io/os/spec/iam#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
CONSTRUCT { ?agent iam:hasRole ?role . ?role rdfs:label ?label }
WHERE { ?agent a iam:Agent ; iam:hasRole ?role . OPTIONAL { ?role rdfs:label ?label } }`;

function matrixTurtle(): string {
  const lines = [`<${M}> a <https://poliglot.io/os/spec/matrix#Matrix> .`];
  for (let i = 0; i < 20; i++) lines.push(`<${M}#role${i}> a <https://poliglot.io/os/spec/iam#Role> ; <http://www.w3.org/2000/01/rdf-schema#label> "Role ${i}" .`);
  for (let i = 0; i < 5; i++) lines.push(`<${M}#agent${i}> a <https://poliglot.io/os/spec/iam#Agent> ; <https://poliglot.io/os/spec/iam#hasRole> <${M}#role${i}> , <${M}#role${i + 5}> .`);
  return lines.join('\n');
}

const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'wsm-bench-'));
  const config = loadConfig({ PORT: '0', WSM_DATA_DIR: dataDir, WSM_LOG_LEVEL: 'silent', WSM_DEMO: 'false' });
  const server = await startServer(config, createLogger('silent'));
  try {
    const { store, graphs, workspaces } = server.services;
    const ws = await workspaces.create({ slug: 'bench', owner: 'bench-admin' });
    const token = await mintToken(dataDir, 'bench-admin', { ttlSeconds: 3600 });
    // A matrix as docs/rdf-model.md lays it out.
    const matrixId = stableId('matrix', ws.id, M);
    const graph = graphs.matrix(ws.id, matrixId);
    await store.write([
      { kind: 'update', sparql: sparql`${prefixes}INSERT DATA { GRAPH ${iri(graphs.packages(ws.id))} {
        ${iri(graphs.resource('matrix', matrixId))} a wsm:Matrix ; wsm:id ${literal(matrixId)} ; wsm:uri ${iri(M)} ; wsm:name "bench" ;
          wsm:dependencyCount ${integer(0)} ; wsm:graph ${iri(graph)} ; wsm:workspace ${iri(graphs.resource('workspace', ws.id))} ;
          wsm:autoUpdate ${boolean(false)} . } }`, graphs: [graphs.packages(ws.id)] },
      { kind: 'load', graph, format: 'text/turtle', data: matrixTurtle() },
    ]);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const request = (method: string, urlPath: string, headers: Record<string, string>, body?: string) =>
      new Promise<{ ms: number; status: number; text: string }>((resolve, reject) => {
        const t0 = performance.now();
        const req = http.request(new URL(urlPath, server.url), { method, agent, headers }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => { text += chunk; });
          res.on('end', () => resolve({ ms: performance.now() - t0, status: res.statusCode ?? 0, text }));
        });
        req.on('error', reject);
        req.end(body);
      });
    const auth = { Authorization: `Bearer ${token}` };
    const created = await request('POST', '/api/v1/commands/bench', { ...auth, 'Content-Type': 'application/json' },
      JSON.stringify({ alias: 'agent-roles', scriptType: 'CONSTRUCT', scriptContent: SCRIPT }));
    if (created.status !== 200) throw new Error(`create failed: ${created.text}`);
    const id = (JSON.parse(created.text) as { data: { id: string } }).data.id;

    const measure = async (name: string, run: () => unknown) => {
      for (let i = 0; i < Math.min(200, iterations / 5); i++) await run();
      const xs: number[] = [];
      for (let i = 0; i < iterations; i++) {
        const t0 = performance.now();
        await run();
        xs.push(performance.now() - t0);
      }
      return { name, p50: p50(xs) };
    };
    const rows = [
      await measure('bare query in-process (store)', () => store.queryRaw(SCRIPT, 'application/n-triples', { defaultGraphs: [graph] })),
      await measure('sandbox run (worker round trip)', () => server.services.sandbox.run(ws.id, 'knowledge', {
        query: SCRIPT, kind: 'graph', format: 'application/n-triples', union: true,
      })),
      await measure('HTTP GET /health', () => request('GET', '/health', {})),
      await measure('HTTP GET workspace (auth + access)', () => request('GET', '/api/v1/workspaces/bench', auth)),
      await measure('HTTP execute, N-Triples', () => request('POST', `/api/v1/commands/bench/${id}/execute`, { ...auth, Accept: 'application/n-triples' })),
      await measure('HTTP execute, JSON envelope', () => request('POST', `/api/v1/commands/bench/${id}/execute`, auth)),
    ];
    const bare = rows[0]!.p50;
    for (const row of rows) {
      process.stdout.write(`${row.name.padEnd(40)} p50 ${row.p50.toFixed(3)} ms   (+${(row.p50 - bare).toFixed(3)} ms over bare)\n`);
    }
    agent.destroy();
  } finally {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
