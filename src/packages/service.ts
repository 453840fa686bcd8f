import type { Quad } from 'n3';
import { updateOp, type QuadStore, type WriteOp } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import type { Logger } from '../logger.js';
import { PREFIXES } from '../rdf/vocab.js';
import { sparql, iri, literal, dateTime, integer, boolean, raw, join } from '../rdf/sparql.js';
import { stableId, UUID_PATTERN } from '../rdf/ids.js';
import { req, str, int, bool, time } from '../rdf/bindings.js';
import { AppError, badRequest, conflict, notFound } from '../errors.js';
import { NOT_APPLIED, untilApplied } from '../store/conditional.js';
import type { Workspace, WorkspaceService } from '../workspaces/service.js';
import type { PageQuery, Page } from '../http/paging.js';
import { offsetOf, page } from '../http/paging.js';
import { quadsToNTriples } from '../rdf/turtle.js';
import { reportTurtle, type ValidationReport } from './validation.js';
import { ReportReader } from './report-json.js';
import { derivedIds } from './derive.js';
import { sharedPipelinePool, type PipelineJob, type PipelinePool } from './pipeline-pool.js';
import type { ValidateOutput } from './pipeline.js';
import { readPackageArchive, type PackageArchive } from './archive.js';
import { resolveVersion, newestCompatible, type Dependency, type Registry, type RegistryVersion } from './registry.js';
import { ensureDependencies, type DependencyHost } from './dependencies.js';
import { engineAdmits } from './engine-range.js';
import { compareSemver, parseSemver } from './semver.js';
import { GraphCache } from '../store/graph-cache.js';
import type { Manifest } from './manifest.js';
import {
  CommandFailure, CommandRunner, CommandStore,
  type CommandType, type Job, type JobContext, type JobResult, type LifecycleCommand, type LifecycleCommandSummary, type CommandEvent,
} from './commands.js';

/** MatrixSummary of INTERFACE.md. */
export interface MatrixSummary {
  id: string;
  /** The matrix URI (DESIGN.md section 11). */
  uri: string;
  name: string;
  description: string | null;
  dependencyCount: number;
}

/** Package installation of INTERFACE.md (P4, P5). */
export interface PackageInstallation {
  id: string;
  name: string;
  currentVersion: string;
  createdAt: string;
  updatedAt: string;
  matrices: MatrixSummary[];
  latestCommand: LifecycleCommandSummary | null;
  registryPublisher: string | null;
  registryName: string | null;
  latestVersion: string | null;
  updateAvailable: boolean;
  autoUpdate: boolean;
}

/** JSON form of a validation report (P9). */
export interface ValidationReportJson {
  conforms: boolean;
  violationCount: number;
  warningCount: number;
  infoCount: number;
  violations: ValidationEntry[];
  warnings: ValidationEntry[];
  infos: ValidationEntry[];
}
export interface ValidationEntry { focusNode: string | null; path: string | null; value: string | null; message: string }

/**
 * How the extensions area takes part in deployments of matrices. Register it
 * once with `PackageService.setExtensionHook(hook)`.
 *
 * - `deploy` is called inside every INSTALL, UPDATE, REINSTALL and REDEPLOY
 *   command, once for each matrix the command deploys, before validation.
 *   It answers the quads of the extensions to deploy with that matrix (the
 *   roles and agents of the matrix are derived from the matrix plus these,
 *   and they are validated together), and `ops` to write in the SAME atomic
 *   write as the deployment when the command completes (e.g. mark those
 *   extensions active and set their last command). When the command fails,
 *   `ops` are dropped: nothing changes.
 * - `undeploy` is called inside an UNINSTALL (and for matrices an update
 *   drops); its ops go into the same atomic write (e.g. mark extensions that
 *   target these matrices inactive; their records and content stay).
 * To learn the outcome of a REDEPLOY it asked for, the extensions area passes
 * `onOutcome` to `requestRedeploy`.
 */
export interface ExtensionHook {
  deploy(input: { workspaceId: string; matrixUri: string; matrixId: string; commandId: string }):
    Promise<{ quads: Quad[]; ops: WriteOp[] }> | { quads: Quad[]; ops: WriteOp[] };
  undeploy?(input: { workspaceId: string; matrixUris: string[]; commandId: string }): WriteOp[];
}

interface InstalledRecord {
  id: string;
  name: string;
  currentVersion: string;
  createdAt: string;
  updatedAt: string;
  registryPublisher: string | null;
  registryName: string | null;
  autoUpdate: boolean;
  /** Installed at a version named explicitly: auto-update leaves it until P3 sets auto-update again. */
  pinned: boolean;
}

interface MatrixRecord { id: string; uri: string; packageName: string; graph: string }

/** Settings of the package service. */
export interface PackageServiceOptions {
  /** Limits of uploaded and downloaded archives. */
  maxArchiveBytes: number;
  /** Worker pool of the deployment pipeline; the process's shared pool when absent. */
  pipeline?: PipelinePool;
}

/** How long P4/P5 wait for the registry's versions before answering latestVersion null. */
const REGISTRY_READ_TIMEOUT_MS = 3000;

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/**
 * Package installations and their lifecycle (DESIGN.md section 4): install
 * from the registry or an upload, update, reinstall, uninstall, redeploy.
 * The HTTP routes call it; the extensions area calls `requestRedeploy`.
 */
export class PackageService {
  readonly commands: CommandStore;
  readonly runner: CommandRunner;
  private hook: ExtensionHook | null = null;

  constructor(
    private readonly store: QuadStore,
    private readonly graphs: Graphs,
    private readonly workspaces: WorkspaceService,
    readonly registry: Registry,
    private readonly logger: Logger,
    private readonly options: PackageServiceOptions,
  ) {
    this.commands = new CommandStore(store, graphs);
    this.p5Reads = new GraphCache(store, 1000);
    this.reports = new ReportReader(store);
    this.runner = new CommandRunner(this.commands, store, logger);
    this.pipeline = options.pipeline ?? sharedPipelinePool();
  }

  /** P9's reads. */
  private readonly reports: ReportReader;

  /** Worker threads that parse, validate and derive packages off the event loop. */
  private readonly pipeline: PipelinePool;

  /** See `ExtensionHook`. */
  setExtensionHook(hook: ExtensionHook): void { this.hook = hook; }

  packageId(workspaceId: string, name: string): string { return stableId('package', workspaceId, name); }
  matrixId(workspaceId: string, matrixUri: string): string { return stableId('matrix', workspaceId, matrixUri); }
  private packageIri(id: string): string { return this.graphs.resource('package', id); }
  private matrixIri(id: string): string { return this.graphs.resource('matrix', id); }

  // ---------------------------------------------------------------- reads

  /** `lead`, a pattern that narrows ?p, comes first: Oxigraph joins in the order written. */
  private async installedRecords(workspaceId: string, filter: string, modifiers = '', lead = ''): Promise<InstalledRecord[]> {
    const rows = await this.store.select(PREFIXES + sparql`SELECT * WHERE { GRAPH ${iri(this.graphs.packages(workspaceId))} {
      ${raw(lead)}
      ?p a wsm:PackageInstallation ; wsm:id ?id ; wsm:name ?name ; wsm:currentVersion ?currentVersion ;
         wsm:autoUpdate ?autoUpdate ; wsm:createdAt ?createdAt ; wsm:updatedAt ?updatedAt .
      OPTIONAL { ?p wsm:registryPublisher ?registryPublisher } OPTIONAL { ?p wsm:registryName ?registryName }
      OPTIONAL { ?p wsm:pinned ?pinned }
      ${raw(filter)} } } ${raw(modifiers)}`);
    return rows.map((b) => ({
      id: req(b, 'id'), name: req(b, 'name'), currentVersion: req(b, 'currentVersion'), createdAt: time(b, 'createdAt'), updatedAt: time(b, 'updatedAt'),
      registryPublisher: str(b, 'registryPublisher'), registryName: str(b, 'registryName'), autoUpdate: bool(b, 'autoUpdate') ?? false,
      pinned: bool(b, 'pinned') ?? false,
    }));
  }

  private async installed(workspaceId: string, name: string): Promise<InstalledRecord | null> {
    return (await this.installedRecords(workspaceId, '', 'LIMIT 1', sparql`?p wsm:name ${literal(name)} .`))[0] ?? null;
  }

  /** `lead`, a pattern that narrows ?m (or ?uri, ?p), comes first: Oxigraph joins in the order written. */
  private async matrixRecords(workspaceId: string, filter = '', lead = ''): Promise<MatrixRecord[]> {
    const rows = await this.store.select(PREFIXES + sparql`SELECT ?id ?uri ?packageName ?graph WHERE { GRAPH ${iri(this.graphs.packages(workspaceId))} {
      ${raw(lead)}
      ?m a wsm:Matrix ; wsm:id ?id ; wsm:uri ?uri ; wsm:graph ?graph ; wsm:package ?p . ?p wsm:name ?packageName .
      ${raw(filter)} } } ORDER BY ?uri`);
    return rows.map((b) => ({ id: req(b, 'id'), uri: req(b, 'uri'), packageName: req(b, 'packageName'), graph: req(b, 'graph') }));
  }

  /** Installed matrix by URI, or null. */
  async findMatrix(workspaceId: string, matrixUri: string): Promise<MatrixRecord | null> {
    return (await this.matrixRecords(workspaceId, '', sparql`?m wsm:uri ${iri(matrixUri)} .`)).find((m) => m.uri === matrixUri) ?? null;
  }

  /** Installed matrices whose URI is one of `uris` (looked up by URI, a few hundred at a time). */
  private async matricesAmong(workspaceId: string, uris: Iterable<string>): Promise<MatrixRecord[]> {
    const out: MatrixRecord[] = [];
    for (const [i, chunk] of chunks([...new Set(uris)], 500).entries()) {
      if (i > 0) await nextTurn(); // a package names thousands of IRIs: let requests in between
      out.push(...await this.matrixRecords(workspaceId, '', sparql`VALUES ?uri { ${join(chunk.map((u) => iri(u)))} } ?m wsm:uri ?uri .`));
    }
    return out.sort((a, b) => (a.uri < b.uri ? -1 : a.uri > b.uri ? 1 : 0));
  }

  /** Installed matrices of one package. */
  private matricesOfPackage(workspaceId: string, name: string): Promise<MatrixRecord[]> {
    return this.matrixRecords(workspaceId, '', sparql`?p wsm:name ${literal(name)} . ?m wsm:package ?p .`);
  }

  /** Registry lookups of reads in flight, by package: concurrent P4/P5 of one package share one request. */
  private readonly registryReads = new Map<string, Promise<RegistryVersion[]>>();

  /**
   * The registry's versions for a read (latestVersion). A read that starts
   * while another read's request for the same package is under way takes
   * that request's answer; nothing is kept once it is answered, so a change
   * in the registry shows at the next read. Installs ask the registry
   * themselves.
   */
  private registryVersionsForRead(publisher: string, name: string): Promise<RegistryVersion[]> {
    const key = `${publisher}/${name}`;
    let pending = this.registryReads.get(key);
    if (!pending) {
      pending = this.registry.versions(publisher, name).finally(() => this.registryReads.delete(key));
      this.registryReads.set(key, pending);
    }
    return pending;
  }

  private async latestFromRegistry(workspace: Workspace, rec: InstalledRecord): Promise<string | null> {
    if (!rec.registryPublisher || !rec.registryName) return null;
    let timer: NodeJS.Timeout | undefined;
    try {
      // A read answers without the registry rather than wait for a slow one.
      const timeout = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error('registry too slow')), REGISTRY_READ_TIMEOUT_MS); });
      const versions = await Promise.race([this.registryVersionsForRead(rec.registryPublisher, rec.registryName), timeout]);
      return newestCompatible(versions, workspace.engineVersion)?.version ?? null;
    } catch (err) {
      this.logger.warn({ err, package: rec.name }, 'registry not reachable for the latest version of a package');
      return null;
    } finally {
      clearTimeout(timer);
    }
  }

  private async toInstallation(workspace: Workspace, rec: InstalledRecord, matrices: MatrixSummary[], latestCommand?: LifecycleCommandSummary | null): Promise<PackageInstallation> {
    const latestVersion = await this.latestFromRegistry(workspace, rec);
    return {
      id: rec.id,
      name: rec.name,
      currentVersion: rec.currentVersion,
      createdAt: rec.createdAt,
      updatedAt: rec.updatedAt,
      matrices,
      latestCommand: latestCommand !== undefined ? latestCommand : await this.commands.latestSummary(workspace.id, rec.name),
      registryPublisher: rec.registryPublisher,
      registryName: rec.registryName,
      latestVersion,
      updateAvailable: latestVersion !== null && compareSemver(latestVersion, rec.currentVersion) > 0,
      autoUpdate: rec.autoUpdate,
    };
  }

  private async matrixSummaries(workspaceId: string, packageIds: string[]): Promise<Map<string, MatrixSummary[]>> {
    const out = new Map<string, MatrixSummary[]>(packageIds.map((id) => [id, []]));
    if (packageIds.length === 0) return out;
    const values = join(packageIds.map((id) => iri(this.packageIri(id))));
    const rows = await this.store.select(PREFIXES + sparql`SELECT ?pid ?id ?uri ?name ?description ?dependencyCount WHERE {
      GRAPH ${iri(this.graphs.packages(workspaceId))} {
        VALUES ?p { ${values} }
        ?p wsm:id ?pid . ?m a wsm:Matrix ; wsm:package ?p ; wsm:id ?id ; wsm:uri ?uri ; wsm:name ?name ; wsm:dependencyCount ?dependencyCount .
        OPTIONAL { ?m wsm:description ?description } } } ORDER BY ?name ?id`);
    for (const b of rows) {
      out.get(req(b, 'pid'))?.push({ id: req(b, 'id'), uri: req(b, 'uri'), name: req(b, 'name'), description: str(b, 'description'), dependencyCount: int(b, 'dependencyCount') });
    }
    return out;
  }

  /** P4: one page of installations, by name. */
  async list(workspace: Workspace, query: PageQuery): Promise<Page<PackageInstallation>> {
    const g = iri(this.graphs.packages(workspace.id));
    const total = Number((await this.store.select(PREFIXES + sparql`SELECT (COUNT(?p) AS ?n) WHERE { GRAPH ${g} { ?p a wsm:PackageInstallation } }`))[0]?.n?.value ?? 0);
    const records = await this.installedRecords(workspace.id, '', `ORDER BY ?name LIMIT ${query.pageSize} OFFSET ${offsetOf(query)}`);
    const matrices = await this.matrixSummaries(workspace.id, records.map((r) => r.id));
    const items = await Promise.all(records.map((r) => this.toInstallation(workspace, r, matrices.get(r.id) ?? [])));
    return page(items, query, total);
  }

  /** P5's store reads (record, matrices, newest command): all from the workspace's packages graph, kept while it does not change. */
  private readonly p5Reads: GraphCache<{ rec: InstalledRecord; matrices: MatrixSummary[]; latestCommand: LifecycleCommandSummary | null } | null>;

  /** P5. */
  async get(workspace: Workspace, name: string): Promise<PackageInstallation> {
    const found = await this.p5Reads.get(`${workspace.id}\n${name}`, [this.graphs.packages(workspace.id)], async () => {
      const rec = await this.installed(workspace.id, name);
      if (!rec) return null;
      return { rec, matrices: (await this.matrixSummaries(workspace.id, [rec.id])).get(rec.id) ?? [], latestCommand: await this.commands.latestSummary(workspace.id, rec.name) };
    });
    if (!found) throw notFound(`Package "${name}" is not installed in this workspace`);
    // Copies: the cached read stays as read whatever a caller does with its answer.
    return this.toInstallation(workspace, { ...found.rec }, found.matrices.map((m) => ({ ...m })), found.latestCommand && { ...found.latestCommand });
  }

  /** P7: 404 when the package is neither installed nor has any command. */
  async listCommands(workspace: Workspace, name: string, pageIndex: number, size: number): Promise<LifecycleCommand[]> {
    if (!await this.installed(workspace.id, name) && !await this.commands.hasCommands(workspace.id, name)) {
      throw notFound(`Package "${name}" is not installed in this workspace and has no commands`);
    }
    return await this.commands.listForPackage(workspace.id, name, pageIndex * size, size);
  }

  /** P8. */
  async getCommand(workspace: Workspace, commandId: string): Promise<LifecycleCommand> {
    const c = UUID_PATTERN.test(commandId) ? await this.commands.get(workspace.id, commandId.toLowerCase()) : null;
    if (!c) throw notFound(`Command ${commandId} not found in this workspace`);
    return c;
  }

  /** P10. */
  async events(workspace: Workspace, commandId: string): Promise<CommandEvent[]> {
    await this.getCommand(workspace, commandId);
    return await this.commands.events(workspace.id, commandId);
  }

  private async reportNTriples(workspace: Workspace, commandId: string): Promise<string> {
    await this.getCommand(workspace, commandId);
    const graph = await this.commands.reportGraph(workspace.id, commandId);
    if (!graph) throw notFound(`Command ${commandId} has no validation report: it never reached validation`);
    return await this.store.dumpGraph(graph);
  }

  /** P9 as JSON (src/packages/report-json.ts: one SELECT, kept while the report graph does not change). */
  async report(workspace: Workspace, commandId: string): Promise<ValidationReportJson> {
    await this.getCommand(workspace, commandId);
    const graph = await this.commands.reportGraph(workspace.id, commandId);
    if (!graph) throw notFound(`Command ${commandId} has no validation report: it never reached validation`);
    return this.reports.json(graph);
  }

  /** P9 as Turtle. */
  async reportAsTurtle(workspace: Workspace, commandId: string): Promise<string> {
    return reportTurtle(await this.reportNTriples(workspace, commandId));
  }

  // ---------------------------------------------------------------- commands

  private async commandTypeFor(workspaceId: string, name: string, version: string): Promise<{ type: CommandType; existing: InstalledRecord | null }> {
    const existing = await this.installed(workspaceId, name);
    if (!existing) return { type: 'INSTALL', existing };
    return { type: existing.currentVersion === version ? 'REINSTALL' : 'UPDATE', existing };
  }

  /**
   * P1: resolves publisher, name and version now (404 unknown, 400
   * ENGINE_INCOMPATIBLE); download and archive checks run in the command.
   * A version named explicitly pins the package (auto-update leaves it);
   * `auto` marks auto-update's own UPDATE, which never pins.
   */
  async installFromRegistry(workspace: Workspace, publisher: string, name: string, input: { version?: string | undefined; autoUpdate?: boolean | undefined }, commandType?: CommandType, options: { auto?: boolean } = {}): Promise<LifecycleCommand> {
    const versions = await this.registry.versions(publisher, name);
    const resolved = resolveVersion(versions, workspace.engineVersion, input.version);
    const { type, existing } = await this.commandTypeFor(workspace.id, name, resolved.version);
    const autoUpdate = input.autoUpdate ?? existing?.autoUpdate ?? false;
    const pinned = input.version !== undefined && !options.auto;
    return this.runner.submit({
      workspaceId: workspace.id, packageName: name, version: resolved.version, commandType: commandType ?? type,
      packageInstallationId: existing?.id ?? null, exclusive: true,
      job: this.registryJob(workspace, publisher, name, resolved, { autoUpdate, pinned, named: input.version !== undefined && !options.auto, chain: [name] }),
    });
  }

  /** The job of a registry install: download, check, dependencies, deploy. */
  private registryJob(workspace: Workspace, publisher: string, name: string, resolved: RegistryVersion,
    opts: { autoUpdate: boolean; pinned: boolean; named: boolean; chain: string[] }): Job {
    return async (ctx) => {
      if (resolved.yanked && opts.named) {
        await ctx.event('WARNING', `Version ${resolved.version} of ${publisher}/${name} is yanked; it is installed because it was named explicitly`);
      }
      await ctx.event('INFO', `Downloading ${publisher}/${name} ${resolved.version} from the registry`);
      let bytes: Buffer;
      try {
        bytes = await this.registry.download(publisher, name, resolved.version);
      } catch (err) {
        throw new CommandFailure(`Could not download ${publisher}/${name} ${resolved.version}: ${err instanceof Error ? err.message : String(err)}`,
          'Check that the registry is reachable and still offers this version, then install again.');
      }
      const archive = await this.readArchive(bytes);
      await ctx.event('INFO', `Read the archive (${bytes.length} bytes, sha256 ${archive.sha256}): ${this.describeManifest(archive.manifest)}`);
      if (archive.manifest.name !== name || archive.manifest.version !== resolved.version) {
        throw new CommandFailure(`The registry's archive holds ${archive.manifest.name} ${archive.manifest.version}, not ${name} ${resolved.version}`,
          'Ask the publisher to fix the registry entry.');
      }
      if (!engineAdmits(archive.manifest.engineVersion, workspace.engineVersion)) {
        throw new CommandFailure(`The package needs engine ${archive.manifest.engineVersion}; this workspace runs ${workspace.engineVersion}`, 'Choose a compatible version.');
      }
      await ensureDependencies(this.dependencyHost, ctx, workspace, archive.manifest, opts.chain);
      return this.deployPackage(ctx, workspace, archive, { registry: { publisher, name }, autoUpdate: opts.autoUpdate, pinned: opts.pinned, forceUpdate: false });
    };
  }

  /** How dependency resolution reads the workspace and runs child installs. */
  private readonly dependencyHost: DependencyHost = ((service: PackageService) => ({
    get registry() { return service.registry; },
    installedVersion: async (workspaceId, name) => (await this.installed(workspaceId, name))?.currentVersion ?? null,
    installChild: (workspace: Workspace, dependency: Dependency, version: RegistryVersion, parentCommandId: string, chain: string[]) =>
      this.runner.runChild({
        workspaceId: workspace.id, packageName: dependency.name, version: version.version, commandType: 'INSTALL',
        packageInstallationId: null, exclusive: true,
        job: this.registryJob(workspace, dependency.publisher, dependency.name, version, { autoUpdate: false, pinned: false, named: false, chain }),
      }, parentCommandId),
  }))(this);

  private async readArchive(bytes: Buffer): Promise<PackageArchive> {
    try {
      return await readPackageArchive(bytes, { maxArchiveBytes: this.options.maxArchiveBytes });
    } catch (err) {
      if (err instanceof AppError) throw new CommandFailure(`The package archive is not valid: ${err.message}`, 'Fix the archive and publish it again.');
      throw err;
    }
  }

  private describeManifest(m: Manifest): string {
    return `${m.name} ${m.version}, engine ${m.engineVersion}, ${plural(m.matrices.length, 'matrix')} (${m.matrices.map((x) => x.name).join(', ')})`
      .replace(/matrixs/, 'matrices');
  }

  /**
   * P2: the archive is checked now (400 before any command exists): gzip
   * tar, entries, sizes, manifest, files, engine range.
   */
  async installUpload(workspace: Workspace, bytes: Buffer, forceUpdate: boolean): Promise<LifecycleCommand> {
    const archive = await readPackageArchive(bytes, { maxArchiveBytes: this.options.maxArchiveBytes });
    const m = archive.manifest;
    if (!engineAdmits(m.engineVersion, workspace.engineVersion)) {
      throw new AppError('ENGINE_INCOMPATIBLE', `Package ${m.name} ${m.version} needs engine ${m.engineVersion}; workspace "${workspace.slug}" runs ${workspace.engineVersion}`,
        { engineVersion: m.engineVersion, workspaceEngineVersion: workspace.engineVersion });
    }
    const { type, existing } = await this.commandTypeFor(workspace.id, m.name, m.version);
    return this.runner.submit({
      workspaceId: workspace.id, packageName: m.name, version: m.version, commandType: type,
      packageInstallationId: existing?.id ?? null, exclusive: false,
      job: async (ctx) => {
        await ctx.event('INFO', `Read the uploaded archive (${bytes.length} bytes, sha256 ${archive.sha256}): ${this.describeManifest(m)}${forceUpdate ? '; forceUpdate is on' : ''}`);
        // Queued behind another command of the package, the installed version may have changed meanwhile.
        const actualType = (await this.commandTypeFor(workspace.id, m.name, m.version)).type;
        await ensureDependencies(this.dependencyHost, ctx, workspace, m, [m.name]);
        const result = await this.deployPackage(ctx, workspace, archive, { registry: null, autoUpdate: false, pinned: false, forceUpdate });
        return { ...result, commandType: actualType };
      },
    });
  }

  /** URIs of installed matrices (outside `exceptIds`) whose specification imports one of `uris`. */
  private async importers(workspaceId: string, uris: string[], exceptIds: Set<string>): Promise<string[]> {
    if (uris.length === 0) return [];
    // From the imported URIs to the graphs that import them: the cost follows the importers, not the matrices installed.
    const rows = await this.store.select(PREFIXES + sparql`SELECT DISTINCT ?m ?id WHERE {
      VALUES ?target { ${join(uris.map((u) => iri(u)))} }
      GRAPH ?g { ?m mtx:imports ?target }
      GRAPH ${iri(this.graphs.packages(workspaceId))} { ?rec wsm:graph ?g ; a wsm:Matrix ; wsm:id ?id } }`);
    return [...new Set(rows.filter((b) => !exceptIds.has(req(b, 'id'))).map((b) => req(b, 'm')))];
  }

  /** Roles defined in the derived graphs of these matrices. */
  private async rolesOf(workspaceId: string, matrixIds: string[]): Promise<Set<string>> {
    if (matrixIds.length === 0) return new Set();
    const values = join(matrixIds.map((id) => iri(this.graphs.derived(workspaceId, id))));
    const rows = await this.store.select(PREFIXES + sparql`SELECT DISTINCT ?r WHERE { VALUES ?g { ${values} } GRAPH ?g { ?r a wsm:Role } }`);
    return new Set(rows.map((b) => req(b, 'r')));
  }

  /** Agent principals defined in the derived graphs of these matrices. */
  private async principalsOf(workspaceId: string, matrixIds: string[]): Promise<Set<string>> {
    if (matrixIds.length === 0) return new Set();
    const values = join(matrixIds.map((id) => iri(this.graphs.derived(workspaceId, id))));
    const rows = await this.store.select(PREFIXES + sparql`SELECT DISTINCT ?q WHERE { VALUES ?g { ${values} } GRAPH ?g { ?q a wsm:Principal } }`);
    return new Set(rows.map((b) => req(b, 'q')));
  }

  /**
   * Those of `roleIris` that a derived graph of an installed matrix outside
   * `exceptIds` defines. Looked up by role (a few hundred at a time), so the
   * cost follows the candidates, not the number of installed matrices.
   */
  private async rolesOutside(workspaceId: string, exceptIds: Set<string>, roleIris: Iterable<string>): Promise<Set<string>> {
    const out = new Set<string>();
    const pk = iri(this.graphs.packages(workspaceId));
    for (const [i, chunk] of chunks([...new Set(roleIris)], 500).entries()) {
      if (i > 0) await nextTurn(); // thousands of candidate roles: let requests in between
      const rows = await this.store.select(PREFIXES + sparql`SELECT DISTINCT ?r ?id WHERE { VALUES ?r { ${join(chunk.map((r) => iri(r)))} }
        GRAPH ?g { ?r a wsm:Role } FILTER (STRENDS(STR(?g), "/derived"))
        BIND (IRI(SUBSTR(STR(?g), 1, STRLEN(STR(?g)) - 8)) AS ?mg)
        GRAPH ${pk} { ?m wsm:graph ?mg ; a wsm:Matrix ; wsm:id ?id } }`);
      for (const b of rows) if (!exceptIds.has(req(b, 'id'))) out.add(req(b, 'r'));
    }
    return out;
  }

  /** Role IRIs the derivation gives the role URIs among `uris`. */
  private roleIrisFor(workspaceId: string, uris: Iterable<string>): string[] {
    return [...uris].map((u) => this.graphs.resource('role', derivedIds.role(workspaceId, u)));
  }

  /** Deletes the role assignments (IAM graph) of roles and principals that disappear. */
  private assignmentCleanup(workspaceId: string, roles: string[], principals: string[]): WriteOp[] {
    const iam = iri(this.graphs.iam(workspaceId));
    const ops: WriteOp[] = [];
    // The built-in administrator role belongs to the workspace, not to a package: whatever a package or an
    // extension declared, its assignments are never removed here (issue 12, acceptance 3).
    const builtIn = this.workspaces.roleIri(this.workspaces.adminRoleId(workspaceId));
    roles = roles.filter((r) => r !== builtIn);
    if (roles.length) {
      ops.push(updateOp(PREFIXES + sparql`DELETE { GRAPH ${iam} { ?a ?p ?o } } WHERE { GRAPH ${iam} {
        VALUES ?r { ${join(roles.map((r) => iri(r)))} } ?a a wsm:RoleAssignment ; wsm:role ?r ; ?p ?o } }`, [this.graphs.iam(workspaceId)]));
    }
    if (principals.length) {
      ops.push(updateOp(PREFIXES + sparql`DELETE { GRAPH ${iam} { ?a ?p ?o } } WHERE { GRAPH ${iam} {
        VALUES ?q { ${join(principals.map((q) => iri(q)))} } ?a a wsm:RoleAssignment ; wsm:principal ?q ; ?p ?o } }`, [this.graphs.iam(workspaceId)]));
    }
    return ops;
  }

  /** createdAt of resources in a derived graph, so a redeploy keeps them. */
  private async createdAtOf(workspaceId: string, matrixId: string): Promise<Map<string, string>> {
    const rows = await this.store.select(PREFIXES + sparql`SELECT ?s ?t WHERE { GRAPH ${iri(this.graphs.derived(workspaceId, matrixId))} { ?s wsm:createdAt ?t } }`);
    return new Map(rows.map((b) => [req(b, 's'), req(b, 't')]));
  }

  private matrixRecordOps(workspaceId: string, input: { id: string; uri: string; name: string; description: string | null; dependencyCount: number; packageId: string }): WriteOp {
    const g = iri(this.graphs.packages(workspaceId));
    const m = iri(this.matrixIri(input.id));
    const description = input.description !== null ? sparql`${m} wsm:description ${literal(input.description)} .` : '';
    return updateOp(PREFIXES + [
      sparql`DELETE WHERE { GRAPH ${g} { ${m} ?p ?o } }`,
      sparql`INSERT DATA { GRAPH ${g} { ${m} a wsm:Matrix ; wsm:id ${literal(input.id)} ; wsm:uri ${iri(input.uri)} ; wsm:name ${literal(input.name)} ;
        wsm:dependencyCount ${integer(input.dependencyCount)} ; wsm:package ${iri(this.packageIri(input.packageId))} ;
        wsm:graph ${iri(this.graphs.matrix(workspaceId, input.id))} ; wsm:workspace ${iri(this.graphs.resource('workspace', workspaceId))} .
        ${raw(description)} } }`,
    ].join(' ;\n'), [this.graphs.packages(workspaceId)]);
  }

  private dropMatrixOps(workspaceId: string, matrixId: string): WriteOp {
    const g = iri(this.graphs.packages(workspaceId));
    return updateOp(PREFIXES + [
      sparql`DROP SILENT GRAPH ${iri(this.graphs.matrix(workspaceId, matrixId))}`,
      sparql`DROP SILENT GRAPH ${iri(this.graphs.derived(workspaceId, matrixId))}`,
      sparql`DELETE WHERE { GRAPH ${g} { ${iri(this.matrixIri(matrixId))} ?p ?o } }`,
    ].join(' ;\n'), [this.graphs.matrix(workspaceId, matrixId), this.graphs.derived(workspaceId, matrixId), this.graphs.packages(workspaceId)]);
  }

  /**
   * The heart of INSTALL / UPDATE / REINSTALL: validates before it writes
   * (Turtle, imports, SHACL), derives roles and agents, and returns every
   * change as ops for one atomic write.
   */
  private async deployPackage(ctx: JobContext, workspace: Workspace, archive: PackageArchive, opts: {
    registry: { publisher: string; name: string } | null; autoUpdate: boolean; pinned: boolean; forceUpdate: boolean;
  }): Promise<JobResult> {
    return this.pipeline.run((job) => this.deployWith(job, ctx, workspace, archive, opts));
  }

  /** deployPackage on the worker of `job`: parsing, validation and derivation run there, store reads and events here. */
  private async deployWith(job: PipelineJob, ctx: JobContext, workspace: Workspace, archive: PackageArchive, opts: {
    registry: { publisher: string; name: string } | null; autoUpdate: boolean; pinned: boolean; forceUpdate: boolean;
  }): Promise<JobResult> {
    const m = archive.manifest;
    const ws = workspace.id;
    const packageId = this.packageId(ws, m.name);
    // 1. Turtle (and every term checked against what the store accepts).
    const files: Array<{ uri: string; name: string; path: string; text: string }> = [];
    for (const entry of m.matrices) {
      const text = archive.files.get(entry.path);
      if (text === undefined) throw new CommandFailure(`The archive has no file ${entry.path} for matrix ${entry.name}`, 'Add the file or fix manifest.json.');
      files.push({ uri: entry.uri, name: entry.name, path: entry.path, text });
    }
    const parsedOut = await job.parse({ matrices: files, roleIrisOf: { graphsBase: this.graphs.base, workspaceId: ws } });
    const parsed = m.matrices.map((entry, i) => ({ ...parsedOut.matrices[i]!, name: entry.name, uri: entry.uri, id: this.matrixId(ws, entry.uri), path: entry.path }));
    for (const p of parsed) await ctx.event('INFO', `Parsed matrix ${p.name} <${p.uri}> from ${p.path}: ${plural(p.tripleCount, 'triple')}`);
    // 2. Matrices of other packages. Only installed matrices the package's triples mention (or
    // that it owns) matter below: the imports, the context of validation and the moves.
    const extensionQuads = new Map<string, Quad[]>();
    const mentioned = new Set(parsedOut.mentioned);
    const previous = await this.matricesOfPackage(ws, m.name);
    const installedMatrices = [...(await this.matricesAmong(ws, [...mentioned, ...parsed.map((p) => p.uri)]))
      .filter((x) => x.packageName !== m.name), ...previous];
    for (const p of parsed) {
      const owner = installedMatrices.find((x) => x.uri === p.uri && x.packageName !== m.name);
      if (!owner) continue;
      if (!opts.forceUpdate) {
        throw new CommandFailure(`Matrix <${p.uri}> is already installed by package "${owner.packageName}"`,
          'Upload again with forceUpdate=true to move it to this package, or give the matrix another URI.');
      }
      await ctx.event('WARNING', `forceUpdate: matrix <${p.uri}> moves from package "${owner.packageName}" to "${m.name}"`);
    }
    const newUris = new Set(parsed.map((p) => p.uri));
    const dropped = previous.filter((x) => !newUris.has(x.uri));
    const outside = installedMatrices.filter((x) => x.packageName !== m.name && !newUris.has(x.uri));
    // 3. Imports.
    const available = new Set([...newUris, ...outside.map((x) => x.uri)]);
    for (const p of parsed) {
      const missing = p.imports.filter((u) => !available.has(u));
      if (missing.length) {
        throw new CommandFailure(`Matrix ${p.name} imports ${missing.map((u) => `<${u}>`).join(', ')}, which is neither in this package nor installed in the workspace`,
          'Install the package that provides it first, or remove the mtx:imports statement.');
      }
      if (p.imports.length) await ctx.event('INFO', `Matrix ${p.name} imports ${p.imports.map((u) => `<${u}>`).join(', ')}: all available`);
    }
    // 4. Extensions targeting these matrices.
    const extensionOps: WriteOp[] = [];
    if (this.hook) {
      for (const p of parsed) {
        const ext = await this.hook.deploy({ workspaceId: ws, matrixUri: p.uri, matrixId: p.id, commandId: ctx.commandId });
        extensionQuads.set(p.uri, ext.quads);
        extensionOps.push(...ext.ops);
        if (ext.quads.length) await ctx.event('INFO', `Matrix ${p.name}: deploying ${plural(ext.quads.length, 'triple')} of active extensions with it`);
      }
    }
    // 5. SHACL.
    const touched = new Set([...parsed.map((p) => p.id), ...dropped.map((x) => x.id)]);
    // Validation only types the workspace's roles and matrices the validated triples mention.
    const allMentioned = new Set([...mentioned, ...mentionedIris([...extensionQuads.values()].flat())]);
    const extraMatrices = (await this.matricesAmong(ws, [...allMentioned].filter((u) => !mentioned.has(u))))
      .filter((x) => x.packageName !== m.name && !newUris.has(x.uri));
    const mentionedRoles = await this.rolesOutside(ws, touched, [...parsedOut.mentionedRoleIris, ...this.roleIrisFor(ws, [...allMentioned].filter((u) => !mentioned.has(u)))]);
    const context = { roleUris: await this.roleUrisOf(ws, mentionedRoles), matrixUris: [...outside, ...extraMatrices].map((x) => x.uri).sort() };
    const extensions = Object.fromEntries([...extensionQuads].map(([uri, quads]) => [uri, quads.length ? quadsToNTriples(quads) : '']));
    await this.validate(ctx, () => job.validate({ extensions, context, reservedBase: this.graphs.base }));
    // 6. Derive and write.
    const now = this.runner.now();
    const derivedAll = await job.derive({
      graphsBase: this.graphs.base, workspaceId: ws, now,
      matrices: await Promise.all(parsed.map(async (p) => ({ uri: p.uri, id: p.id, createdAt: [...await this.createdAtOf(ws, p.id)] }))),
    });
    const ops: WriteOp[] = [];
    const newRoles = new Set<string>();
    const newPrincipals = new Set<string>();
    let roleCount = 0;
    let agentCount = 0;
    let tripleCount = 0;
    for (const [i, p] of parsed.entries()) {
      const derived = derivedAll[i]!;
      derived.roleIris.forEach((r) => newRoles.add(r));
      derived.principalIris.forEach((q) => newPrincipals.add(q));
      roleCount += derived.roleCount;
      agentCount += derived.agentCount;
      tripleCount += p.tripleCount;
      ops.push(
        updateOp(sparql`DROP SILENT GRAPH ${iri(this.graphs.matrix(ws, p.id))}`, [this.graphs.matrix(ws, p.id)]),
        { kind: 'load', graph: this.graphs.matrix(ws, p.id), format: 'application/n-triples', data: derived.matrixNTriples },
        updateOp(sparql`DROP SILENT GRAPH ${iri(this.graphs.derived(ws, p.id))}`, [this.graphs.derived(ws, p.id)]),
        { kind: 'load', graph: this.graphs.derived(ws, p.id), format: 'application/n-triples', data: derived.derivedNTriples },
        this.matrixRecordOps(ws, { id: p.id, uri: p.uri, name: p.name, description: p.description, dependencyCount: p.imports.length, packageId }),
      );
      await ctx.event('INFO', `Matrix ${p.name}: ${plural(p.tripleCount, 'triple')} for graph ${this.graphs.matrix(ws, p.id)}; derived ${plural(derived.roleCount, 'role')} and ${plural(derived.agentCount, 'agent')}`);
    }
    for (const d of dropped) {
      ops.push(this.dropMatrixOps(ws, d.id));
      await ctx.event('WARNING', `Matrix <${d.uri}> is not in version ${m.version}; it is removed with its roles and agents`);
    }
    if (dropped.length && this.hook?.undeploy) ops.push(...this.hook.undeploy({ workspaceId: ws, matrixUris: dropped.map((d) => d.uri), commandId: ctx.commandId }));
    // Role assignments of roles (and agent principals) that disappear.
    const oldRoles = [...await this.rolesOf(ws, [...touched])].filter((r) => !newRoles.has(r));
    const outsideRoles = await this.rolesOutside(ws, touched, oldRoles);
    const goneRoles = oldRoles.filter((r) => !outsideRoles.has(r));
    const gonePrincipals = [...await this.principalsOf(ws, [...touched])].filter((q) => !newPrincipals.has(q));
    ops.push(...this.assignmentCleanup(ws, goneRoles, gonePrincipals));
    if (goneRoles.length || gonePrincipals.length) {
      await ctx.event('WARNING', `${plural(goneRoles.length, 'role')} and ${plural(gonePrincipals.length, 'agent principal')} no longer exist; their role assignments are removed`);
    }
    ops.push(await this.installationOps(ws, {
      id: packageId, name: m.name, version: m.version, registry: opts.registry, autoUpdate: opts.autoUpdate, now,
      pinned: opts.pinned, dependsOn: m.dependencies.map((d) => d.name),
    }));
    ops.push(...extensionOps);
    await ctx.event('INFO', `Writing ${plural(parsed.length, 'matrix graph')} (${plural(tripleCount, 'triple')}) and ${plural(parsed.length, 'derived graph')} in one atomic write`);
    return {
      ops,
      packageInstallationId: packageId,
      message: `Installed ${m.name} ${m.version}: ${plural(parsed.length, 'matrix')}, ${plural(roleCount, 'role')}, ${plural(agentCount, 'agent')}`.replace(/matrixs/, 'matrices'),
    };
  }

  private async roleUrisOf(workspaceId: string, roleIris: Set<string>): Promise<string[]> {
    if (roleIris.size === 0) return [];
    const rows = await this.store.select(PREFIXES + sparql`SELECT DISTINCT ?uri WHERE { VALUES ?r { ${join([...roleIris].map((r) => iri(r)))} }
      GRAPH ?g { ?r wsm:uri ?uri } FILTER (?g = ${iri(this.graphs.iam(workspaceId))} || (STRSTARTS(STR(?g), ${literal(`${this.graphs.workspacePrefix(workspaceId)}matrices/`)}) && STRENDS(STR(?g), "/derived"))) }`);
    return rows.map((b) => req(b, 'uri'));
  }

  /** Runs SHACL validation (in the job's worker), keeps the report on the command and fails it on a violation. */
  private async validate(ctx: JobContext, run: () => Promise<ValidateOutput>): Promise<ValidationReport> {
    const { report, ntriples } = await run();
    ctx.setReport(report, ntriples);
    const summary = `SHACL validation: ${report.conforms ? 'conforms' : 'does not conform'}; ${plural(report.violationCount, 'violation')}, ${plural(report.warningCount, 'warning')}, ${plural(report.infoCount, 'info')}`;
    await ctx.event(report.violationCount > 0 ? 'ERROR' : report.warningCount > 0 ? 'WARNING' : 'INFO', summary);
    if (report.violationCount > 0) {
      const first = report.results.find((r) => r.severity === 'VIOLATION');
      throw new CommandFailure(`SHACL validation found ${plural(report.violationCount, 'violation')}${first ? ` (first: ${first.message}${first.focusNode ? ` at ${first.focusNode}` : ''})` : ''}`,
        'Read the validation report of this command, fix the matrices and install again; nothing was changed.');
    }
    return report;
  }

  private async installationOps(workspaceId: string, input: {
    id: string; name: string; version: string; registry: { publisher: string; name: string } | null; autoUpdate: boolean; now: string;
    pinned: boolean; dependsOn: string[];
  }): Promise<WriteOp> {
    const g = iri(this.graphs.packages(workspaceId));
    const p = iri(this.packageIri(input.id));
    const existing = await this.installed(workspaceId, input.name);
    const createdAt = existing?.createdAt ?? input.now;
    const registry = (input.registry ? sparql`${p} wsm:registryPublisher ${literal(input.registry.publisher)} ; wsm:registryName ${literal(input.registry.name)} ;
      wsm:pinned ${boolean(input.pinned)} .` : '')
      + input.dependsOn.map((d) => sparql`${p} wsm:dependsOn ${literal(d)} .`).join('\n');
    return updateOp(PREFIXES + [
      sparql`DELETE WHERE { GRAPH ${g} { ${p} ?pp ?o } }`,
      sparql`INSERT DATA { GRAPH ${g} { ${p} a wsm:PackageInstallation ; wsm:id ${literal(input.id)} ; wsm:name ${literal(input.name)} ;
        wsm:currentVersion ${literal(input.version)} ; wsm:autoUpdate ${boolean(input.registry ? input.autoUpdate : false)} ;
        wsm:workspace ${iri(this.graphs.resource('workspace', workspaceId))} ; wsm:createdAt ${dateTime(createdAt)} ; wsm:updatedAt ${dateTime(input.now)} .
        ${raw(registry)} } }`,
    ].join(' ;\n'), [this.graphs.packages(workspaceId)]);
  }

  /** Names of installed packages whose manifest depends on `name`. */
  private async dependentsOf(workspaceId: string, name: string): Promise<string[]> {
    const rows = await this.store.select(PREFIXES + sparql`SELECT DISTINCT ?name WHERE { GRAPH ${iri(this.graphs.packages(workspaceId))} {
      ?p wsm:dependsOn ${literal(name)} ; a wsm:PackageInstallation ; wsm:name ?name } } ORDER BY ?name`);
    return rows.map((b) => req(b, 'name')).filter((n) => n !== name);
  }

  /** P6: removes matrices, their graphs, derived roles/agents/principals and the assignments of those roles. */
  async uninstall(workspace: Workspace, name: string): Promise<LifecycleCommand> {
    const ws = workspace.id;
    const rec = await this.installed(ws, name);
    const busy = this.runner.active(ws, name);
    if (!rec && !busy) throw notFound(`Package "${name}" is not installed in this workspace`);
    const needed = await this.dependentsOf(ws, name);
    if (needed.length) {
      throw conflict(`Package "${name}" cannot be uninstalled: installed package${needed.length === 1 ? '' : 's'} ${needed.map((d) => `"${d}"`).join(', ')} depend${needed.length === 1 ? 's' : ''} on it; uninstall ${needed.length === 1 ? 'it' : 'them'} first`,
        { dependents: needed });
    }
    return this.runner.submit({
      workspaceId: ws, packageName: name, version: rec?.currentVersion ?? busy!.version, commandType: 'UNINSTALL',
      packageInstallationId: rec?.id ?? null, exclusive: true,
      job: async (ctx) => {
        const current = await this.installed(ws, name);
        if (!current) throw new CommandFailure(`Package "${name}" is not installed`, 'Nothing to uninstall.');
        const needing = await this.dependentsOf(ws, name);
        if (needing.length) {
          throw new CommandFailure(`Installed packages ${needing.map((d) => `"${d}"`).join(', ')} depend on "${name}"`, 'Uninstall them first.');
        }
        const matrices = await this.matricesOfPackage(ws, name);
        await ctx.event('INFO', `Removing ${plural(matrices.length, 'matrix')} of ${name} ${current.currentVersion}: ${matrices.map((x) => `<${x.uri}>`).join(', ')}`.replace(/matrixs/, 'matrices'));
        const ids = new Set(matrices.map((x) => x.id));
        const dependents = await this.importers(ws, matrices.map((x) => x.uri), ids);
        if (dependents.length) {
          await ctx.event('WARNING', `Installed matrices of other packages import matrices being removed: ${dependents.map((d) => `<${d}>`).join(', ')}; they keep working but their imports will not resolve until the package is installed again`);
        }
        const ownRoles = [...await this.rolesOf(ws, [...ids])];
        const outsideRoles = await this.rolesOutside(ws, ids, ownRoles);
        const goneRoles = ownRoles.filter((r) => !outsideRoles.has(r));
        const gonePrincipals = [...await this.principalsOf(ws, [...ids])];
        const ops: WriteOp[] = matrices.map((x) => this.dropMatrixOps(ws, x.id));
        ops.push(...this.assignmentCleanup(ws, goneRoles, gonePrincipals));
        ops.push(updateOp(PREFIXES + sparql`DELETE WHERE { GRAPH ${iri(this.graphs.packages(ws))} { ${iri(this.packageIri(current.id))} ?p ?o } }`, [this.graphs.packages(ws)]));
        if (this.hook?.undeploy) ops.push(...this.hook.undeploy({ workspaceId: ws, matrixUris: matrices.map((x) => x.uri), commandId: ctx.commandId }));
        await ctx.event('INFO', `Removing ${plural(goneRoles.length, 'role')}, ${plural(gonePrincipals.length, 'agent principal')} and their role assignments in one atomic write`);
        return { ops, message: `Uninstalled ${name} ${current.currentVersion}` };
      },
    });
  }

  /**
   * Queues a REDEPLOY of one installed matrix (behind any active command of
   * its package): the matrix's roles and agents are derived again from the
   * matrix plus the extensions the hook supplies, validated first. `onOutcome`
   * learns the finished command (completed or failed). 404 when the matrix
   * is not installed.
   */
  async requestRedeploy(workspace: Workspace, matrixUri: string, reason: string, onOutcome?: (command: LifecycleCommand) => void | Promise<void>): Promise<LifecycleCommand> {
    const ws = workspace.id;
    const matrix = await this.findMatrix(ws, matrixUri);
    if (!matrix) throw notFound(`Matrix <${matrixUri}> is not installed in this workspace`);
    const rec = (await this.installed(ws, matrix.packageName))!;
    return this.runner.submit({
      workspaceId: ws, packageName: rec.name, version: rec.currentVersion, commandType: 'REDEPLOY',
      packageInstallationId: rec.id, exclusive: false, ...(onOutcome ? { onOutcome } : {}),
      job: (ctx) => this.pipeline.run(async (job) => {
        await ctx.event('INFO', `Redeploying matrix <${matrixUri}>: ${reason}`);
        const current = await this.findMatrix(ws, matrixUri);
        if (!current) throw new CommandFailure(`Matrix <${matrixUri}> is no longer installed`, 'Install its package again.');
        const parsed = await job.parse({ matrices: [{ uri: matrixUri, name: current.uri, path: 'installed matrix', text: await this.store.dumpGraph(current.graph) }], roleIrisOf: { graphsBase: this.graphs.base, workspaceId: ws } });
        const ext = this.hook ? await this.hook.deploy({ workspaceId: ws, matrixUri, matrixId: current.id, commandId: ctx.commandId }) : { quads: [], ops: [] };
        await ctx.event('INFO', `Read ${plural(parsed.matrices[0]!.tripleCount, 'triple')} of the matrix and ${plural(ext.quads.length, 'triple')} of active extensions`);
        // Validation only types the workspace's roles and matrices the validated triples mention.
        const mentioned = new Set([...parsed.mentioned, ...mentionedIris(ext.quads)]);
        const outside = (await this.matricesAmong(ws, mentioned)).filter((x) => x.id !== current.id);
        const mentionedRoles = await this.rolesOutside(ws, new Set([current.id]), [...parsed.mentionedRoleIris, ...this.roleIrisFor(ws, mentionedIris(ext.quads))]);
        const context = { roleUris: await this.roleUrisOf(ws, mentionedRoles), matrixUris: outside.map((x) => x.uri) };
        const extensions = { [matrixUri]: ext.quads.length ? quadsToNTriples(ext.quads) : '' };
        await this.validate(ctx, () => job.validate({ extensions, context, reservedBase: this.graphs.base }));
        const now = this.runner.now();
        const [derived] = await job.derive({ graphsBase: this.graphs.base, workspaceId: ws, now, matrices: [{ uri: matrixUri, id: current.id, createdAt: [...await this.createdAtOf(ws, current.id)] }] });
        const newPrincipals = new Set(derived!.principalIris);
        const newRoles = new Set(derived!.roleIris);
        const candidates = [...await this.rolesOf(ws, [current.id])].filter((r) => !newRoles.has(r));
        const outsideRoles = await this.rolesOutside(ws, new Set([current.id]), candidates);
        const goneRoles = candidates.filter((r) => !outsideRoles.has(r));
        const gonePrincipals = [...await this.principalsOf(ws, [current.id])].filter((q) => !newPrincipals.has(q));
        const ops: WriteOp[] = [
          updateOp(sparql`DROP SILENT GRAPH ${iri(this.graphs.derived(ws, current.id))}`, [this.graphs.derived(ws, current.id)]),
          { kind: 'load', graph: this.graphs.derived(ws, current.id), format: 'application/n-triples', data: derived!.derivedNTriples },
          ...this.assignmentCleanup(ws, goneRoles, gonePrincipals),
          ...ext.ops,
        ];
        await ctx.event('INFO', `Derived ${plural(derived!.roleCount, 'role')} and ${plural(derived!.agentCount, 'agent')}; writing the derived graph`);
        return { ops, message: `Redeployed matrix <${matrixUri}>` };
      }),
    });
  }

  // ---------------------------------------------------------------- auto-update

  /**
   * P3: a conditional write, applied only while the installation it read is
   * still there (an uninstall or reinstall in between must not leave an
   * auto-update setting on a record that is gone); then the checks run
   * again and answer as they would after it.
   */
  setAutoUpdate(workspace: Workspace, name: string, autoUpdate: boolean): Promise<PackageInstallation> {
    return untilApplied(() => this.setAutoUpdateOnce(workspace, name, autoUpdate),
      () => conflict(`Package "${name}" changed while this request ran; try again`));
  }

  private async setAutoUpdateOnce(workspace: Workspace, name: string, autoUpdate: boolean): Promise<PackageInstallation | typeof NOT_APPLIED> {
    const rec = await this.installed(workspace.id, name);
    if (!rec) throw notFound(`Package "${name}" is not installed in this workspace`);
    if (!rec.registryPublisher) throw badRequest(`Package "${name}" was installed by upload, not from the registry; only registry packages update themselves`);
    const g = iri(this.graphs.packages(workspace.id));
    const p = iri(this.packageIri(rec.id));
    // Setting auto-update again lifts the pin of an explicitly named version (DESIGN.md section 10).
    const there = { ask: PREFIXES + sparql`ASK { GRAPH ${g} { ${p} a wsm:PackageInstallation ; wsm:name ${literal(name)} ; wsm:registryPublisher ?publisher } }`, expect: true };
    const applied = await this.store.writeIf(there, [{ kind: 'update', sparql: PREFIXES + [
      sparql`DELETE WHERE { GRAPH ${g} { ${p} wsm:autoUpdate ?a } }`,
      sparql`DELETE WHERE { GRAPH ${g} { ${p} wsm:pinned ?pinned } }`,
      sparql`INSERT DATA { GRAPH ${g} { ${p} wsm:autoUpdate ${boolean(autoUpdate)} ; wsm:pinned ${boolean(false)} } }`,
    ].join(' ;\n'), graphs: [this.graphs.packages(workspace.id)] }]);
    if (!applied) return NOT_APPLIED;
    return this.get(workspace, name);
  }

  /**
   * One auto-update round: every registry package with autoUpdate whose
   * registry offers a newer compatible version gets an UPDATE command
   * (skipped while the package has an active command). Returns the queued commands.
   */
  async autoUpdateOnce(): Promise<LifecycleCommand[]> {
    // Each workspace's own packages graph only (built from its id), never a graph a package wrote.
    const rows = await this.store.select(PREFIXES + sparql`SELECT ?wsId ?name WHERE {
      GRAPH ${iri(this.graphs.system)} { ?ws a wsm:Workspace ; wsm:id ?wsId }
      BIND (IRI(CONCAT(${literal(`${this.graphs.base}workspaces/`)}, STR(?wsId), "/packages")) AS ?g)
      GRAPH ?g { ?p a wsm:PackageInstallation ; wsm:name ?name ; wsm:autoUpdate true ; wsm:registryPublisher ?pub ; wsm:workspace ?ws } }`);
    const queued: LifecycleCommand[] = [];
    for (const b of rows) {
      const workspace = await this.workspaces.find(req(b, 'wsId'));
      const name = req(b, 'name');
      if (!workspace || this.runner.active(workspace.id, name)) continue;
      const rec = await this.installed(workspace.id, name);
      if (!rec?.registryPublisher || !rec.registryName || !rec.autoUpdate || rec.pinned) continue;
      let versions: RegistryVersion[];
      try {
        versions = await this.registry.versions(rec.registryPublisher, rec.registryName);
      } catch (err) {
        this.logger.warn({ err, package: name }, 'auto-update: registry not reachable');
        continue;
      }
      // Patch releases only: the newest compatible version of the same MAJOR.MINOR.
      const current = parseSemver(rec.currentVersion);
      const newest = current && newestCompatible(versions.filter((v) => {
        const x = parseSemver(v.version);
        return x !== null && x.major === current.major && x.minor === current.minor;
      }), workspace.engineVersion);
      if (!newest || compareSemver(newest.version, rec.currentVersion) <= 0) continue;
      try {
        queued.push(await this.installFromRegistry(workspace, rec.registryPublisher, rec.registryName, { version: newest.version }, 'UPDATE', { auto: true }));
        this.logger.info({ workspace: workspace.slug, package: name, version: newest.version }, 'auto-update queued');
      } catch (err) {
        this.logger.warn({ err, package: name }, 'auto-update could not queue an update');
      }
    }
    return queued;
  }

  /** Starts the auto-update check every `intervalSeconds`; returns a stopper. */
  startAutoUpdate(intervalSeconds: number): () => void {
    let running = false;
    const timer = setInterval(() => {
      if (running) return;
      running = true;
      this.autoUpdateOnce().catch((err: unknown) => this.logger.error({ err }, 'auto-update round failed')).finally(() => { running = false; });
    }, intervalSeconds * 1000);
    timer.unref();
    return () => clearInterval(timer);
  }
}

/** IRIs a set of triples names as subject or object. */
function mentionedIris(quads: Quad[]): Set<string> {
  const out = new Set<string>();
  for (const q of quads) {
    if (q.subject.termType === 'NamedNode') out.add(q.subject.value);
    if (q.object.termType === 'NamedNode') out.add(q.object.value);
  }
  return out;
}

/** An n3 term for a SPARQL JSON binding value (blank nodes keep the store's label). */
/** Lets the event loop turn (timers, sockets) before going on. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
