import { readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { ROOT, figure, installPackage, load, mintToken, removeDir, rssOf, serviceWithWorkspace, startService, workDir, type Figure, type LoadResult } from '../lib.js';
import { growMatrixGraph, packageArchive } from '../data.js';

const MiB = 2 ** 20;

/** Runs `fn` while sampling `pid`'s RSS every 25 ms; its result, the time it took and the peak RSS. */
async function sampled<T>(pid: number, fn: () => Promise<T>): Promise<{ value: T; ms: number; peak: number }> {
  let peak = rssOf(pid);
  const timer = setInterval(() => { peak = Math.max(peak, rssOf(pid)); }, 25);
  const started = performance.now();
  try {
    const value = await fn();
    return { value, ms: performance.now() - started, peak: Math.max(peak, rssOf(pid)) };
  } finally {
    clearInterval(timer);
  }
}

/** `wsm backup` of `dataDir` into `into`, in a process of its own. */
function backupInto(dataDir: string, into: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/cli.ts'), 'backup', into], {
      cwd: ROOT, env: { ...process.env, WSM_DATA_DIR: dataDir }, stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`wsm backup exited with ${code}: ${err}`))));
  });
}

/**
 * Export and import of a workspace of `BENCH_TRANSFER_QUADS` (1M) quads with
 * the service's real IRI shapes: quads per second and the service's peak
 * RSS against its RSS at rest; and the p99 of a C5 load (8 connections)
 * while `wsm backup` copies the store, against windows without a backup.
 */
export async function run(): Promise<Figure[]> {
  const quads = Number(process.env.BENCH_TRANSFER_QUADS ?? 1_000_000);
  const env = await serviceWithWorkspace();
  const figures: Figure[] = [];
  const scratch = workDir('transfer');
  let svc: Awaited<ReturnType<typeof startService>> | undefined;
  let target: Awaited<ReturnType<typeof startService>> | undefined;
  try {
    const { token, slug, dataDir } = env;
    await installPackage(env.svc.url, token, slug, await packageArchive('transfer', '1.0.0', 'https://bench.example/matrix/transfer', 10));
    await env.svc.stop();
    await growMatrixGraph(dataDir, quads);

    svc = await startService(dataDir, { WSM_DEMO: 'false' });
    await new Promise((r) => setTimeout(r, 1000));
    const atRest = svc.rss();
    const exported = await sampled(svc.proc.pid!, async () => {
      const res = await fetch(`${svc!.url}/api/v1/workspaces/${slug}/export`, { headers: { Authorization: `Bearer ${token}`, Accept: 'application/n-quads' } });
      if (res.status !== 200) throw new Error(`export answered ${res.status}`);
      return await res.text();
    });
    const exportedQuads = exported.value.split('\n').length - 1;
    figures.push(figure({
      name: `export of ${exportedQuads.toLocaleString('en')} quads (N-Quads), peak RSS`, unit: 'MiB', value: exported.peak / MiB, baseline: atRest / MiB,
      target: 'report (bounded: streamed graph by graph)', check: () => true,
      note: `${Math.round(exportedQuads / (exported.ms / 1000)).toLocaleString('en')} quads/s (${(exported.ms / 1000).toFixed(1)} s); baseline: the service's RSS at rest`,
    }));
    const file = path.join(scratch, 'export.nq');
    writeFileSync(file, exported.value);

    const importDir = workDir('transfer-import');
    target = await startService(importDir, { WSM_DEMO: 'false' });
    await new Promise((r) => setTimeout(r, 1000));
    const emptyRss = target.rss();
    const root = await mintToken(importDir, 'root', true);
    const imported = await sampled(target.proc.pid!, async () => {
      const res = await fetch(`${target!.url}/api/v1/workspaces/import`, {
        method: 'POST', headers: { Authorization: `Bearer ${root}`, 'Content-Type': 'application/n-quads' }, body: exported.value,
      });
      if (res.status !== 201) throw new Error(`import answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
    });
    figures.push(figure({
      name: `import of ${exportedQuads.toLocaleString('en')} quads (N-Quads), peak RSS`, unit: 'MiB', value: imported.peak / MiB, baseline: emptyRss / MiB,
      target: 'report', check: () => true,
      note: `${Math.round(exportedQuads / (imported.ms / 1000)).toLocaleString('en')} quads/s (${(imported.ms / 1000).toFixed(1)} s, parsed in a worker); baseline: the empty service's RSS`,
    }));
    await target.stop();
    target = undefined;
    removeDir(importDir);

    // C5 windows with and without a backup running beside them.
    const uniqueBody = JSON.stringify({ alias: 'bk-{{n}}', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o } LIMIT 1' });
    const c5 = (): Promise<LoadResult> => load({
      url: `${svc!.url}/api/v1/commands/${slug}`, connections: 8, duration: 4, method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, uniqueBody,
    });
    const quiet: number[] = [];
    const during: number[] = [];
    let backupMs = 0;
    let backupBytes = 0;
    for (let pair = 0; pair < 3; pair++) {
      quiet.push((await c5()).p99);
      const into = path.join(scratch, `backup-${pair}`);
      const started = performance.now();
      const [loadResult] = await Promise.all([c5(), (async () => {
        await new Promise((r) => setTimeout(r, 500));
        await backupInto(dataDir, into);
        backupMs = performance.now() - started - 500;
      })()]);
      during.push(loadResult.p99);
      backupBytes = readdirSync(into).reduce((sum, f) => sum + statSync(path.join(into, f)).size, 0);
    }
    const mid = (xs: number[]) => [...xs].sort((a, b) => a - b)[1]!;
    figures.push(figure({
      name: 'C5 p99 at 8 connections while `wsm backup` copies the store', unit: 'ms', value: mid(during), baseline: mid(quiet),
      ratios: during.map((d, i) => d / quiet[i]!), target: 'report', check: () => true,
      note: `backup of ${(backupBytes / MiB).toFixed(0)} MiB in ${(backupMs / 1000).toFixed(1)} s, started 0.5 s into a 4 s window; baseline: C5 windows without a backup, interleaved`,
    }));
    return figures;
  } finally {
    await target?.stop();
    await svc?.stop();
    await env.close();
    removeDir(scratch);
  }
}
