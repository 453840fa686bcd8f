import { createHash } from 'node:crypto';
import type { QuadStore, WriteOp } from '../store/store.js';
import type { ArchiveFiles } from './archives.js';
import type { Graphs } from '../rdf/graphs.js';
import type { Logger } from '../logger.js';
import type { AuthContext } from '../auth/context.js';
import { prefixes } from '../rdf/vocab.js';
import { sparql, sparqlFragment, sequence, iri, literal, dateTime, integer, boolean, raw, join, type SparqlFragment } from '../rdf/sparql.js';
import { newId, stableId } from '../rdf/ids.js';
import { req, str, int, bool, time } from '../rdf/bindings.js';
import { AppError, badRequest, conflict, forbidden, notFound } from '../errors.js';
import { SLUG, MAX_SLUG_LENGTH, notAbsoluteIri, type Manifest } from '../packages/manifest.js';
import { compareSemver, isSemver } from '../packages/semver.js';
import { engineAdmits, parseEngineRange, rangesOverlap } from '../packages/engine-range.js';
import type { Dependency, Registry, RegistryVersion } from '../packages/registry.js';
import { checkForPublish, type CheckedArchive, type PublishContext } from './check.js';
import { NOT_APPLIED, untilApplied } from '../store/conditional.js';
import { sharedPipelinePool, type PipelinePool } from '../packages/pipeline-pool.js';
import { Clock } from '../rdf/clock.js';
import { GraphCache } from '../store/graph-cache.js';
import { readPackageArchive } from '../packages/archive.js';
import { declarationsOfArchive } from '../secrets/archive-declarations.js';
import type { SecretDeclaration, VariableDeclaration } from '../secrets/declarations.js';

/**
 * The registry the service hosts (docs/packages.md, "The hosted registry"): publishers,
 * packages and versions as RDF in the registry graph, archives as files in
 * the data directory named by their SHA-256. It is also a `Registry` the
 * package service installs from when `WSM_REGISTRY=self`.
 */
export interface Publisher { id: string; slug: string; name: string; owners: string[]; createdAt: string }

export interface VersionRecord {
  id: string;
  publisher: { slug: string };
  name: string;
  version: string;
  engineVersion: string;
  description: string | null;
  publishedAt: string;
  publishedBy: string | null;
  yanked: boolean;
  yankReason: string | null;
  dependencies: Dependency[];
  matrices: Array<{ name: string; uri: string }>;
  checksum: string;
  size: number;
}

export interface PackageView {
  publisher: { slug: string };
  name: string;
  description: string | null;
  /** Newest first by publishedAt. */
  versions: VersionRecord[];
}

export interface ZeroPage<T> { items: T[]; page: number; size: number; totalItems: number; totalPages: number }

const RESERVED_PUBLISHERS = ['me'];

/**
 * The `engineVersion` filter of the version lists: a range keeps the versions
 * whose range overlaps it; a full semver (an engine's own version, as a
 * client may send) keeps the versions whose range admits it. 400 otherwise.
 */
function engineFilter(text: string | undefined): ((v: { engineVersion: string }) => boolean) | null {
  if (text === undefined) return null;
  if (isSemver(text.trim())) return (v) => engineAdmits(v.engineVersion, text.trim());
  const range = parseEngineRange(text);
  return (v) => rangesOverlap(v.engineVersion, range);
}

function zeroPage<T>(all: T[], page: number, size: number): ZeroPage<T> {
  return { items: all.slice(page * size, page * size + size), page, size, totalItems: all.length, totalPages: Math.ceil(all.length / size) };
}

/** The key of a package's version list in `HostedRegistry.versionLists`. */
const versionsKey = (publisher: string, name: string) => `${publisher}\n${name}`;

export class HostedRegistry implements Registry {
  readonly location = 'self';
  private readonly clock = new Clock();
  /** Registry writes one at a time: a check (slug taken, version published) and its write stay together. */
  private tail: Promise<unknown> = Promise.resolve();

  /**
   * `versions()` answers by package, kept while the registry graph's
   * revision stands (the cache rule, docs/store.md): P4 and P5 ask
   * for the latest version of each registry-installed package they answer.
   */
  private readonly versionLists: GraphCache<readonly RegistryVersion[]>;

  constructor(
    private readonly store: QuadStore,
    private readonly graphs: Graphs,
    /** Where the archives' bytes are kept, by sha256. */
    readonly archives: ArchiveFiles,
    private readonly logger: Logger,
    private readonly options: { maxArchiveBytes: number; pipeline?: PipelinePool },
  ) {
    this.versionLists = new GraphCache(store, 10_000);
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.tail.then(fn, fn);
    this.tail = run.catch(() => undefined);
    return run;
  }

  private get g() { return iri(this.graphs.registry); }
  private publisherIri(slug: string) { return this.graphs.resource('publisher', stableId('publisher', slug)); }
  private packageIri(publisher: string, name: string) { return this.graphs.resource('registry-package', stableId('registry-package', publisher, name)); }
  private versionIri(publisher: string, name: string, version: string) { return this.graphs.resource('package-version', stableId('package-version', publisher, name, version)); }

  // ------------------------------------------------------------ publishers

  private async publisherRecord(slug: string): Promise<Publisher | null> {
    const rows = await this.store.select(sparql`${prefixes}SELECT ?id ?slug ?name ?createdAt ?owner WHERE { GRAPH ${this.g} {
      ${iri(this.publisherIri(slug))} a wsm:Publisher ; wsm:id ?id ; wsm:slug ?slug ; wsm:name ?name ; wsm:createdAt ?createdAt .
      OPTIONAL { ${iri(this.publisherIri(slug))} wsm:ownerUsername ?owner } } } ORDER BY ?owner`);
    if (!rows[0]) return null;
    const b = rows[0];
    return { id: req(b, 'id'), slug: req(b, 'slug'), name: req(b, 'name'), createdAt: time(b, 'createdAt'), owners: rows.map((r) => str(r, 'owner')).filter((o): o is string => o !== null) };
  }

  /** Publishers a user owns, by slug. */
  async publishersOwnedBy(username: string): Promise<Publisher[]> {
    const rows = await this.store.select(sparql`${prefixes}SELECT ?slug WHERE { GRAPH ${this.g} {
      ?p a wsm:Publisher ; wsm:ownerUsername ${literal(username)} ; wsm:slug ?slug } } ORDER BY ?slug`);
    const out: Publisher[] = [];
    for (const b of rows) {
      const p = await this.publisherRecord(req(b, 'slug'));
      if (p) out.push(p);
    }
    return out;
  }

  /** `POST /registry/publishers` (system admin). */
  async createPublisher(auth: AuthContext, input: { slug: string; name?: string | undefined; owners?: string[] | undefined }): Promise<Publisher> {
    if (!auth.systemAdmin) throw forbidden('Only a system administrator creates publishers');
    return this.addPublisher(input.slug, input.name ?? input.slug, input.owners?.length ? input.owners : [auth.username]);
  }

  /** Creates a publisher; 409 when its slug is taken. */
  addPublisher(slug: string, name: string, owners: string[]): Promise<Publisher> {
    if (!SLUG.test(slug) || slug.length > MAX_SLUG_LENGTH) throw badRequest(`Publisher slug "${slug}" must be a lower-case slug (letters a-z, digits, single hyphens between them), at most ${MAX_SLUG_LENGTH} characters`);
    if (RESERVED_PUBLISHERS.includes(slug)) throw badRequest(`Publisher slug "${slug}" is reserved by the API`);
    return this.serial(async () => {
      if (await this.publisherRecord(slug)) throw conflict(`Publisher "${slug}" already exists`);
      const p = iri(this.publisherIri(slug));
      const ownerTriples = join([...new Set(owners)].map((o) => raw(sparql`${p} wsm:ownerUsername ${literal(o)} .`)));
      // Conditional: applied only while the slug is free, across service instances too (the check above is this process's).
      const free = { ask: sparql`${prefixes}ASK { GRAPH ${this.g} { ${p} a wsm:Publisher } }`, expect: false };
      const applied = await this.store.writeIf(free, [{ kind: 'update', sparql: sparql`${prefixes}INSERT DATA { GRAPH ${this.g} {
        ${p} a wsm:Publisher ; wsm:id ${literal(newId())} ; wsm:slug ${literal(slug)} ; wsm:name ${literal(name)} ; wsm:createdAt ${dateTime(this.clock.now())} .
        ${ownerTriples} } }`, graphs: [this.graphs.registry] }]);
      if (!applied) throw conflict(`Publisher "${slug}" already exists`);
      return (await this.publisherRecord(slug))!;
    });
  }

  async publisher(slug: string): Promise<Publisher> {
    const found = SLUG.test(slug) ? await this.publisherRecord(slug) : null;
    if (!found) throw notFound(`Publisher "${slug}" does not exist`);
    return found;
  }

  private async ownedPublisher(auth: AuthContext, slug: string): Promise<Publisher> {
    const p = await this.publisher(slug);
    if (!p.owners.includes(auth.username)) throw forbidden(`Only the owners of publisher "${slug}" may do this; "${auth.username}" is not one of them`);
    return p;
  }

  /** `GET /registry/publishers/me`: the first publisher the caller owns, by slug. */
  async myPublisher(auth: AuthContext): Promise<Publisher> {
    const [first] = await this.publishersOwnedBy(auth.username);
    if (!first) throw notFound(`User "${auth.username}" owns no publisher; a system administrator creates one with POST /api/v1/registry/publishers`);
    return first;
  }

  // ------------------------------------------------------------ versions

  private async versionRows(filter: string): Promise<VersionRecord[]> {
    const rows = await this.store.select(sparql`${prefixes}SELECT * WHERE { GRAPH ${iri(this.graphs.registry)} {
      ${raw(filter)}
      ?v a wsm:PackageVersion ; wsm:id ?id ; wsm:registryPackage ?pkg ; wsm:version ?version ; wsm:engineVersion ?engineVersion ;
         wsm:publishedAt ?publishedAt ; wsm:yanked ?yanked ; wsm:sha256 ?sha ; wsm:archiveSize ?size ; wsm:manifest ?manifest .
      ?pkg wsm:name ?name ; wsm:publisher ?pub . ?pub wsm:slug ?slug .
      OPTIONAL { ?v wsm:yankReason ?yankReason } OPTIONAL { ?v wsm:publishedBy ?publishedBy } } }`);
    return rows.map((b) => {
      const manifest = JSON.parse(req(b, 'manifest')) as Manifest;
      return {
        id: req(b, 'id'), publisher: { slug: req(b, 'slug') }, name: req(b, 'name'), version: req(b, 'version'),
        engineVersion: req(b, 'engineVersion'), description: manifest.description ?? null, publishedAt: time(b, 'publishedAt'),
        publishedBy: str(b, 'publishedBy'), yanked: bool(b, 'yanked') ?? false, yankReason: str(b, 'yankReason'),
        dependencies: manifest.dependencies ?? [], matrices: manifest.matrices.map(({ name, uri }) => ({ name, uri })),
        checksum: `sha256:${req(b, 'sha')}`, size: int(b, 'size'),
      };
    });
  }

  private static newestFirst(a: VersionRecord, b: VersionRecord): number {
    return a.publishedAt < b.publishedAt ? 1 : a.publishedAt > b.publishedAt ? -1 : compareSemver(b.version, a.version);
  }

  private async versionsOf(publisher: string, name: string): Promise<VersionRecord[]> {
    if (!SLUG.test(publisher) || !SLUG.test(name)) return [];
    const rows = await this.versionRows(sparql`?v wsm:registryPackage ${iri(this.packageIri(publisher, name))} .`);
    return rows.sort(HostedRegistry.newestFirst);
  }

  private async packageDescription(publisher: string, name: string): Promise<{ exists: boolean; description: string | null }> {
    const rows = await this.store.select(sparql`${prefixes}SELECT ?description WHERE { GRAPH ${this.g} {
      ${iri(this.packageIri(publisher, name))} a wsm:RegistryPackage . OPTIONAL { ${iri(this.packageIri(publisher, name))} wsm:description ?description } } } LIMIT 1`);
    return { exists: rows.length > 0, description: rows[0] ? str(rows[0], 'description') : null };
  }

  /** `GET /registry/packages/{publisher}/{name}`. */
  async packageView(publisher: string, name: string): Promise<PackageView> {
    await this.publisher(publisher);
    const pkg = SLUG.test(name) ? await this.packageDescription(publisher, name) : { exists: false, description: null };
    if (!pkg.exists) throw notFound(`Package "${publisher}/${name}" is not in the registry`);
    return { publisher: { slug: publisher }, name, description: pkg.description, versions: await this.versionsOf(publisher, name) };
  }

  /** `GET .../versions`: 0-indexed pages; `engineVersion` keeps the versions whose range overlaps it. */
  async versionsPage(publisher: string, name: string, query: { page: number; size: number; engineVersion?: string | undefined }): Promise<ZeroPage<VersionRecord>> {
    const keep = engineFilter(query.engineVersion);
    const view = await this.packageView(publisher, name);
    const kept = keep ? view.versions.filter(keep) : view.versions;
    return zeroPage(kept, query.page, query.size);
  }

  async versionRecord(publisher: string, name: string, version: string): Promise<VersionRecord> {
    const view = await this.packageView(publisher, name);
    const found = view.versions.find((v) => v.version === version);
    if (!found) throw notFound(`Version ${version} of "${publisher}/${name}" is not in the registry`);
    return found;
  }

  /** `GET .../{version}/declarations`: the variables and managed secrets its matrices declare, read from its archive. */
  async declarations(publisher: string, name: string, version: string): Promise<{ declaredVariables: VariableDeclaration[]; declaredSecrets: SecretDeclaration[] }> {
    const { bytes } = await this.archive(publisher, name, version);
    const found = declarationsOfArchive(await readPackageArchive(bytes, { maxArchiveBytes: Math.max(this.options.maxArchiveBytes, bytes.length) }));
    return { declaredVariables: found.variables, declaredSecrets: found.secrets };
  }

  /** `GET .../{version}/archive`: the bytes and their checksum. */
  async archive(publisher: string, name: string, version: string): Promise<{ bytes: Buffer; checksum: string }> {
    const record = await this.versionRecord(publisher, name, version);
    const sha = record.checksum.slice('sha256:'.length);
    let bytes: Buffer | undefined;
    try {
      bytes = await this.archives.get(sha);
    } catch (err) {
      this.logger.error({ err, publisher, name, version }, 'the archive of a published version cannot be read');
    }
    if (!bytes) {
      this.logger.error({ publisher, name, version }, 'the archive of a published version is missing');
      throw new AppError('SERVICE_UNAVAILABLE', `The archive of ${publisher}/${name} ${version} cannot be read; the service's archive store lacks it`);
    }
    return { bytes, checksum: record.checksum };
  }

  /**
   * `GET /registry/resolve`: the package whose published matrices include
   * `uri`; of several, the one that published it first (its publisher owns the URI).
   */
  async resolve(uri: string, engineVersion?: string): Promise<{ publisher: { slug: string }; name: string; versions: VersionRecord[] }> {
    const why = notAbsoluteIri(uri);
    if (why) throw badRequest(`uri "${uri}" ${why}`);
    const keep = engineFilter(engineVersion);
    const rows = await this.store.select(sparql`${prefixes}SELECT ?slug ?name WHERE { GRAPH ${this.g} {
      ?v wsm:providesMatrix ${iri(uri)} ; wsm:registryPackage ?pkg ; wsm:publishedAt ?publishedAt . ?pkg wsm:name ?name ; wsm:publisher ?pub . ?pub wsm:slug ?slug } }
      ORDER BY ?publishedAt ?slug ?name LIMIT 1`);
    if (!rows[0]) throw notFound(`No package in the registry provides the matrix <${uri}>`);
    const publisher = req(rows[0], 'slug');
    const name = req(rows[0], 'name');
    const versions = (await this.versionsOf(publisher, name)).filter((v) => !keep || keep(v));
    return { publisher: { slug: publisher }, name, versions };
  }

  /** `GET /registry/publishers/me/packages`: packages of every publisher the caller owns. */
  async myPackages(auth: AuthContext, page: number, size: number): Promise<ZeroPage<PackageView>> {
    const publishers = await this.publishersOwnedBy(auth.username);
    const all: PackageView[] = [];
    for (const p of publishers) {
      const rows = await this.store.select(sparql`${prefixes}SELECT ?name WHERE { GRAPH ${this.g} {
        ?pkg a wsm:RegistryPackage ; wsm:publisher ${iri(this.publisherIri(p.slug))} ; wsm:name ?name } } ORDER BY ?name`);
      for (const b of rows) all.push(await this.packageView(p.slug, req(b, 'name')));
    }
    return zeroPage(all, page, size);
  }

  // ------------------------------------------------------------ publish, yank

  /** Matrices and roles the registry offers for the manifest's dependencies (any of their versions). */
  private async dependencyContext(manifest: Manifest): Promise<PublishContext> {
    const matrixUris = new Set<string>();
    const roleUris = new Set<string>();
    for (const dep of manifest.dependencies) {
      if (!SLUG.test(dep.publisher) || !SLUG.test(dep.name)) continue;
      const rows = await this.store.select(sparql`${prefixes}SELECT ?m ?r WHERE { GRAPH ${this.g} {
        ?v wsm:registryPackage ${iri(this.packageIri(dep.publisher, dep.name))} .
        { ?v wsm:providesMatrix ?m } UNION { ?v wsm:definesRole ?r } } }`);
      for (const b of rows) {
        const m = str(b, 'm');
        const r = str(b, 'r');
        if (m) matrixUris.add(m);
        if (r) roleUris.add(r);
      }
    }
    return { matrixUris: [...matrixUris].sort(), roleUris: [...roleUris].sort() };
  }

  /**
   * Publishes `bytes` as a version of `publisher/name`: checked like an
   * upload install (422 with the report), 200 with the existing record when
   * the same bytes are already that version, 409 when other bytes are.
   * A dry run runs every check and stores nothing (answers null).
   */
  async publish(auth: AuthContext | { username: string; systemAdmin: boolean }, publisher: string, name: string, bytes: Buffer,
    options: { dryRun?: boolean } = {}): Promise<{ created: boolean; record: VersionRecord | null }> {
    await this.ownedPublisher(auth as AuthContext, publisher);
    if (!SLUG.test(name) || name.length > MAX_SLUG_LENGTH) throw badRequest(`Package name "${name}" must be a lower-case slug (letters a-z, digits, single hyphens between them)`);
    const sha = createHash('sha256').update(bytes).digest('hex');
    // The same bytes again: nothing to check, nothing to store.
    const same = (await this.versionsOf(publisher, name)).find((v) => v.checksum === `sha256:${sha}`);
    if (same) return { created: false, record: options.dryRun ? null : same };
    const checked = await checkForPublish(bytes, name,
      { maxArchiveBytes: this.options.maxArchiveBytes, pool: this.options.pipeline ?? sharedPipelinePool(), reservedBase: this.graphs.base },
      (manifest) => this.dependencyContext(manifest));
    const m = checked.manifest;
    return this.serial(() => untilApplied(() => this.publishOnce(auth, publisher, name, bytes, sha, checked, options),
      () => conflict(`The registry changed while "${publisher}/${name}" ${m.version} was published; try again`)));
  }

  /**
   * The first matrix URI of `uris` that a version of another publisher
   * provides, or null. A matrix URI belongs to the publisher that first
   * published it (`resolve` answers that publisher).
   */
  private async matrixClaimedElsewhere(publisher: string, uris: string[]): Promise<string | null> {
    if (!uris.length) return null;
    const rows = await this.store.select(sparql`${prefixes}SELECT ?m WHERE { ${this.claimedElsewhere(publisher, uris)} } ORDER BY ?m LIMIT 1`);
    return rows[0] ? req(rows[0], 'm') : null;
  }

  /** The pattern "a version of a publisher other than `publisher` provides one of `uris`" (binds ?m). */
  private claimedElsewhere(publisher: string, uris: string[]): SparqlFragment {
    return sparqlFragment`GRAPH ${this.g} { VALUES ?m { ${join(uris.map((u) => iri(u)))} }
      ?v wsm:providesMatrix ?m ; wsm:registryPackage ?pkg . ?pkg wsm:publisher ?pub . FILTER (?pub != ${iri(this.publisherIri(publisher))}) }`;
  }

  /**
   * One attempt of `publish`: its checks, then a write conditional on the
   * version being still unpublished and its matrix URIs still nobody else's
   * (several instances may publish at once).
   */
  private async publishOnce(auth: { username: string }, publisher: string, name: string, bytes: Buffer, sha: string, checked: CheckedArchive,
    options: { dryRun?: boolean }): Promise<{ created: boolean; record: VersionRecord | null } | typeof NOT_APPLIED> {
    const m = checked.manifest;
    // Another service instance may publish this version at the same moment (instances started together publish
    // the examples): the write's condition fails, and the next attempt answers as a publish made after it.
    const existing = (await this.versionsOf(publisher, name)).find((v) => v.version === m.version);
    if (existing) {
      if (existing.checksum === `sha256:${sha}`) return { created: false, record: options.dryRun ? null : existing };
      throw conflict(`Version ${m.version} of "${publisher}/${name}" is already published with other content (${existing.checksum}); publish a new version`,
        { version: m.version, publishedChecksum: existing.checksum, checksum: `sha256:${sha}` });
    }
    const uris = m.matrices.map((x) => x.uri);
    const claimed = await this.matrixClaimedElsewhere(publisher, uris);
    if (claimed) {
      throw conflict(`The matrix URI <${claimed}> is already published by another publisher; a matrix URI belongs to the publisher that first published it. Give the matrix another URI`,
        { matrixUri: claimed });
    }
    if (options.dryRun) return { created: false, record: null };
    await this.archives.put(sha, bytes);
    const now = this.clock.now();
    const pkg = iri(this.packageIri(publisher, name));
    const v = iri(this.versionIri(publisher, name, m.version));
    const g = this.g;
    // The package's record once, whichever instance publishes its first version.
    const ops: WriteOp[] = [{ kind: 'update', sparql: sparql`${prefixes}INSERT { GRAPH ${g} {
      ${pkg} a wsm:RegistryPackage ; wsm:id ${literal(stableId('registry-package', publisher, name))} ; wsm:name ${literal(name)} ;
        wsm:publisher ${iri(this.publisherIri(publisher))} ; wsm:createdAt ${dateTime(now)} } }
      WHERE { VALUES ?condition { true } FILTER NOT EXISTS { GRAPH ${g} { ${pkg} a wsm:RegistryPackage } } }`, graphs: [this.graphs.registry] }];
    // The package's description is the one of its newest published version.
    ops.push({ kind: 'update', sparql: sparql`${prefixes}${sequence([
      sparql`DELETE WHERE { GRAPH ${this.g} { ${pkg} wsm:description ?d } }`,
      sparql`DELETE WHERE { GRAPH ${this.g} { ${pkg} wsm:updatedAt ?u } }`,
      sparql`INSERT DATA { GRAPH ${this.g} { ${pkg} wsm:updatedAt ${dateTime(now)} . ${m.description !== null ? raw(sparql`${pkg} wsm:description ${literal(m.description)} .`) : raw('')} } }`,
    ])}`, graphs: [this.graphs.registry] });
    const matrices = join(m.matrices.map((x) => raw(sparql`${v} wsm:providesMatrix ${iri(x.uri)} .`)));
    const roles = join(checked.roleUris.map((r) => raw(sparql`${v} wsm:definesRole ${iri(r)} .`)));
    ops.push({ kind: 'update', sparql: sparql`${prefixes}INSERT DATA { GRAPH ${this.g} {
      ${v} a wsm:PackageVersion ; wsm:id ${literal(stableId('package-version', publisher, name, m.version))} ; wsm:registryPackage ${pkg} ;
        wsm:version ${literal(m.version)} ; wsm:engineVersion ${literal(m.engineVersion)} ; wsm:publishedAt ${dateTime(now)} ;
        wsm:publishedBy ${literal(auth.username)} ; wsm:yanked ${boolean(false)} ; wsm:sha256 ${literal(sha)} ;
        wsm:archiveSize ${integer(bytes.length)} ; wsm:manifest ${literal(JSON.stringify(m))} .
      ${matrices} ${roles} } }`, graphs: [this.graphs.registry] });
    const stillFree = { ask: sparql`${prefixes}ASK { { GRAPH ${g} { ${v} a wsm:PackageVersion } } UNION { ${this.claimedElsewhere(publisher, uris)} } }`, expect: false };
    if (!await this.store.writeIf(stillFree, ops)) return NOT_APPLIED;
    this.logger.info({ publisher, name, version: m.version, sha256: sha }, 'published a package version');
    return { created: true, record: (await this.versionsOf(publisher, name)).find((x) => x.version === m.version)! };
  }

  /** Yank: the last live version needs `force` (409 otherwise). Idempotent. */
  async yank(auth: AuthContext, publisher: string, name: string, version: string, input: { reason: string; force?: boolean | undefined }): Promise<VersionRecord> {
    await this.ownedPublisher(auth, publisher);
    return this.serial(async () => {
      const record = await this.versionRecord(publisher, name, version);
      if (!record.yanked) {
        const live = (await this.versionsOf(publisher, name)).filter((v) => !v.yanked);
        if (live.length === 1 && !input.force) {
          throw conflict(`${version} is the last version of "${publisher}/${name}" that is not yanked; yanking it leaves nothing to install by default. Send "force": true to yank it anyway`,
            { version, liveVersions: [version] });
        }
      }
      await this.setYanked(publisher, name, version, true, input.reason);
      return this.versionRecord(publisher, name, version);
    });
  }

  async unyank(auth: AuthContext, publisher: string, name: string, version: string): Promise<VersionRecord> {
    await this.ownedPublisher(auth, publisher);
    return this.serial(async () => {
      await this.versionRecord(publisher, name, version);
      await this.setYanked(publisher, name, version, false, null);
      return this.versionRecord(publisher, name, version);
    });
  }

  private async setYanked(publisher: string, name: string, version: string, yanked: boolean, reason: string | null): Promise<void> {
    const v = iri(this.versionIri(publisher, name, version));
    await this.store.update(sparql`${prefixes}${sequence([
      sparql`DELETE WHERE { GRAPH ${this.g} { ${v} wsm:yanked ?y } }`,
      sparql`DELETE WHERE { GRAPH ${this.g} { ${v} wsm:yankReason ?r } }`,
      sparql`INSERT DATA { GRAPH ${this.g} { ${v} wsm:yanked ${boolean(yanked)} . ${reason !== null ? raw(sparql`${v} wsm:yankReason ${literal(reason)} .`) : raw('')} } }`,
    ])}`, [this.graphs.registry]);
  }

  // ------------------------------------------------------------ Registry (installs)

  async versions(publisher: string, name: string): Promise<RegistryVersion[]> {
    const versions = await this.versionLists.get(versionsKey(publisher, name), [this.graphs.registry], async () => {
      const view = await this.packageView(publisher, name);
      return view.versions.map((v) => ({ version: v.version, engineVersion: v.engineVersion, publishedAt: v.publishedAt, yanked: v.yanked, dependencies: v.dependencies }))
        .sort((a, b) => compareSemver(a.version, b.version));
    });
    // Copies: the kept answer is shared (and frozen).
    return versions.map((v) => ({ ...v, dependencies: v.dependencies ? v.dependencies.map((d) => ({ ...d })) : v.dependencies }));
  }

  keptVersions(publisher: string, name: string): readonly RegistryVersion[] | undefined {
    // Where other instances write, a kept answer is current only after its graph's revision was synced: ask (`versions`).
    if (this.store.capabilities.otherInstancesWrite) return undefined;
    const hit = this.versionLists.peek(versionsKey(publisher, name));
    return hit.found ? hit.value : undefined;
  }

  async download(publisher: string, name: string, version: string): Promise<Buffer> {
    if (!isSemver(version)) throw notFound(`Version "${version}" of "${publisher}/${name}" is not in the registry`);
    return (await this.archive(publisher, name, version)).bytes;
  }
}
