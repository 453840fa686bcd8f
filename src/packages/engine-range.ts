import { badRequest } from '../errors.js';
import { parseSemver } from './semver.js';

/**
 * A package's `engineVersion`: at most two space-separated bounds, `>=` and
 * `<` only, each MAJOR or MAJOR.MINOR (docs/packages.md, "Engine ranges"). A missing bound
 * is open. Only the major.minor of an engine version is compared.
 */
export interface EngineRange {
  text: string;
  lower: { major: number; minor: number } | null;
  upper: { major: number; minor: number } | null;
}

type MajorMinor = { major: number; minor: number };

const BOUND = /^(>=|<)(0|[1-9]\d{0,8})(?:\.(0|[1-9]\d{0,8}))?$/;
const MAX_RANGE_LENGTH = 100;

function cmp(a: MajorMinor, b: MajorMinor): number {
  return Math.sign(a.major - b.major) || Math.sign(a.minor - b.minor);
}

const show = (v: MajorMinor) => `${v.major}.${v.minor}`;

/** Parses an engine range; throws BAD_REQUEST naming what is wrong with it. */
export function parseEngineRange(text: string): EngineRange {
  if (typeof text !== 'string') throw badRequest('engineVersion must be a string such as ">=1.0 <2.0"');
  if (text.length > MAX_RANGE_LENGTH) throw badRequest(`engineVersion is longer than ${MAX_RANGE_LENGTH} characters`);
  const tokens = text.trim().split(/\s+/).filter((t) => t.length > 0);
  if (tokens.length === 0) throw badRequest('engineVersion is empty: give one or two bounds such as ">=1.0 <2.0"');
  if (tokens.length > 2) throw badRequest(`engineVersion "${text}" has ${tokens.length} bounds; at most two are allowed (one ">=" and one "<")`);
  let lower: MajorMinor | null = null;
  let upper: MajorMinor | null = null;
  for (const token of tokens) {
    const m = BOUND.exec(token);
    if (!m) {
      if (/^(>=|<)\d+\.\d+\.\d+/.test(token)) {
        throw badRequest(`engineVersion "${text}": bound "${token}" has a patch number; use MAJOR or MAJOR.MINOR`);
      }
      if (/^(>|<=|=|~|\^)/.test(token) && !token.startsWith('>=')) {
        throw badRequest(`engineVersion "${text}": bound "${token}" uses an unsupported operator; only ">=" and "<" are allowed`);
      }
      throw badRequest(`engineVersion "${text}": "${token}" is not a bound; write ">=MAJOR[.MINOR]" or "<MAJOR[.MINOR]"`);
    }
    const bound = { major: Number(m[2]), minor: m[3] === undefined ? 0 : Number(m[3]) };
    if (m[1] === '>=') {
      if (lower) throw badRequest(`engineVersion "${text}" has two lower bounds; a two-bound range needs one ">=" and one "<"`);
      lower = bound;
    } else {
      if (upper) throw badRequest(`engineVersion "${text}" has two upper bounds; a two-bound range needs one ">=" and one "<"`);
      upper = bound;
    }
  }
  if (lower && upper && cmp(lower, upper) >= 0) {
    throw badRequest(`engineVersion "${text}" admits no version: the lower bound ${show(lower)} is not below the upper bound ${show(upper)}`);
  }
  return { text: tokens.join(' '), lower, upper };
}

/**
 * Whether an engine of full semver `engineVersion` satisfies `range`
 * (only its major.minor is compared). Throws BAD_REQUEST on a bad range or version.
 */
export function engineAdmits(range: EngineRange | string, engineVersion: string): boolean {
  const r = typeof range === 'string' ? parseEngineRange(range) : range;
  const v = parseSemver(engineVersion);
  if (!v) throw badRequest(`engine version "${engineVersion}" is not a semantic version`);
  if (r.lower && cmp(v, r.lower) < 0) return false;
  if (r.upper && cmp(v, r.upper) >= 0) return false;
  return true;
}

/**
 * Whether two ranges admit a common MAJOR.MINOR (the registry's
 * `engineVersion` filter: a version is kept when its range overlaps the
 * asked one). Throws BAD_REQUEST on a bad range.
 */
export function rangesOverlap(a: EngineRange | string, b: EngineRange | string): boolean {
  const x = typeof a === 'string' ? parseEngineRange(a) : a;
  const y = typeof b === 'string' ? parseEngineRange(b) : b;
  const lowers = [x.lower, y.lower].filter((v): v is MajorMinor => v !== null);
  const uppers = [x.upper, y.upper].filter((v): v is MajorMinor => v !== null);
  if (lowers.length === 0 || uppers.length === 0) return true;
  const lower = lowers.reduce((m, v) => (cmp(v, m) > 0 ? v : m));
  const upper = uppers.reduce((m, v) => (cmp(v, m) < 0 ? v : m));
  return cmp(lower, upper) < 0;
}
