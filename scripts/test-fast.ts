/**
 * `npm run test:fast [-- <area>]`: the loop to work in. Runs the store
 * contract suite, the unit suites and the integration files of one area
 * (default `iam`), without the type checks and lint `npm test` runs first.
 * `npm test` stays the whole suite CI runs.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The integration files of each area, by the start of their names. */
const AREAS: Record<string, readonly string[]> = {
  iam: ['iam', 'users', 'workspaces', 'auth', 'api-keys', 'security-access'],
  packages: ['packages-', 'registry-', 'publish', 'events-stream', 'report-large', 'refused-iri'],
  slash: ['slash-', 'sparql-endpoint', 'mcp', 'query-parse-limits'],
  sandbox: ['sandbox-'],
  extensions: ['extensions'],
  store: ['store-', 'races', 'crash'],
  http: ['routing', 'openapi', 'json-answers', 'status-case', 'operators'],
  console: ['console'],
};

const area = process.argv[2] ?? 'iam';
const prefixes = AREAS[area];
if (!prefixes) {
  console.error(`Unknown area "${area}"; one of: ${Object.keys(AREAS).join(', ')}`);
  process.exit(2);
}

const files = (dir: string, keep: (name: string) => boolean): string[] =>
  readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.test.ts') && keep(name))
    .sort()
    .map((name) => path.join(dir, name));

const selected = [
  ...files('test/store', (name) => name.startsWith('contract-')),
  ...files('test/unit', () => true),
  ...files('test/integration', (name) => prefixes.some((p) => name.startsWith(p))),
];
console.log(`test:fast (${area}): ${selected.length} files`);
const mocha = path.join(root, 'node_modules', 'mocha', 'bin', 'mocha.js');
const run = spawnSync(process.execPath, [mocha, ...selected], { cwd: root, stdio: 'inherit' });
process.exit(run.status ?? 1);
