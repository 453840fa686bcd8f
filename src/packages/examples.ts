import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildPackageArchive } from './build-archive.js';
import { publishBytes } from './registry.js';

/** The example packages shipped with the service, one directory each. */
export const EXAMPLES_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../examples/packages');

/** Directory names of the example packages, sorted. */
export function exampleNames(): string[] {
  let names: string[];
  try {
    names = readdirSync(EXAMPLES_DIR);
  } catch {
    return [];
  }
  return names.filter((n) => !n.startsWith('.') && statSync(path.join(EXAMPLES_DIR, n)).isDirectory()).sort();
}

/**
 * Publishes every example package into a directory registry under
 * `publisher`. Idempotent: an unchanged example is left as it is (its
 * publishedAt too); a changed one replaces the earlier copy.
 */
export async function publishExamples(registryDir: string, publisher = 'examples'): Promise<void> {
  for (const name of exampleNames()) {
    const bytes = await buildPackageArchive(path.join(EXAMPLES_DIR, name));
    await publishBytes(registryDir, bytes, publisher, { replace: true });
  }
}
