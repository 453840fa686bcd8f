import { badRequest } from '../errors.js';

/**
 * Semantic versions (https://semver.org, 2.0.0) as package versions carry
 * them: MAJOR.MINOR.PATCH with an optional pre-release and build metadata.
 */
export interface Semver {
  major: number;
  minor: number;
  patch: number;
  prerelease: string | null;
}

const NUMBER = '0|[1-9]\\d*';
const PRE_ID = `(?:${NUMBER}|\\d*[a-zA-Z-][0-9a-zA-Z-]*)`;
const SEMVER = new RegExp(
  `^(${NUMBER})\\.(${NUMBER})\\.(${NUMBER})` +
  `(?:-(${PRE_ID}(?:\\.${PRE_ID})*))?` +
  `(?:\\+[0-9a-zA-Z-]+(?:\\.[0-9a-zA-Z-]+)*)?$`,
);

/** Parses a semantic version; null when `text` is not one (no leading `v`, no surrounding space). */
export function parseSemver(text: string): Semver | null {
  if (typeof text !== 'string' || text.length > 256) return null;
  const m = SEMVER.exec(text);
  if (!m) return null;
  const [major, minor, patch] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (![major, minor, patch].every(Number.isSafeInteger)) return null;
  return { major, minor, patch, prerelease: m[4] ?? null };
}

export function isSemver(text: string): boolean {
  return parseSemver(text) !== null;
}

function comparePrerelease(a: string | null, b: string | null): number {
  if (a === b) return 0;
  // A version without pre-release ranks above any pre-release of it (semver 11.3).
  if (a === null) return 1;
  if (b === null) return -1;
  const as = a.split('.');
  const bs = b.split('.');
  for (let i = 0; i < Math.max(as.length, bs.length); i++) {
    const x = as[i];
    const y = bs[i];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    const xn = /^\d+$/.test(x);
    const yn = /^\d+$/.test(y);
    if (xn && yn) {
      const d = Number(x) - Number(y);
      if (d !== 0) return Math.sign(d);
    } else if (xn !== yn) {
      return xn ? -1 : 1; // numeric identifiers rank below alphanumeric ones (11.4.3)
    } else if (x !== y) {
      return x < y ? -1 : 1;
    }
  }
  return 0;
}

/**
 * Orders two semantic versions by precedence: negative, zero or positive.
 * Build metadata is ignored. Throws BAD_REQUEST when either is not a version.
 */
export function compareSemver(a: string, b: string): number {
  const x = parseSemver(a);
  const y = parseSemver(b);
  if (!x) throw badRequest(`"${a}" is not a semantic version (MAJOR.MINOR.PATCH)`);
  if (!y) throw badRequest(`"${b}" is not a semantic version (MAJOR.MINOR.PATCH)`);
  return Math.sign(x.major - y.major) || Math.sign(x.minor - y.minor) || Math.sign(x.patch - y.patch)
    || comparePrerelease(x.prerelease, y.prerelease);
}
