import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

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
