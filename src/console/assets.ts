import path from 'node:path';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { createHash } from 'node:crypto';

/**
 * The web console's files (docs/console.md): `console/` holds the page
 * and its TypeScript and CSS sources; they are bundled with esbuild, with the
 * editor and graph libraries from node_modules, in memory on the first
 * request and kept for the life of the process. Nothing is fetched from
 * elsewhere, and `npm run build` (the service's modules) leaves them alone.
 */
export const CONSOLE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../console');

export interface Asset {
  contentType: string;
  body: Buffer;
  etag: string;
}

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
};

const asset = (name: string, body: Buffer): Asset => ({
  contentType: TYPES[path.extname(name)] ?? 'application/octet-stream',
  body,
  etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
});

async function build(): Promise<Map<string, Asset>> {
  // Loaded here so a server that never serves the console never loads esbuild.
  const esbuild = await import('esbuild');
  const result = await esbuild.build({
    absWorkingDir: CONSOLE_DIR,
    entryPoints: { app: 'src/main.ts', style: 'src/style.css' },
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'browser',
    target: ['es2022'],
    minify: true,
    sourcemap: false,
    write: false,
    outdir: 'out',
    entryNames: '[name]',
    chunkNames: 'chunk-[hash]',
    legalComments: 'none',
    logLevel: 'silent',
  });
  const files = new Map<string, Asset>();
  for (const file of result.outputFiles) files.set(path.basename(file.path), asset(file.path, Buffer.from(file.contents)));
  files.set('index.html', asset('index.html', await readFile(path.join(CONSOLE_DIR, 'index.html'))));
  return files;
}

let built: Promise<Map<string, Asset>> | undefined;

/** The console's files by name (`index.html`, `app.js`, `style.css`, `chunk-*.js`), built once. */
export function consoleAssets(): Promise<Map<string, Asset>> {
  built ??= build().catch((err) => {
    built = undefined; // a later request tries again
    throw err;
  });
  return built;
}
