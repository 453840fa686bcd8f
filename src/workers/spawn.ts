import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker, type ResourceLimits } from 'node:worker_threads';

/** The ES module entry of `tsx/esm/api`, from tsx's own exports map. */
function tsxEsmApi(from: string): string {
  const manifestPath = createRequire(from).resolve('tsx/package.json');
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { exports: Record<string, { import: { default: string } }> };
  return pathToFileURL(path.join(path.dirname(manifestPath), manifest.exports['./esm/api']!.import.default)).href;
}

/**
 * Starts a worker thread on a module given as its `.ts` URL. Run from
 * TypeScript sources (tsx), the worker registers tsx's loader first (loader
 * hooks of the main thread do not reach worker threads); run from compiled
 * JavaScript, it starts the `.js` file beside it.
 */
export function spawnModuleWorker(tsModule: URL, resourceLimits?: ResourceLimits, workerData?: unknown): Worker {
  const options = { ...(resourceLimits ? { resourceLimits } : {}), ...(workerData !== undefined ? { workerData } : {}) };
  if (import.meta.url.endsWith('.ts')) {
    const target = JSON.stringify(tsModule.href);
    // Resolved here, so the worker finds tsx whatever the working directory.
    // (`import.meta.resolve` is missing when tsx loaded this module as CommonJS.)
    const tsx = JSON.stringify(typeof import.meta.resolve === 'function' ? import.meta.resolve('tsx/esm/api') : tsxEsmApi(import.meta.url));
    const code = `import(${tsx}).then((tsx) => { tsx.register(); return import(${target}); })`;
    return new Worker(code, { eval: true, ...options });
  }
  return new Worker(new URL(tsModule.href.replace(/\.ts$/, '.js')), options);
}
