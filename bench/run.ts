/**
 * `npm run bench`: measures the service as a user feels it, each figure
 * beside a baseline measured in the same run, and writes bench/RESULTS.md.
 * `npm run bench -- reads writes` runs only the named figures;
 * `--no-write` prints the tables without touching bench/RESULTS.md.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, type Figure } from './lib.js';

/** optIn: left out of a run that names no figure (the remote figure needs Virtuoso and half an hour). */
type Bench = { name: string; title: string; optIn?: boolean; run: () => Promise<Figure[]> };

/** How each figure is measured, written above its table. */
const HOW: Record<string, string> = {
  'reads': "autocannon (its own process) at 32 connections for P5 of a registry-installed package, P5 of an uploaded one and I6, against an Express handler answering the same bytes; service and baseline windows interleave in at least 3 pairs, the ratio is the median of the pairs.",
  'writes': "C5 (a journaled, fdatasynced write) at 1 and 32 connections against an Express handler appending the same body with group-committed fdatasync; windows interleave in pairs.",
  'reads-writers': "P5 at 32 connections while 16 other connections each create a slash command 10 times a second; the baseline runs the same two loads against the static handler and the group-committing append.",
  'install': "One 100,000-triple matrix installed through the API (mean of 3) against the same steps done bare in process: tar read, Turtle parse, SHACL validation, Oxigraph load, the N-Triples appended to a journal and fdatasynced.",
  'startup': "Start of a data directory holding 1M quads of the service's shapes in a snapshot plus 10,000 journal records, until it answers, against a bare Oxigraph load of the same snapshot file; the two interleave.",
  'journal-startup': "Start with a journal just below the automatic snapshot threshold (conditional creations as C5 journals them) against the same content right after a snapshot.",
  'growth': "Start-up time and RSS by store size (`WSM_BENCH_GROWTH`), each beside a bare Oxigraph load of the same snapshot; the service must create and read back a workspace through the API.",
  'lists': "P4 and I5 page 1, p50 latency, with 10,000 packages and 10,000 members grown through the API, against the same with 10.",
  'slash': "Slash command execution through the API (default JSON-LD answer and N-Triples) on results of 20,000 and 99,000 triples, against the same CONSTRUCT on Oxigraph in process; windows interleave in pairs.",
  'slash-users': "C1, C4 and an execution with 6,000 users in another workspace, against the same with 3 users.",
  'slash-large': "Five executions at once on a workspace grown to `BENCH_LARGE_QUADS` (1M) quads, on a freshly started service (its graph in the snapshot, or replayed from the journal), while `/health` is sampled every 20 ms; RSS after.",
  'installs-loop': "`/health` and a cached P5 sent every 20 ms (without waiting for answers) while the service installs a 15,000-role package and then a 100,000-triple matrix; the same sampling on the idle service is the baseline.",
  'mixed': "64 connections each cycling through P5, C5, a slash execution and a workspace read while a 100,000-triple matrix installs; the baseline is the same load without the install. Target: no error, p99 under 1 s.",
  'remote': "On Virtuoso (`npm run virtuoso`): the reads, writes, install and slash figures beside the same on the embedded store in the same run; then a 10M-quad store (`WSM_BENCH_REMOTE_QUADS`, bulk-loaded) with start-up, RSS, P5 and slash execution beside the engine answering the same queries bare. Only when named: `npm run bench -- remote`.",
  'cluster': "On the cluster store (`npm run postgres`, or `WSM_BENCH_POSTGRES_URL`): the reads (P5, I6) and C5 at 32 connections on a cluster instance and an embedded one running side by side, windows interleaved, and the install figure beside the same on the embedded store in the same run; C5 at 32 connections against a bare PostgreSQL insert; records per second a new replica catches up; with residency, an instance's start over many workspaces (time to /health, RSS; `WSM_BENCH_CLUSTER_START_QUADS`, `WSM_BENCH_CLUSTER_START_WORKSPACES`) and a fresh instance's first answer in a workspace of `WSM_BENCH_CLUSTER_FIRST_QUADS` beside the embedded store's on the same data (`WSM_BENCH_CLUSTER_PARTS=start` for these alone); data spread over three instances with residency and placement (`WSM_BENCH_CLUSTER_SPREAD_QUADS` over `WSM_BENCH_CLUSTER_SPREAD_WORKSPACES`, each workspace loaded on the instance a hash of its slug routes it to): the largest instance's RSS against one embedded instance holding all the data, and P5 at 32 connections on a workspace's owner against the embedded instance, windows interleaved (`WSM_BENCH_CLUSTER_PARTS=spread`, or `npx tsx bench/cluster-spread.ts` printing the figures). Only when named: `npm run bench -- cluster`.",
  'transfer': "Export and import of a 1M-quad workspace through the API (quads per second, peak RSS), and C5's p99 while `wsm backup` runs.",
  'memory': "RSS of the service holding 1M quads after queries ran, query workers counted, against a bare Oxigraph store holding the same quads.",
};

const benches: Bench[] = [
  { name: 'reads', title: 'Reads (P5, I6) at 32 connections', run: async () => (await import('./figures/reads.js')).run() },
  { name: 'writes', title: 'Durable writes (C5)', run: async () => (await import('./figures/writes.js')).run() },
  { name: 'reads-writers', title: 'Reads with writers beside them (P5 and C5)', run: async () => (await import('./figures/reads-writers.js')).run() },
  { name: 'install', title: 'Install of a 100,000-triple matrix', run: async () => (await import('./figures/install.js')).run() },
  { name: 'startup', title: 'Start-up with 1M quads + 10,000 journal records', run: async () => (await import('./figures/startup.js')).run() },
  { name: 'journal-startup', title: 'Start-up with a journal just below the snapshot threshold', run: async () => (await import('./figures/journal-startup.js')).run() },
  { name: 'growth', title: 'Growth: start-up and memory by store size (WSM_BENCH_GROWTH)', run: async () => (await import('./figures/growth.js')).run() },
  { name: 'lists', title: 'Scale of lists (P4, I5)', run: async () => (await import('./figures/lists.js')).run() },
  { name: 'slash', title: 'Slash-command execution', run: async () => (await import('./figures/slash.js')).run() },
  { name: 'slash-users', title: 'Slash commands with 6,000 users elsewhere (C1, C4, execute)', run: async () => (await import('./figures/slash-users.js')).run() },
  { name: 'slash-large', title: 'Slash commands on a large workspace (1M quads; BENCH_LARGE_QUADS)', run: async () => (await import('./figures/slash-large.js')).run() },
  { name: 'installs-loop', title: 'Event loop during installs', run: async () => (await import('./figures/installs-loop.js')).run() },
  { name: 'health-attacks', title: '/health during attacks (MCP sparql nesting, large publishes)', run: async () => (await import('./figures/health-attacks.js')).run() },
  { name: 'mixed', title: 'Mixed load at 64 connections during an install', run: async () => (await import('./figures/mixed.js')).run() },
  { name: 'remote', title: 'Remote store (Virtuoso): beside embedded, and a 10M-quad store (WSM_BENCH_REMOTE_QUADS)', optIn: true, run: async () => (await import('./figures/remote.js')).run() },
  { name: 'cluster', title: 'Cluster store (PostgreSQL): beside embedded, C5 against PostgreSQL, catch-up', optIn: true, run: async () => (await import('./figures/cluster.js')).run() },
  { name: 'memory', title: 'Memory with 1M quads', run: async () => (await import('./figures/memory.js')).run() },
  { name: 'transfer', title: 'Export, import and backup of a 1M-quad workspace', run: async () => (await import('./figures/transfer.js')).run() },
];

const fmt = (n: number) => (Number.isFinite(n) ? (Math.abs(n) >= 100 ? n.toFixed(0) : n.toFixed(2)) : String(n));

/** Where the section titled `title` starts and ends in RESULTS.md's text (its end: the next section or the text's). */
function sectionAt(text: string, title: string): { start: number; end: number } | null {
  const start = text.indexOf(`## ${title}\n`);
  if (start === -1) return null;
  const next = text.indexOf('\n## ', start + 1);
  return { start, end: next === -1 ? text.length : next };
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const write = !args.includes('--no-write');
  const wanted = args.filter((a) => !a.startsWith('--'));
  const unknown = wanted.filter((w) => !benches.some((b) => b.name === w));
  if (unknown.length) throw new Error(`unknown figure(s) ${unknown.join(', ')}; known: ${benches.map((b) => b.name).join(', ')}`);
  const selected = wanted.length ? benches.filter((b) => wanted.includes(b.name)) : benches.filter((b) => !b.optIn);
  const sections: string[] = [];
  let failures = 0;
  for (const bench of selected) {
    process.stdout.write(`\n## ${bench.title}\n`);
    let rows: string[];
    try {
      const figures = await bench.run();
      rows = figures.map((f) => {
        const spread = f.spread ? `${fmt(f.spread[0])}-${fmt(f.spread[1])}x (${f.pairs} pairs)` : '';
        const verdict = f.met ? 'met' : `**missed**: ${f.cause ?? 'cause not analysed'}`;
        return `| ${f.name} | ${fmt(f.value)} ${f.unit} | ${fmt(f.baseline)} ${f.unit} | ${fmt(f.ratio)}x | ${spread} | ${f.target} | ${verdict.replace(/\|/g, '/')} | ${f.note ?? ''} |`;
      });
    } catch (err) {
      failures++;
      console.error(err);
      const e = err as Error & { cause?: { message?: string; code?: string } };
      const why = e.cause ? `${e.message} (${e.cause.code ?? e.cause.message ?? 'no detail'})` : e.message;
      rows = [`| (not measured) | | | | | | | **missed**: ${why.replace(/\|/g, '/')} | |`];
    }
    const table = ['| figure | service | baseline | ratio (median) | spread | target | | note |', '|---|---|---|---|---|---|---|---|', ...rows].join('\n');
    process.stdout.write(`${table}\n`);
    sections.push(`## ${bench.title}\n\nHow measured: ${HOW[bench.name] ?? 'see the figure\'s module in bench/figures/'}\n\n${table}\n`);
  }
  const cpus = os.cpus();
  const header = `# Benchmark results

Generated by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)}.
Node ${process.version}, ${os.platform()} ${os.arch()}, ${cpus.length} x ${cpus[0]?.model ?? 'cpu'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB RAM.
Each figure is measured beside its baseline in the same run; the ratio is service / baseline. Where a
spread is given, service and baseline windows were interleaved in pairs (alternating which goes first)
and the ratio is the median of the pairs' ratios, the spread their range. Load generators (autocannon)
run in a process of their own; the service runs with its defaults (log level info, hosted registry).
`;
  const file = path.join(ROOT, 'bench/RESULTS.md');
  process.exitCode = failures ? 1 : 0;
  if (!write) return;
  if (wanted.length === 0 || !existsSync(file)) {
    // A whole run keeps the last measured sections of the opt-in figures it did not run.
    const old = existsSync(file) ? readFileSync(file, 'utf8') : '';
    const kept = benches
      .filter((b) => b.optIn)
      .map((b) => sectionAt(old, b.title))
      .filter((at) => at !== null)
      .map(({ start, end }) => `${old.slice(start, end).trimEnd()}\n`);
    writeFileSync(file, `${header}\n${[...sections, ...kept].join('\n')}`);
  } else {
    // A partial run replaces only its own sections (each figure still has its baseline from the same run).
    let text = readFileSync(file, 'utf8');
    for (const [i, bench] of selected.entries()) {
      const at = sectionAt(text, bench.title);
      const section = `${sections[i]!.trimEnd()}\n_Re-measured alone on ${new Date().toISOString().slice(0, 10)}._\n`;
      text = at === null ? `${text.trimEnd()}\n\n${section}` : `${text.slice(0, at.start)}${section}${text.slice(at.end)}`;
    }
    writeFileSync(file, text);
  }
}

await main();
// Every figure has stopped its services and written its rows: exit even if a handle is left open (the
// slash-large runs at 1M quads stayed alive after printing, holding 1.1 GB and some CPU, beside the next runs).
process.exit();
