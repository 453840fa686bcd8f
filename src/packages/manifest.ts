import { z } from 'zod';
import { badRequest } from '../errors.js';
import { parseEngineRange } from './engine-range.js';
import { isSemver } from './semver.js';

/**
 * The package manifest, `manifest.json` at the root of a package archive
 * (docs/packages.md, "manifest.json").
 */
export interface Manifest {
  name: string;
  version: string;
  engineVersion: string;
  description: string | null;
  matrices: Array<{ name: string; path: string; uri: string }>;
  dependencies: Array<{ publisher: string; name: string; versionRange: string }>;
}

/** Lower-case slug: letters, digits and single hyphens between them. */
export const SLUG = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
export const MAX_SLUG_LENGTH = 64;
/** Names that would shadow the routes P1 (`registry`), P2 (`install`) and P8 (`commands`). */
export const RESERVED_PACKAGE_NAMES = ['install', 'registry', 'commands'] as const;
export const MAX_MATRICES = 100;

const MATRIX_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const IRI_SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/;
// Characters RFC 3987 forbids anywhere in an IRI (they would also break N-Triples and SPARQL).
const IRI_FORBIDDEN = /[\u0000-\u0020<>"{}|\\^`\u007f-\u009f]/;

/** zod error option: "X is required" when absent, else "X must be ..." */
const required = (what: string, expected: string) => {
  const prefix = what ? `${what} ` : '';
  return { error: (issue: { input?: unknown }) => (issue.input === undefined ? `${prefix}is required` : `${prefix}must be ${expected}`) };
};

const slug = (what: string) => z.string(required(what, 'a string'))
  .max(MAX_SLUG_LENGTH, `${what} is longer than ${MAX_SLUG_LENGTH} characters`)
  .regex(SLUG, `${what} must be a lower-case slug (letters a-z, digits, single hyphens between them)`);

/** Why `path` is not a safe relative Turtle path inside the archive, or null when it is. */
export function unsafeMatrixPath(path: string): string | null {
  if (path.length === 0) return 'is empty';
  if (path.length > 255) return 'is longer than 255 characters';
  if (/[\u0000-\u001f\u007f]/.test(path)) return 'contains a control character';
  if (path.includes('\\')) return 'contains a backslash; use "/" between folders';
  if (path.startsWith('/') || /^[A-Za-z]:/.test(path)) return 'is absolute; give a path relative to the archive root';
  const segments = path.split('/');
  if (segments.includes('..')) return 'contains ".."';
  if (segments.some((s) => s === '' || s === '.')) return 'has an empty or "." segment';
  if (!path.toLowerCase().endsWith('.ttl')) return 'is not a Turtle file (.ttl)';
  return null;
}

/** Why `uri` is not an absolute IRI, or null when it is. */
export function notAbsoluteIri(uri: string): string | null {
  if (uri.length > 2000) return 'is longer than 2000 characters';
  if (!IRI_SCHEME.test(uri)) return 'is not an absolute IRI (it needs a scheme, such as https:)';
  if (IRI_FORBIDDEN.test(uri)) return 'contains a character not allowed in an IRI (space, <, >, ", {, }, |, \\, ^, ` or a control character)';
  if (/%(?![0-9A-Fa-f]{2})/.test(uri)) return 'contains a "%" that is not followed by two hexadecimal digits (percent-encoding)';
  if (/[\uD800-\uDFFF]/u.test(uri)) return 'contains a lone surrogate (not a Unicode character)';
  if (uri.includes('#') && uri.indexOf('#') !== uri.lastIndexOf('#')) return 'contains more than one "#"';
  return null;
}

const matrixSchema = z.object({
  name: z.string(required('', 'a string'))
    .max(MAX_SLUG_LENGTH, `is longer than ${MAX_SLUG_LENGTH} characters`)
    .regex(MATRIX_NAME, 'must start with a letter or digit and hold only letters, digits, ".", "_" and "-"'),
  path: z.string(required('', 'a string')).superRefine((path, ctx) => {
    const why = unsafeMatrixPath(path);
    if (why) ctx.addIssue({ code: 'custom', message: `"${path}" ${why}` });
  }),
  uri: z.string(required('', 'a string')).superRefine((uri, ctx) => {
    const why = notAbsoluteIri(uri);
    if (why) ctx.addIssue({ code: 'custom', message: `"${uri}" ${why}` });
  }),
}, { error: 'each matrix must be an object {name, path, uri}' });

const dependencySchema = z.object({
  publisher: slug('publisher'),
  name: slug('name'),
  // The engine-range grammar (docs/packages.md, "Engine ranges"): `>=1.0 <2.0` admits every 1.x.y of the dependency.
  versionRange: z.string(required('versionRange', 'a string such as ">=1.0 <2.0"')).superRefine((text, ctx) => {
    try {
      parseEngineRange(text);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: (err as Error).message.replace(/^engineVersion/, 'versionRange') });
    }
  }),
}, { error: 'each dependency must be an object {publisher, name, versionRange}' });

const manifestSchema = z.object({
  name: slug('name').refine((n) => !(RESERVED_PACKAGE_NAMES as readonly string[]).includes(n),
    { message: `name must not be one of ${RESERVED_PACKAGE_NAMES.map((n) => `"${n}"`).join(', ')} (reserved by the API)` }),
  version: z.string(required('version', 'a string such as "1.0.0"'))
    .refine(isSemver, { message: 'version must be a semantic version MAJOR.MINOR.PATCH, such as "1.0.0"' }),
  engineVersion: z.string(required('engineVersion', 'a string such as ">=1.0 <2.0"')).superRefine((text, ctx) => {
    try {
      parseEngineRange(text);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: (err as Error).message });
    }
  }),
  description: z.string({ error: 'description must be a string' }).max(10_000, 'description is longer than 10000 characters').nullish(),
  matrices: z.array(matrixSchema, required('matrices', 'an array of {name, path, uri}'))
    .min(1, 'matrices is empty: a package holds at least one matrix')
    .max(MAX_MATRICES, `a package holds at most ${MAX_MATRICES} matrices`),
  dependencies: z.array(dependencySchema, { error: 'dependencies must be an array of {publisher, name, versionRange}' })
    .max(100, 'a package has at most 100 dependencies').nullish(),
}).superRefine((m, ctx) => {
  const once = (key: 'name' | 'path' | 'uri') => {
    const seen = new Set<string>();
    m.matrices.forEach((matrix, i) => {
      if (seen.has(matrix[key])) {
        ctx.addIssue({ code: 'custom', path: ['matrices', i, key], message: `${key} "${matrix[key]}" is used by more than one matrix` });
      }
      seen.add(matrix[key]);
    });
  };
  once('name');
  once('path');
  once('uri');
});

function describeIssue(issue: z.core.$ZodIssue): string {
  const where = issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('').replace(/^\./, '');
  // Messages of top-level fields already name the field.
  if (issue.path.length === 1 && typeof issue.path[0] === 'string' && issue.message.startsWith(issue.path[0])) return issue.message;
  if (issue.code === 'invalid_type' && issue.message.startsWith('Invalid input')) return `${where || 'manifest'}: missing or of the wrong type`;
  return where ? `${where}: ${issue.message}` : issue.message;
}

/**
 * Checks a parsed `manifest.json`; throws BAD_REQUEST listing every problem
 * (message and `details.problems`).
 */
export function parseManifest(value: unknown): Manifest {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw badRequest('manifest.json must hold a JSON object with name, version, engineVersion and matrices');
  }
  const result = manifestSchema.safeParse(value);
  if (!result.success) {
    const problems = result.error.issues.map(describeIssue);
    throw badRequest(`Invalid manifest.json: ${problems.join('; ')}`, { problems });
  }
  const m = result.data;
  return {
    name: m.name,
    version: m.version,
    engineVersion: parseEngineRange(m.engineVersion).text,
    description: m.description ?? null,
    matrices: m.matrices.map(({ name, path, uri }) => ({ name, path, uri })),
    dependencies: (m.dependencies ?? []).map(({ publisher, name, versionRange }) => ({ publisher, name, versionRange: parseEngineRange(versionRange).text })),
  };
}
