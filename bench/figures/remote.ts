import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  api, figure, installPackage, interleave, median, mintToken, removeDir, ROOT, sampleLatency, startBaseline, startService, workDir,
  type Figure,
} from '../lib.js';
import { generateTriples, packageArchive } from '../data.js';
import { sideBySide } from '../side-by-side.js';

/**
 * The remote store (`WSM_STORE=sparql`, Virtuoso) measured two ways
 * (issue 15):
 *
 * 1. Beside the embedded store: the reads, writes, install and slash
 *    figures run once on the embedded store and once on Virtuoso, one
 *    after the other in this run; each row is the Virtuoso value against
 *    the embedded one (each side's own baseline ratio is in the note).
 * 2. A large store: `WSM_BENCH_REMOTE_WORKSPACES` workspaces (100) created
 *    through the API, each with a package installed through the API, whose
 *    matrix graph is then filled to `WSM_BENCH_REMOTE_QUADS` / workspaces
 *    quads (10M in all) by Virtuoso's bulk loader (N-Quads files, `ld_dir`
 *    and `rdf_loader_run`, then `checkpoint`): the service's records are
 *    its own, the bulk of the quads are a package's data where it keeps
 *    them. On that store: start until /health answers, RSS after start and
 *    after the measurements, P5 p50 and slash-execute p50, each beside
 *    Virtuoso's own answer time for the same queries sent bare.
 *
 * The engine: started under a temporary directory with `npm run virtuoso`
 * (one for each part, so the large part's engine holds only its store)
 * and stopped at the end; or, with `WSM_BENCH_VIRTUOSO_DIR`, the engine set
 * up by `npm run virtuoso` under that data directory, used and left
 * running. `WSM_BENCH_REMOTE_PARTS` (`side`, `large`, or both, the default)
 * runs one part only.
 */

interface Credentials { sqlPort: number; httpPort: number; dbaPassword: string; user: string; password: string }

interface Engine {
  dir: string;
  settings: Record<string, string>;
  credentials: Credentials;
  version: string;
  /** Started by this figure (and stopped by it), not given by WSM_BENCH_VIRTUOSO_DIR. */
  owned: boolean;
  stop(): void;
}

function startEngine(): Engine {
  const given = process.env.WSM_BENCH_VIRTUOSO_DIR;
  const dir = given ? path.resolve(given) : workDir('virtuoso');
  const run = spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'scripts/virtuoso.ts'), 'start'], {
    cwd: ROOT, env: { ...process.env, WSM_DATA_DIR: dir }, encoding: 'utf8',
  });
  if (run.status !== 0) throw new Error(`npm run virtuoso failed: ${run.stderr.trim().slice(-500)}`);
  const settings = Object.fromEntries(run.stdout.trim().split('\n').filter((l) => l.includes('='))
    .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
  const credentials = JSON.parse(readFileSync(path.join(dir, 'virtuoso/credentials.json'), 'utf8')) as Credentials;
  const version = /Version (\S+)/.exec(((r) => `${r.stdout ?? ''}${r.stderr ?? ''}`)(spawnSync('virtuoso-t', ['-?'], { encoding: 'utf8' })))?.[1] ?? 'unknown';
  return {
    dir, settings, credentials, version, owned: !given,
    stop: () => {
      if (given) return;
      spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'scripts/virtuoso.ts'), 'stop'], { cwd: ROOT, env: { ...process.env, WSM_DATA_DIR: dir }, stdio: 'ignore' });
      removeDir(dir);
    },
  };
}

/** SQL as dba through isql-vt; its exit code says nothing of SQL errors, so its output is checked. */
function isql(engine: Engine, sql: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('isql-vt', [`127.0.0.1:${engine.credentials.sqlPort}`, 'dba', engine.credentials.dbaPassword], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { out += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { out += d; });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0 || out.includes('*** Error')) reject(new Error(`isql-vt: ${out.trim().slice(-800)}`));
      else resolve(out);
    });
    child.stdin.end(`${sql}\n`);
  });
}

/** A query sent bare to the engine's endpoint, as the service sends it (form POST, Basic auth). */
function bare(engine: Engine, query: string, accept: string): Promise<Response> {
  return fetch(engine.settings.WSM_SPARQL_QUERY_URL!, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/x-www-form-urlencoded', Accept: accept,
      Authorization: `Basic ${Buffer.from(`${engine.credentials.user}:${engine.credentials.password}`).toString('base64')}`,
    },
    body: new URLSearchParams({ query }).toString(),
  });
}

/**
 * A pass-through proxy in front of the engine that records the queries sent
 * through it: a service started on it shows which queries one request of
 * its costs. Used only to find the queries; nothing is timed through it.
 */
interface Recorded { query: string; accept: string; /** Time the engine took to answer, through the proxy. */ ms: number }

async function recordingProxy(engine: Engine): Promise<{ url: string; log: Recorded[]; close(): Promise<void> }> {
  const target = new URL(engine.settings.WSM_SPARQL_QUERY_URL!);
  const log: Recorded[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const form = new URLSearchParams(body.toString('utf8'));
      const entry = { query: form.get('query') ?? form.get('update') ?? '', accept: String(req.headers.accept ?? ''), ms: Number.NaN };
      log.push(entry);
      const started = performance.now();
      const headers: Record<string, string> = {};
      for (const h of ['content-type', 'accept', 'authorization']) if (req.headers[h]) headers[h] = String(req.headers[h]);
      fetch(new URL(req.url ?? '/', target), { method: req.method, headers, body: req.method === 'GET' ? undefined : body })
        .then(async (answer) => {
          const bytes = Buffer.from(await answer.arrayBuffer());
          entry.ms = performance.now() - started;
          res.writeHead(answer.status, { 'Content-Type': answer.headers.get('content-type') ?? 'text/plain' });
          res.end(bytes);
        })
        .catch((err: unknown) => { res.writeHead(502); res.end(String(err)); });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${target.pathname}`,
    log,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

const SIDE = ['reads', 'writes', 'install', 'slash'] as const;

/** Part 1: each figure on the embedded store, then on Virtuoso (a base IRI of its own on the engine). */
function sideBySideOn(engine: Engine): Promise<Figure[]> {
  const wanted = (process.env.WSM_BENCH_REMOTE_SIDE ?? SIDE.join(',')).split(',');
  return sideBySide(SIDE.filter((n) => wanted.includes(n)), {
    label: 'Virtuoso',
    on: async (name, fn) => {
      const keys = [...Object.keys(engine.settings), 'WSM_BASE_IRI'];
      const saved = Object.fromEntries(keys.map((k) => [k, process.env[k]]));
      Object.assign(process.env, engine.settings, { WSM_BASE_IRI: `https://workspaces.local/bench-${name}-${Date.now()}/` });
      try {
        return await fn();
      } finally {
        for (const [k, v] of Object.entries(saved)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; }
      }
    },
  }, progress);
}

const progress = (line: string) => process.stderr.write(`remote: ${line} (load average ${os.loadavg()[0]!.toFixed(1)})\n`);

const QUERY_ACCEPT = 'application/n-triples';

/** Part 2: a large store on Virtuoso, bulk-loaded. */
async function largeStore(engine: Engine): Promise<Figure[]> {
  const totalQuads = Number(process.env.WSM_BENCH_REMOTE_QUADS ?? 10_000_000);
  const workspaces = Number(process.env.WSM_BENCH_REMOTE_WORKSPACES ?? 100);
  const perWorkspace = Math.floor(totalQuads / workspaces);
  // The service's default base IRI on an engine of its own; on an engine given by WSM_BENCH_VIRTUOSO_DIR, one of this
  // run's own, so a store left there by an earlier run is not mixed into this one.
  const base = engine.owned ? 'https://workspaces.local/' : `https://workspaces.local/bench-large-${Date.now()}/`;
  const remote = { ...engine.settings, WSM_DEMO: 'false', WSM_BASE_IRI: base };
  const dataDir = workDir('remote-large');
  const figures: Figure[] = [];
  const notes: string[] = [];
  try {
    // The service's own records: workspaces, members, installed packages, a slash command, made through the API.
    const setupStarted = performance.now();
    let matrixGraphs: Map<string, string>;
    let commandId: string;
    const query = (uri: string) => `CONSTRUCT { ?s ?p ?o } WHERE { ?s <${uri}/data/size> ?n . FILTER(?n < 5000) ?s ?p ?o }`;
    const slug = (i: number) => `ws-${String(i).padStart(3, '0')}`;
    const matrixUri = (i: number) => `https://bench.example/matrix/${slug(i)}`;
    {
      const svc = await startService(dataDir, remote, 600_000);
      try {
        const root = await mintToken(dataDir, 'root', true);
        const token = await mintToken(dataDir, 'owner');
        const archives = await Promise.all(Array.from({ length: workspaces }, (_, i) => packageArchive(`pkg-${slug(i)}`, '1.0.0', matrixUri(i), 0)));
        let next = 0;
        const worker = async () => {
          for (let i = next++; i < workspaces; i = next++) {
            const created = await api(svc.url, root, 'POST', '/api/v1/workspaces', { slug: slug(i), owner: 'owner' });
            if (created.status !== 201) throw new Error(`workspace ${slug(i)}: ${created.status} ${created.text.slice(0, 200)}`);
            await installPackage(svc.url, token, slug(i), archives[i]!, 'package.tgz', 50);
          }
        };
        await Promise.all(Array.from({ length: 4 }, worker));
        const created = await api(svc.url, token, 'POST', `/api/v1/commands/${slug(0)}`, {
          alias: 'things-below-5000', description: 'Things below a size', interpretation: 'Every triple of each thing smaller than 5000.',
          scriptType: 'CONSTRUCT', scriptContent: query(matrixUri(0)),
        });
        if (created.status !== 200) throw new Error(`C5 answered ${created.status}: ${created.text.slice(0, 200)}`);
        commandId = created.json.data.id as string;
      } finally {
        await svc.stop();
      }
      const rows = await (await bare(engine, `PREFIX wsm: <https://w3id.org/wsm/ns#> SELECT ?g ?uri WHERE { GRAPH ?pg { ?m a wsm:Matrix ; wsm:graph ?g ; wsm:uri ?uri } FILTER(STRSTARTS(STR(?g), "${base}")) }`,
        'application/sparql-results+json')).json() as { results: { bindings: Array<{ g: { value: string }; uri: { value: string } }> } };
      matrixGraphs = new Map(rows.results.bindings.map((b) => [b.uri.value, b.g.value]));
      if (matrixGraphs.size < workspaces) throw new Error(`found ${matrixGraphs.size} matrix graphs for ${workspaces} workspaces`);
    }
    const setupMs = performance.now() - setupStarted;
    progress(`records made through the API in ${(setupMs / 1000).toFixed(0)} s`);

    // The bulk of the quads: each package's data, in its matrix graph, through the bulk loader.
    const bulkDir = path.join(engine.dir, 'virtuoso', `bulk-${Date.now()}`);
    mkdirSync(bulkDir, { recursive: true });
    const generateStarted = performance.now();
    for (let i = 0; i < workspaces; i++) {
      const graph = matrixGraphs.get(matrixUri(i))!;
      const nq = generateTriples(perWorkspace, `${matrixUri(i)}/data/`).replace(/ \.\n/g, ` <${graph}> .\n`);
      writeFileSync(path.join(bulkDir, `${slug(i)}.nq`), nq);
    }
    const generateMs = performance.now() - generateStarted;
    const loaders = Number(process.env.WSM_BENCH_REMOTE_LOADERS ?? 2);
    const loadStarted = performance.now();
    const loadAverageBefore = os.loadavg()[0]!;
    await isql(engine, `ld_dir('${bulkDir}', '*.nq', 'urn:x-wsm:bench:unused');`);
    await Promise.all(Array.from({ length: loaders }, () => isql(engine, 'rdf_loader_run();')));
    await isql(engine, 'checkpoint;');
    const loadMs = performance.now() - loadStarted;
    const loadAverageAfter = os.loadavg()[0]!;
    progress(`bulk load done in ${(loadMs / 1000).toFixed(0)} s`);
    const failed = await isql(engine, `SELECT ll_file, ll_error FROM DB.DBA.LOAD_LIST WHERE ll_file LIKE '${bulkDir}%' AND (ll_error IS NOT NULL OR ll_state <> 2);`);
    if (!/\b0 Rows\./.test(failed)) throw new Error(`the bulk load left files unloaded or failed: ${failed.slice(-800)}`);
    removeDir(bulkDir);
    const countAnswer = await (await bare(engine, `SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } FILTER(STRSTARTS(STR(?g), "${base}")) }`,
      'application/sparql-results+json')).json() as { results: { bindings: Array<{ n: { value: string } }> } };
    const quads = Number(countAnswer.results.bindings[0]!.n.value);
    const label = quads.toLocaleString('en');
    notes.push(`${workspaces} workspaces and their packages made through the API in ${(setupMs / 1000).toFixed(0)} s; `
      + `${(workspaces * perWorkspace).toLocaleString('en')} quads of package data written as N-Quads in ${(generateMs / 1000).toFixed(0)} s, `
      + `bulk-loaded (${loaders} rdf_loader_run, then checkpoint) in ${(loadMs / 1000).toFixed(0)} s at load average ${loadAverageBefore.toFixed(1)}-${loadAverageAfter.toFixed(1)}`);

    // The queries one P5 and one execute send to the engine, found through a recording proxy.
    const p5Path = `/api/v1/packages/${slug(0)}/pkg-${slug(0)}`;
    const executePath = `/api/v1/commands/${slug(0)}/${commandId}/execute`;
    const ownerToken = await mintToken(dataDir, 'owner');
    const get = (url: string) => () => fetch(url + p5Path, { headers: { Authorization: `Bearer ${ownerToken}` } });
    const execute = (url: string) => () => fetch(url + executePath, { method: 'POST', headers: { Authorization: `Bearer ${ownerToken}`, Accept: QUERY_ACCEPT } });
    const ownWrites = (q: string) => q.includes('sql:WSM_APPLY');
    let p5Queries: Recorded[];
    let executeQueries: Recorded[];
    let expectedTriples: number;
    let startupQueries: Recorded[] = [];
    let firstExecuteQueries: Recorded[] = [];
    let firstExecuteMs = 0;
    const slowest = (qs: Recorded[]) => {
      const top = [...qs].sort((a, b) => b.ms - a.ms).slice(0, 3);
      const total = qs.reduce((n, q) => n + q.ms, 0);
      const shown = top.map((q) => `${(q.ms / 1000).toFixed(1)} s \`${q.query.replace(/\s+/g, ' ').slice(0, 140)}\``).join(', ');
      return top.length ? `${qs.length} engine queries took ${(total / 1000).toFixed(1)} s in all (some at once), the slowest: ${shown}` : 'no engine query';
    };
    {
      const proxy = await recordingProxy(engine);
      const svc = await startService(dataDir, { ...remote, WSM_SPARQL_QUERY_URL: proxy.url, WSM_SPARQL_UPDATE_URL: proxy.url }, 600_000);
      startupQueries = [...proxy.log];
      try {
        for (let i = 0; i < 5; i++) { const r = await get(svc.url)(); if (r.status !== 200) throw new Error(`P5 answered ${r.status}: ${(await r.text()).slice(0, 200)}`); }
        proxy.log.length = 0;
        await (await get(svc.url)()).arrayBuffer();
        p5Queries = proxy.log.filter((q) => !ownWrites(q.query));
        for (let i = 0; i < 3; i++) {
          proxy.log.length = 0;
          const started = performance.now();
          const r = await execute(svc.url)();
          if (i === 0) { firstExecuteMs = performance.now() - started; firstExecuteQueries = [...proxy.log]; }
          const text = await r.text();
          if (r.status !== 200) throw new Error(`execute answered ${r.status}: ${text.slice(0, 200)}`);
          expectedTriples = text.split('\n').filter((l) => l.trim()).length;
        }
        proxy.log.length = 0;
        await (await execute(svc.url)()).arrayBuffer();
        executeQueries = proxy.log.filter((q) => !ownWrites(q.query));
      } finally {
        await svc.stop();
        await proxy.close();
      }
    }
    const matrixGraph = matrixGraphs.get(matrixUri(0))!;
    const bareExecute = query(matrixUri(0)).replace(' WHERE ', ` FROM <${matrixGraph}> WHERE `);
    const bareAnswer = await (await bare(engine, bareExecute, QUERY_ACCEPT)).text();
    const bareTriples = bareAnswer.split('\n').filter((l) => l.trim()).length;
    if (bareTriples !== expectedTriples!) throw new Error(`the command answered ${expectedTriples!} triples, the engine ${bareTriples}`);

    // Start until /health answers and RSS after start, beside a bare Express server (node + express).
    const starts = await interleave(3,
      async () => { const s = await startService(dataDir, remote, 600_000); await new Promise((r) => setTimeout(r, 500)); const rss = s.rss(); await s.stop(); return { ms: s.startMs, rss }; },
      async () => { const b = await startBaseline('static'); await new Promise((r) => setTimeout(r, 500)); const rss = b.rss(); await b.stop(); return { ms: b.startMs, rss }; },
      (x) => x.ms);
    figures.push(figure({
      name: `start until /health answers, ${label} quads on Virtuoso`, unit: 'ms', value: starts.serviceMedian, baseline: starts.baselineMedian, ratios: starts.ratios,
      target: '<= 3000 ms', check: (_r, v) => v <= 3000,
      note: `baseline: node + an Express server answering fixed bytes; ${notes[0]}`,
      cause: `before /health answered (start through the recording proxy) ${slowest(startupQueries)}`,
    }));
    const MB = 1e6;
    const rssStart = median(starts.service.map((s) => s.rss)) / MB;
    figures.push(figure({
      name: `RSS after start, ${label} quads on Virtuoso`, unit: 'MB', value: rssStart, baseline: median(starts.baseline.map((s) => s.rss)) / MB,
      target: '<= 300 MB', check: (_r, v) => v <= 300, note: 'baseline: the same Express server; service: 0.5 s after /health answered, before any request',
      cause: 'not analysed',
    }));

    // P5 and execute p50, each beside the engine answering the same queries sent bare, in interleaved pairs.
    const svc = await startService(dataDir, remote, 600_000);
    try {
      const sendAll = (qs: Recorded[]) => async () => {
        for (const q of qs) {
          const answer = await bare(engine, q.query, q.accept || 'application/sparql-results+json');
          if (!answer.ok) throw new Error(`the engine answered ${answer.status}: ${(await answer.text()).slice(0, 200)}`);
          await answer.arrayBuffer();
        }
        // Each answer was read whole above; sampleLatency reads this empty one.
        return new Response('');
      };
      const p5 = await interleave(3,
        async () => (await sampleLatency(100, get(svc.url))).p50,
        async () => (await sampleLatency(100, sendAll(p5Queries))).p50, (ms) => ms);
      figures.push(figure({
        name: `P5 GET package, ${label} quads on Virtuoso, p50`, unit: 'ms', value: p5.serviceMedian, baseline: p5.baselineMedian, ratios: p5.ratios,
        target: 'report (no target set)', check: () => true,
        note: `baseline: the ${p5Queries.length} queries one warm P5 sent to the engine (recorded through a proxy), sent bare one after the other; sequential, one connection`,
      }));
      const ex = await interleave(3,
        async () => (await sampleLatency(15, execute(svc.url), 3)).p50,
        async () => (await sampleLatency(15, () => bare(engine, bareExecute, QUERY_ACCEPT), 3)).p50, (ms) => ms);
      figures.push(figure({
        name: `slash execute (${expectedTriples!.toLocaleString('en')}-triple CONSTRUCT, N-Triples), ${label} quads on Virtuoso, p50`, unit: 'ms',
        value: ex.serviceMedian, baseline: ex.baselineMedian, ratios: ex.ratios, target: 'report (no target set)', check: () => true,
        note: `baseline: the same CONSTRUCT sent bare to the engine over the package's matrix graph (FROM); the service runs it on its worker's copy `
          + `of the workspace's graphs and sent ${executeQueries.length} queries of its own per warm execute (gate, generations); `
          + `the first execute (the worker's copy made) took ${(firstExecuteMs / 1000).toFixed(1)} s: ${slowest(firstExecuteQueries)}`,
      }));
      const rssAfter = svc.rss() / MB;
      figures.push(figure({
        name: `RSS after the P5 and execute measurements, ${label} quads on Virtuoso`, unit: 'MB', value: rssAfter, baseline: rssStart,
        target: '<= 300 MB', check: (_r, v) => v <= 300,
        note: 'baseline: RSS after start (above); the service holds its worker\'s copy of the workspace\'s graphs',
        cause: 'the query workers started for the first execute stay up (threads, each with its V8 heap and Oxigraph memory, and the copy of the '
          + `workspace's graphs, ${perWorkspace.toLocaleString('en')} quads of package data); not analysed further here`,
      }));
    } finally {
      await svc.stop();
    }
    return figures;
  } finally {
    removeDir(dataDir);
  }
}

export async function run(): Promise<Figure[]> {
  const parts = (process.env.WSM_BENCH_REMOTE_PARTS ?? 'side,large').split(',');
  const figures: Figure[] = [];
  for (const part of ['side', 'large'].filter((p) => parts.includes(p))) {
    const engine = startEngine();
    try {
      const rows = part === 'side' ? await sideBySideOn(engine) : await largeStore(engine);
      if (rows[0]) rows[0].note = `${rows[0].note ?? ''}; Virtuoso ${engine.version}`;
      figures.push(...rows);
    } finally {
      engine.stop();
    }
  }
  return figures;
}
