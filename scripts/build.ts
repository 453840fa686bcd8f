/**
 * `npm run build`: compiles the service's TypeScript (`src/`) to JavaScript
 * in `dist/`, one file per module in the same tree, which `npm start` runs
 * with plain node (docs/decisions.md, "Start from compiled JavaScript").
 *
 * - esbuild transpiles each file on its own (no bundling, no type check:
 *   `npm test` type-checks). The sources are written for that
 *   (`isolatedModules`), and their `.js` import specifiers already name the
 *   compiled files.
 * - `dist/` sits beside `src/` at the same depth, so paths a module resolves
 *   from its own URL (`../../shapes`, `../../console`) and the worker modules
 *   started beside it (`./worker.js`) resolve the same from either tree.
 * - Source maps are linked, so stack traces (node --enable-source-maps) name
 *   the TypeScript lines.
 * - Several `npm start` may run at once on one checkout (instances on a
 *   remote engine, README): a file is written only when its content
 *   changed, and then to a temporary name renamed over it, so a process
 *   loading `dist/` meanwhile reads the old file or the new one, never a
 *   part. Files no module compiles to any more are removed, and so are
 *   temporary files of builds that died.
 */
import { mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Every file under `dir` whose name passes `keep`. */
function files(dir: string, keep: (name: string) => boolean): string[] {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return files(full, keep);
    return keep(entry.name) ? [full] : [];
  });
}

function sameContent(file: string, contents: Uint8Array): boolean {
  try {
    return Buffer.from(contents).equals(readFileSync(file));
  } catch {
    return false;
  }
}

/** Compiles `src/` into `outDir`; answers how many files were written (0 when `dist/` was up to date). */
export async function buildService(outDir = path.join(root, 'dist')): Promise<{ modules: number; written: number }> {
  const src = path.join(root, 'src');
  const entryPoints = files(src, (name) => name.endsWith('.ts') && !name.endsWith('.d.ts'));
  const result = await build({
    entryPoints,
    outbase: src,
    outdir: outDir,
    bundle: false,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    sourcemap: 'linked',
    logLevel: 'warning',
    write: false,
  });
  let written = 0;
  const outputs = new Set<string>();
  for (const out of result.outputFiles) {
    outputs.add(out.path);
    if (sameContent(out.path, out.contents)) continue;
    mkdirSync(path.dirname(out.path), { recursive: true });
    const temporary = `${out.path}.tmp-${process.pid}`;
    writeFileSync(temporary, out.contents);
    renameSync(temporary, out.path);
    written++;
  }
  for (const file of files(outDir, () => true)) {
    const temporary = TEMPORARY.exec(file);
    // A running build's temporary file is its own to rename; one left by a build that died is removed.
    if (temporary ? !alive(Number(temporary[1])) : !outputs.has(file)) rmSync(file, { force: true });
  }
  return { modules: entryPoints.length, written };
}

const TEMPORARY = /\.tmp-(\d+)$/;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await buildService();
}
