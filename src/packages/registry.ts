import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { AppError, badRequest, conflict, notFound } from '../errors.js';
import { DEFAULT_ARCHIVE_LIMITS, readPackageArchive } from './archive.js';
import { engineAdmits, parseEngineRange } from './engine-range.js';
import { SLUG, type Manifest } from './manifest.js';
import { compareSemver, isSemver, parseSemver } from './semver.js';

/**
 * Package registries (docs/packages.md, "Registries"): a directory holding
 * `<publisher>/<name>/<version>.tgz`, or an HTTP registry answering
 * `GET {base}/api/v1/registry/packages/{publisher}/{name}` and
 * `GET {base}/api/v1/registry/packages/{publisher}/{name}/{version}/archive`.
 */
export interface RegistryVersion {
  version: string;
  engineVersion: string;
  publishedAt: string | null;
  /** A yanked version is never chosen as the newest, but installs when named (docs/packages.md). */
  yanked?: boolean;
  /** The version's manifest dependencies, when the registry says (null: unknown until the archive is read). */
  dependencies?: Dependency[] | null;
}

export type Dependency = Manifest['dependencies'][number];

export interface Registry {
  /** The directory or base URL, as configured. */
  readonly location: string;
  /** Every version of a package, oldest first. NOT_FOUND when the publisher or package is unknown. */
  versions(publisher: string, name: string): Promise<RegistryVersion[]>;
  /**
   * What `versions` would answer, when the registry keeps a current answer
   * it can give at once (the hosted registry on the embedded store); shared
   * and frozen. Undefined when it would have to ask.
   */
  keptVersions?(publisher: string, name: string): readonly RegistryVersion[] | undefined;
  /** The archive of one version. NOT_FOUND when unknown; an HTTP registry's checksum is verified. `signal` stops a download under way (an HTTP registry's). */
  download(publisher: string, name: string, version: string, signal?: AbortSignal): Promise<Buffer>;
}

const isSlug = (s: string) => typeof s === 'string' && s.length <= 64 && SLUG.test(s);
const byVersion = (a: RegistryVersion, b: RegistryVersion) => compareSemver(a.version, b.version);
const unavailable = (message: string) => new AppError('SERVICE_UNAVAILABLE', message);

function checkCoordinates(publisher: string, name: string, version?: string): void {
  if (!isSlug(publisher)) throw notFound(`Publisher "${publisher}" is not in the registry`);
  if (!isSlug(name)) throw notFound(`Package "${publisher}/${name}" is not in the registry`);
  if (version !== undefined && !isSemver(version)) throw notFound(`Version "${version}" of "${publisher}/${name}" is not in the registry`);
}

/** A directory registry: `<dir>/<publisher>/<name>/<version>.tgz`, publishedAt = the file's mtime. */
class DirectoryRegistry implements Registry {
  readonly location: string;
  /** Engine range per archive file, kept while the file is unchanged. */
  private readonly engineOf = new Map<string, { mtimeMs: number; size: number; engineVersion: string | null; dependencies: Dependency[] }>();

  constructor(location: string) {
    this.location = location;
  }

  private async engineVersion(file: string, mtimeMs: number, size: number, version: string, name: string): Promise<{ engineVersion: string | null; dependencies: Dependency[] }> {
    const cached = this.engineOf.get(file);
    if (cached && cached.mtimeMs === mtimeMs && cached.size === size) return cached;
    let engineVersion: string | null = null;
    let dependencies: Dependency[] = [];
    try {
      const { manifest } = await readPackageArchive(await readFile(file));
      // An archive whose manifest disagrees with its place is not offered.
      if (manifest.version === version && manifest.name === name) ({ engineVersion, dependencies } = manifest);
    } catch {
      engineVersion = null;
    }
    const entry = { mtimeMs, size, engineVersion, dependencies };
    this.engineOf.set(file, entry);
    return entry;
  }

  async versions(publisher: string, name: string): Promise<RegistryVersion[]> {
    checkCoordinates(publisher, name);
    const publisherDir = path.join(this.location, publisher);
    if (!(await stat(publisherDir).catch(() => null))?.isDirectory()) throw notFound(`Publisher "${publisher}" is not in the registry`);
    const packageDir = path.join(publisherDir, name);
    const files = await readdir(packageDir).catch(() => null);
    if (!files) throw notFound(`Package "${publisher}/${name}" is not in the registry`);
    const out: RegistryVersion[] = [];
    for (const file of files) {
      if (!file.endsWith('.tgz')) continue;
      const version = file.slice(0, -'.tgz'.length);
      if (!isSemver(version)) continue;
      const full = path.join(packageDir, file);
      const info = await stat(full).catch(() => null);
      if (!info?.isFile()) continue;
      const { engineVersion, dependencies } = await this.engineVersion(full, info.mtimeMs, info.size, version, name);
      if (engineVersion === null) continue;
      out.push({ version, engineVersion, publishedAt: info.mtime.toISOString(), yanked: false, dependencies });
    }
    if (out.length === 0) throw notFound(`Package "${publisher}/${name}" is not in the registry`);
    return out.sort(byVersion);
  }

  async download(publisher: string, name: string, version: string): Promise<Buffer> {
    checkCoordinates(publisher, name, version);
    const file = path.join(this.location, publisher, name, `${version}.tgz`);
    try {
      return await readFile(file);
    } catch {
      await this.versions(publisher, name); // 404 naming the publisher or package when those are unknown
      throw notFound(`Version ${version} of "${publisher}/${name}" is not in the registry`);
    }
  }
}

const versionsResponse = z.object({
  versions: z.array(z.object({
    version: z.string(),
    engineVersion: z.string(),
    publishedAt: z.string().nullish(),
    yanked: z.boolean().nullish(),
    dependencies: z.array(z.object({ publisher: z.string(), name: z.string(), versionRange: z.string() })).nullish(),
  })),
});

const HTTP_TIMEOUT_MS = 30_000;

/** An HTTP registry; archives are checked against their X-Archive-Checksum header. */
class HttpRegistry implements Registry {
  readonly location: string;
  private readonly base: string;

  constructor(location: string) {
    this.location = location;
    this.base = location.replace(/\/+$/, '');
  }

  private url(...segments: string[]): string {
    return `${this.base}/api/v1/registry/packages/${segments.map(encodeURIComponent).join('/')}`;
  }

  private async get(url: string, what: string, signal?: AbortSignal): Promise<Response> {
    let res: Response;
    try {
      const timeout = AbortSignal.timeout(HTTP_TIMEOUT_MS);
      res = await fetch(url, { signal: signal ? AbortSignal.any([timeout, signal]) : timeout, redirect: 'follow' });
    } catch (err) {
      signal?.throwIfAborted();
      throw unavailable(`The package registry could not be reached (${err instanceof Error ? err.message : String(err)})`);
    }
    if (res.status === 404) {
      await res.body?.cancel();
      throw notFound(`${what} is not in the registry`);
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw unavailable(`The package registry answered ${res.status} for ${what}`);
    }
    return res;
  }

  async versions(publisher: string, name: string): Promise<RegistryVersion[]> {
    checkCoordinates(publisher, name);
    const res = await this.get(this.url(publisher, name), `Package "${publisher}/${name}"`);
    const text = await readLimited(res, 1024 * 1024, 'The registry\'s list of versions');
    let body: unknown;
    try {
      body = JSON.parse(text.toString('utf8'));
    } catch {
      throw unavailable('The package registry answered a list of versions that is not JSON');
    }
    // Accept the bare shape and the service's own response envelope around it.
    const parsed = versionsResponse.safeParse(body);
    const enveloped = parsed.success ? parsed : versionsResponse.safeParse((body as { data?: unknown } | null)?.data);
    if (!enveloped.success) throw unavailable('The package registry answered a list of versions of an unexpected shape');
    const out: RegistryVersion[] = [];
    for (const v of enveloped.data.versions) {
      if (!isSemver(v.version)) continue;
      try {
        parseEngineRange(v.engineVersion);
      } catch {
        continue;
      }
      const at = v.publishedAt ? new Date(v.publishedAt) : null;
      out.push({
        version: v.version, engineVersion: v.engineVersion, publishedAt: at && !Number.isNaN(at.getTime()) ? at.toISOString() : null,
        yanked: v.yanked ?? false, dependencies: v.dependencies ?? null,
      });
    }
    if (out.length === 0) throw notFound(`Package "${publisher}/${name}" is not in the registry`);
    return out.sort(byVersion);
  }

  async download(publisher: string, name: string, version: string, signal?: AbortSignal): Promise<Buffer> {
    checkCoordinates(publisher, name, version);
    const what = `Version ${version} of "${publisher}/${name}"`;
    const res = await this.get(this.url(publisher, name, version, 'archive'), what, signal);
    const lower = `version ${version} of "${publisher}/${name}"`;
    const header = res.headers.get('x-archive-checksum');
    const expected = /^sha256:([0-9a-fA-F]{64})$/.exec(header?.trim() ?? '');
    if (!expected) {
      await res.body?.cancel();
      throw unavailable(`The package registry sent ${lower} without a valid X-Archive-Checksum header (sha256:<hex>)`);
    }
    const bytes = await readLimited(res, DEFAULT_ARCHIVE_LIMITS.maxArchiveBytes, `The archive of ${lower}`);
    const actual = createHash('sha256').update(bytes).digest('hex');
    if (actual !== expected[1]!.toLowerCase()) {
      throw unavailable(`The archive of ${lower} does not match its checksum (expected sha256:${expected[1]!.toLowerCase()}, got sha256:${actual})`);
    }
    return bytes;
  }
}

/** Reads a response body, stopping as soon as it passes `limit` bytes. */
async function readLimited(res: Response, limit: number, what: string): Promise<Buffer> {
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > limit) {
    await res.body?.cancel();
    throw badRequest(`${what} is larger than ${limit} bytes, the limit`);
  }
  const chunks: Buffer[] = [];
  let total = 0;
  if (res.body) {
    const reader = res.body.getReader();
    for (;;) {
      let step: ReadableStreamReadResult<Uint8Array>;
      try {
        step = await reader.read();
      } catch (err) {
        throw unavailable(`${what} could not be read from the registry (${err instanceof Error ? err.message : String(err)})`);
      }
      if (step.done) break;
      total += step.value.length;
      if (total > limit) {
        await reader.cancel();
        throw badRequest(`${what} is larger than ${limit} bytes, the limit`);
      }
      chunks.push(Buffer.from(step.value));
    }
  }
  return Buffer.concat(chunks);
}

/** A registry at a directory path or an http(s) base URL. */
export function openRegistry(location: string): Registry {
  if (/^https?:\/\//i.test(location)) {
    try {
      new URL(location);
    } catch {
      throw badRequest(`The registry URL "${location}" is not valid`);
    }
    return new HttpRegistry(location);
  }
  return new DirectoryRegistry(path.resolve(location));
}

/**
 * The newest release compatible with an engine version; pre-releases and
 * yanked versions are never chosen automatically. Null when there is none.
 */
export function newestCompatible(versions: readonly RegistryVersion[], engineVersion: string): RegistryVersion | null {
  let best: RegistryVersion | null = null;
  for (const v of versions) {
    if (v.yanked || parseSemver(v.version)?.prerelease !== null) continue;
    let ok: boolean;
    try {
      ok = engineAdmits(v.engineVersion, engineVersion);
    } catch {
      ok = false;
    }
    if (ok && (!best || compareSemver(v.version, best.version) > 0)) best = v;
  }
  return best;
}

/**
 * The version to install: `requested` when given (404 when the registry does
 * not have it, ENGINE_INCOMPATIBLE when its range excludes the engine), else
 * the newest compatible release (ENGINE_INCOMPATIBLE when there is none).
 */
export function resolveVersion(versions: RegistryVersion[], engineVersion: string, requested?: string): RegistryVersion {
  if (requested !== undefined) {
    const found = versions.find((v) => v.version === requested)
      ?? (isSemver(requested) ? versions.find((v) => compareSemver(v.version, requested) === 0) : undefined);
    if (!found) throw notFound(`Version ${requested} is not in the registry`, { version: requested });
    let ok: boolean;
    try {
      ok = engineAdmits(found.engineVersion, engineVersion);
    } catch {
      ok = false;
    }
    if (!ok) {
      throw new AppError('ENGINE_INCOMPATIBLE',
        `Version ${found.version} requires engine version "${found.engineVersion}"; this workspace's engine version is ${engineVersion}`,
        { version: found.version, engineVersion: found.engineVersion, workspaceEngineVersion: engineVersion });
    }
    return found;
  }
  if (versions.length === 0) throw notFound('The package has no versions in the registry');
  if (versions.every((v) => v.yanked)) {
    throw notFound(`Every version of the package is yanked (${versions.map((v) => v.version).join(', ')}); name one to install it anyway`);
  }
  const newest = newestCompatible(versions, engineVersion);
  if (!newest) {
    const offered = [...versions].sort(byVersion).reverse().slice(0, 5).map((v) => `${v.version} requires "${v.engineVersion}"`).join(', ');
    throw new AppError('ENGINE_INCOMPATIBLE',
      `No release in the registry is compatible with this workspace's engine version ${engineVersion} (${offered})`,
      { workspaceEngineVersion: engineVersion });
  }
  return newest;
}

export interface Published {
  publisher: string;
  name: string;
  version: string;
  path: string;
}

/**
 * Puts checked archive bytes at `<registryDir>/<publisher>/<name>/<version>.tgz`.
 * The same bytes again is a no-op; other bytes for a published version are a
 * CONFLICT unless `replace` (used for the bundled examples).
 */
function checkPublisher(publisher: string): void {
  if (!isSlug(publisher)) throw badRequest(`Publisher "${publisher}" must be a lower-case slug (letters a-z, digits, single hyphens between them)`);
}

export async function publishBytes(registryDir: string, bytes: Buffer, publisher: string, options: { replace?: boolean } = {}): Promise<Published> {
  checkPublisher(publisher);
  const { manifest } = await readPackageArchive(bytes);
  const dir = path.join(path.resolve(registryDir), publisher, manifest.name);
  const target = path.join(dir, `${manifest.version}.tgz`);
  const result = { publisher, name: manifest.name, version: manifest.version, path: target };
  const existing = await readFile(target).catch(() => null);
  if (existing) {
    if (existing.equals(bytes)) return result;
    if (!options.replace) {
      throw conflict(`Version ${manifest.version} of "${publisher}/${manifest.name}" is already published with other content; publish a new version`);
    }
  }
  await mkdir(dir, { recursive: true });
  // Unique per call: two servers of one process (tests) may publish the same version in the same millisecond.
  const temp = path.join(dir, `.${manifest.version}.tgz.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    await writeFile(temp, bytes);
    await rename(temp, target);
  } catch (err) {
    await unlink(temp).catch(() => undefined);
    throw err;
  }
  return result;
}

/** `wsm publish`: checks an archive file and copies it into a directory registry. */
export async function publishToDirectory(registryDir: string, archivePath: string, publisher: string): Promise<Published> {
  checkPublisher(publisher);
  let bytes: Buffer;
  try {
    const info = await stat(archivePath);
    if (!info.isFile()) throw new Error('not a file');
    if (info.size > DEFAULT_ARCHIVE_LIMITS.maxArchiveBytes) {
      throw badRequest(`"${archivePath}" is ${info.size} bytes, over the archive limit of ${DEFAULT_ARCHIVE_LIMITS.maxArchiveBytes} bytes`);
    }
    bytes = await readFile(archivePath);
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw notFound(`Cannot read the archive "${archivePath}"`);
  }
  return publishBytes(registryDir, bytes, publisher);
}
