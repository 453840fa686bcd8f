import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { api, figure, freePort, percentile, removeDir, ROOT, serviceWithWorkspace, waitForCommand, workDir, type Figure } from '../lib.js';
import { matrixArchive, matrixTurtle, packageArchive } from '../data.js';

/**
 * `/health` while the service is attacked the ways reliability round 3
 * found it held: `/health` is sent every 10 ms, without waiting for the
 * previous answer, while an attack runs; the same sampling on the idle
 * service, in the same run, is the baseline. A stalled event loop shows as a
 * run of slow answers. The target is a p99 under 100 ms during each attack.
 * Sampled on both ports at once, each a figure: the API port, and the
 * operations port (WSM_OPS_PORT) that probes are pointed at.
 *
 * Attacks (each one after the other, each sampled on its own):
 * - `mcp-nested`: the MCP `sparql` tool called by an administrator with
 *   `SELECT * WHERE {{{...}}}` nested 3,000 deep, then 20,000 deep, five
 *   times each, one call after another;
 * - `publish-large`: a dry-run publish of one 150,000-triple matrix, twice;
 * - `publish-nested`: a dry-run publish of Turtle of 200,000 nested blank
 *   nodes, twice.
 * - `event-streams`: 2,000 Server-Sent Event streams of one member on the
 *   events of an install while it runs, none of them read (slow readers);
 *   beyond the cap per user (`WSM_MAX_EVENT_STREAMS`) they are answered 429.
 *   They are opened by a process of their own (bench/stream-opener.ts), as
 *   the load generator runs apart: opened here, their 2,000 connections held
 *   this process's event loop, the one that sends and times the samples.
 * - `event-streams-balanced`: the same streams through the service's
 *   balancer (`npm run balancer`, HAProxy, with its defaults) in front; the
 *   install and `/health` go to the instance itself. Needs HAProxy.
 * More attacks plug in as entries of `ATTACKS` (an attack gets the running
 * service and resolves when it is done).
 */

const INTERVAL_MS = 10;
const IDLE_MS = 3000;

export interface AttackContext { url: string; token: string; slug: string; root: string; dataDir: string }
/** `prepare` builds what the attack sends (before sampling: the bench's own event loop sends the samples) and answers the attack. */
export interface Attack {
  name: string;
  title: string;
  /** Why it cannot run on this machine (a missing program), or undefined. */
  unavailable?: () => string | undefined;
  prepare: (ctx: AttackContext) => Promise<() => Promise<void>>;
}

async function mcpCall(ctx: AttackContext, query: string): Promise<void> {
  const res = await fetch(`${ctx.url}/mcp/${ctx.slug}`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${ctx.token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'sparql', arguments: { query } } }),
  });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`MCP answered ${res.status}`);
}

async function dryRunPublish(ctx: AttackContext, name: string, archive: Buffer): Promise<void> {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(archive)], { type: 'application/gzip' }), `${name}.tgz`);
  const res = await fetch(`${ctx.url}/api/v1/registry/publishers/attack/packages/${name}/versions?dryRun=true`, { method: 'POST', headers: { Authorization: `Bearer ${ctx.token}` }, body: form });
  const text = await res.text();
  if (res.status >= 500) throw new Error(`publish answered ${res.status}: ${text.slice(0, 200)}`);
}

/** A package whose matrix holds about `triples` short triples (150,000: 0.8 MB compressed, as in the attack). */
function largeArchive(name: string, triples: number): Promise<Buffer> {
  const uri = `https://bench.example/matrix/${name}`;
  const lines = [matrixTurtle(uri, 0), `@prefix d: <${uri}/data/> .`];
  for (let i = 0; i < triples; i++) lines.push(`d:n${i} d:p${i % 50} "${i}" .`);
  return matrixArchive(name, '1.0.0', uri, lines.join('\n'));
}

/** A package whose matrix holds one statement with `depth` nested blank nodes. */
function nestedBlankNodes(name: string, depth: number): Promise<Buffer> {
  const uri = `https://bench.example/matrix/${name}`;
  const turtle = `<${uri}> a <https://poliglot.io/os/spec/matrix#Matrix> ; <http://www.w3.org/2000/01/rdf-schema#label> "Nested" .\n`
    + `<${uri}#x> <${uri}#p> ${'[ <http://p> '.repeat(depth)}"x"${' ]'.repeat(depth)} .\n`;
  return matrixArchive(name, '1.0.0', uri, turtle);
}

/** A process of its own that opens the attack's event streams (bench/stream-opener.ts), started before sampling; `url`: where it connects (the service, or a balancer in front). */
function streamOpener(ctx: AttackContext, url = ctx.url): { open(streamPath: string, count: number): Promise<Record<string, number>>; close(): Promise<void> } {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/stream-opener.ts')], {
    cwd: ROOT, env: { ...process.env, BENCH_URL: url, BENCH_TOKEN: ctx.token }, stdio: ['pipe', 'pipe', 'inherit'],
  });
  const answers = readline.createInterface({ input: child.stdout! });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    open: (streamPath, count) => new Promise((resolve, reject) => {
      answers.once('line', (line) => resolve((JSON.parse(line) as { statuses: Record<string, number> }).statuses));
      child.once('exit', (code) => reject(new Error(`the stream opener exited (${code}) before answering`)));
      child.stdin!.write(`open ${streamPath} ${count}\n`);
    }),
    close: async () => {
      child.stdin!.write('close\n');
      await exited;
    },
  };
}

/**
 * Starts an install of `archive` and has `opener` open `streams` event
 * streams on its command without reading them; resolves once the install
 * finished and the streams are closed. Answers how many streams were
 * refused (429).
 */
async function streamsDuringInstall(ctx: AttackContext, archive: Buffer, streams: number, opener: ReturnType<typeof streamOpener>): Promise<number> {
  const started = performance.now();
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(archive)], { type: 'application/gzip' }), 'streams.tgz');
  const res = await fetch(`${ctx.url}/api/v1/packages/${ctx.slug}/install`, { method: 'POST', headers: { Authorization: `Bearer ${ctx.token}` }, body: form });
  const body = await res.json() as { data?: { id?: string } };
  if (res.status !== 202 || !body.data?.id) throw new Error(`install answered ${res.status}`);
  const commandId = body.data.id;
  try {
    const statuses = await opener.open(`/api/v1/packages/${ctx.slug}/commands/${commandId}/events`, streams);
    await waitForCommand(ctx.url, ctx.token, ctx.slug, commandId, started, 20);
    return statuses['429'] ?? 0;
  } finally {
    await opener.close();
  }
}

const hasHaproxy = (): boolean => existsSync('/usr/sbin/haproxy') || spawnSync('sh', ['-c', 'command -v haproxy']).status === 0;

/** The service's balancer (`npm run balancer`, HAProxy) in front of the service alone, with its defaults. */
function balancerInFront(ctx: AttackContext): { url: string; stop(): void } {
  const dir = workDir('balancer');
  const run = (args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'scripts/balancer.ts'), ...args], {
    cwd: ROOT, encoding: 'utf8', env: { ...process.env, WSM_DATA_DIR: dir, PORT: '', HOST: '127.0.0.1', WSM_BALANCER_CLIENT_CONNECTIONS: '' },
  });
  const started = run(['start', new URL(ctx.url).host]);
  if (started.status !== 0) throw new Error(`the balancer did not start: ${started.stderr}`);
  return { url: started.stdout.trim(), stop: () => { run(['stop']); removeDir(dir); } };
}

export const ATTACKS: Attack[] = [
  {
    name: 'mcp-nested', title: 'MCP sparql tool, queries nested 3,000 and 20,000 deep (5 calls each)',
    prepare: async (ctx) => {
      const queries = [3_000, 20_000].map((depth) => `SELECT * WHERE ${'{'.repeat(depth)} ?s ?p ?o ${'}'.repeat(depth)}`);
      return async () => {
        for (const query of queries) for (let i = 0; i < 5; i++) await mcpCall(ctx, query);
      };
    },
  },
  {
    name: 'publish-large', title: 'dry-run publish of a 150,000-triple matrix (twice)',
    prepare: async (ctx) => {
      const archive = await largeArchive('large', 150_000);
      return async () => { for (let i = 0; i < 2; i++) await dryRunPublish(ctx, 'large', archive); };
    },
  },
  {
    name: 'publish-nested', title: 'dry-run publish of Turtle of 200,000 nested blank nodes (twice)',
    prepare: async (ctx) => {
      const archive = await nestedBlankNodes('nested', 200_000);
      return async () => { for (let i = 0; i < 2; i++) await dryRunPublish(ctx, 'nested', archive); };
    },
  },
  {
    name: 'event-streams', title: '2,000 unread event streams of one member on a 100,000-triple install',
    prepare: async (ctx) => {
      const archive = await largeArchive('streams', 100_000);
      const opener = streamOpener(ctx);
      return async () => {
        const streams = Number(process.env.BENCH_STREAMS ?? 2_000);
        const refused = await streamsDuringInstall(ctx, archive, streams, opener);
        if (refused < streams - 100) throw new Error(`only ${refused} of ${streams} streams were refused: the cap per user did not hold`);
      };
    },
  },
  {
    name: 'event-streams-balanced', title: 'the same 2,000 streams through the balancer (npm run balancer) in front',
    unavailable: () => (hasHaproxy() ? undefined : 'no haproxy: install Debian\'s haproxy package (npm run balancer installs it as root)'),
    prepare: async (ctx) => {
      const archive = await largeArchive('streams-balanced', 100_000);
      const balancer = balancerInFront(ctx);
      const opener = streamOpener(ctx, balancer.url);
      return async () => {
        const streams = Number(process.env.BENCH_STREAMS ?? 2_000);
        try {
          // The install and its polling go to the instance (from this process's address); only the streams go through the balancer.
          const refused = await streamsDuringInstall(ctx, archive, streams, opener);
          if (refused < streams - 100) throw new Error(`only ${refused} of ${streams} streams were refused`);
        } finally {
          balancer.stop();
        }
      };
    },
  },
];

/** Sends /health every INTERVAL_MS until `stop` settles; answers the latencies and the failures. */
async function sample(url: string, stop: Promise<unknown>): Promise<{ health: number[]; errors: number }> {
  const out = { health: [] as number[], errors: 0 };
  const inFlight: Promise<void>[] = [];
  let done = false;
  const finish = () => { done = true; };
  stop.then(finish, finish);
  while (!done) {
    const started = performance.now();
    inFlight.push(fetch(`${url}/health`).then(async (res) => {
      await res.arrayBuffer();
      if (!res.ok) out.errors++;
      out.health.push(performance.now() - started);
    }, () => { out.errors++; }));
    await new Promise((r) => setTimeout(r, INTERVAL_MS));
  }
  await Promise.all(inFlight);
  return out;
}

const stats = (values: number[]) => ({ p50: percentile(values, 50), p99: percentile(values, 99), max: Math.max(...values), n: values.length });

export async function run(): Promise<Figure[]> {
  const opsPort = await freePort();
  const env = await serviceWithWorkspace('bench', undefined, { WSM_OPS_PORT: String(opsPort) });
  const opsUrl = `http://127.0.0.1:${opsPort}`;
  try {
    const { svc, token, slug, root, dataDir } = env;
    const ctx: AttackContext = { url: svc.url, token, slug, root, dataDir };
    const made = await api(svc.url, root, 'POST', '/api/v1/registry/publishers', { slug: 'attack', owners: ['owner'] });
    if (made.status !== 201) throw new Error(`publisher creation answered ${made.status}`);
    // The parse worker and a pipeline worker started before the idle baseline.
    await mcpCall(ctx, 'ASK {}');
    await dryRunPublish(ctx, 'warm', await packageArchive('warm', '1.0.0', 'https://bench.example/matrix/warm', 10));
    const idleOver = new Promise((r) => setTimeout(r, IDLE_MS));
    const [idleApi, idleOps] = (await Promise.all([sample(svc.url, idleOver), sample(opsUrl, idleOver)])).map((s) => stats(s.health));
    const only = (process.env.BENCH_ATTACKS ?? '').split(',').filter(Boolean);
    const figures: Figure[] = [];
    for (const attack of ATTACKS.filter((a) => !only.length || only.includes(a.name))) {
      const missing = attack.unavailable?.();
      if (missing) {
        figures.push(figure({ name: `/health p99 during ${attack.title}`, unit: 'ms', value: Number.NaN, baseline: idleApi.p99, target: '< 100 ms', check: () => false, cause: `not measured: ${missing}` }));
        continue;
      }
      const attackNow = await attack.prepare(ctx);
      const started = performance.now();
      const running = attackNow();
      const [busyApi, busyOps] = await Promise.all([sample(svc.url, running), sample(opsUrl, running)]);
      await running;
      const ms = performance.now() - started;
      for (const [where, busy, idle] of [['the operations port', busyOps, idleOps], ['the API port', busyApi, idleApi]] as const) {
        const b = stats(busy.health);
        figures.push(figure({
          name: `/health p99 on ${where} during ${attack.title} (${b.n} samples over ${(ms / 1000).toFixed(1)} s; p50 ${b.p50.toFixed(1)} ms, max ${b.max.toFixed(0)} ms)`,
          unit: 'ms', value: b.p99, baseline: idle.p99, target: '< 100 ms', check: (_r, v) => v < 100,
          note: `${busy.errors} failed samples; baseline: idle p99 on that port (max ${idle.max.toFixed(0)} ms)`,
          cause: idle.p99 >= 100 ? 'the idle service misses it too: the machine answers a 10 ms timer late' : 'the attack held the event loop',
        }));
      }
    }
    return figures;
  } finally {
    await env.close();
  }
}

// `npx tsx bench/figures/health-attacks.ts`: this figure alone, printed.
if (import.meta.url === `file://${process.argv[1]}`) {
  run().then((figures) => {
    for (const f of figures) process.stdout.write(`${f.name}: ${f.value.toFixed(1)} ${f.unit} (idle ${f.baseline.toFixed(1)}) ${f.met ? 'met' : `missed: ${f.cause ?? ''}`}; ${f.note ?? ''}\n`);
  }, (err: unknown) => { process.stderr.write(`${String(err)}\n`); process.exitCode = 1; });
}
