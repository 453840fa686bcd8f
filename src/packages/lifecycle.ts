import { AppError, badRequest, conflict, notFound } from '../errors.js';
import type { Workspace, WorkspaceAccess } from '../workspaces/service.js';
import { SecretsService, type OpenedBinding, type SealedFromClient } from '../secrets/service.js';
import { declarationsOfArchive } from '../secrets/archive-declarations.js';
import { readPackageArchive, type PackageArchive } from './archive.js';
import { resolveVersion, type Dependency, type Registry, type RegistryVersion } from './registry.js';
import { ensureDependencies, type DependencyHost } from './dependencies.js';
import { engineAdmits } from './engine-range.js';
import type { Manifest } from './manifest.js';
import { CommandFailure, type CommandRunner, type CommandType, type Job, type LifecycleCommand } from './commands.js';
import { plural, type InstalledRecord, type PackageRecords } from './records.js';
import type { Deployment, DeployBindings } from './deployment.js';

/** The variable and secret bindings an install request carries (docs/secrets.md), with who sends them. */
export interface RequestBindings {
  access: WorkspaceAccess;
  username: string;
  variables: Array<{ uri: string; value: string }>;
  secrets: Array<SealedFromClient & { uri: string }>;
}

const NO_BINDINGS: DeployBindings = { variables: [], secrets: [], actor: null };

/**
 * The lifecycle of package installations (docs/packages.md, "Lifecycle"): checks a
 * request, then submits its command to the runner (install from the
 * registry or an upload, update, reinstall, uninstall, redeploy); the
 * commands' jobs download and check archives, resolve dependencies and hand
 * the package to the deployment.
 */
export class Lifecycle {
  /** Variables and secrets; set once by `PackageService.setSecrets`. */
  secrets: SecretsService | null = null;

  constructor(
    private readonly records: PackageRecords,
    private readonly deployment: Deployment,
    private readonly runner: CommandRunner,
    readonly registry: Registry,
    private readonly options: { maxArchiveBytes: number },
  ) {}

  private async commandTypeFor(workspaceId: string, name: string, version: string): Promise<{ type: CommandType; existing: InstalledRecord | null }> {
    const existing = await this.records.installed(workspaceId, name);
    if (!existing) return { type: 'INSTALL', existing };
    return { type: existing.currentVersion === version ? 'REINSTALL' : 'UPDATE', existing };
  }

  /**
   * P1: resolves publisher, name and version now (404 unknown, 400
   * ENGINE_INCOMPATIBLE); download and archive checks run in the command.
   * A version named explicitly pins the package (auto-update leaves it);
   * `auto` marks auto-update's own UPDATE, which never pins.
   */
  async installFromRegistry(workspace: Workspace, publisher: string, name: string, input: { version?: string | undefined; autoUpdate?: boolean | undefined }, commandType?: CommandType, options: { auto?: boolean; bindings?: RequestBindings } = {}): Promise<LifecycleCommand> {
    const versions = await this.registry.versions(publisher, name);
    const resolved = resolveVersion(versions, workspace.engineVersion, input.version);
    await this.refuseOutsideDependents(workspace, name, resolved.version);
    const bindings = hasBindings(options.bindings)
      ? await this.openBindings(await readPackageArchive(await this.registry.download(publisher, name, resolved.version), { maxArchiveBytes: this.options.maxArchiveBytes }), options.bindings)
      : NO_BINDINGS;
    const { type, existing } = await this.commandTypeFor(workspace.id, name, resolved.version);
    const autoUpdate = input.autoUpdate ?? existing?.autoUpdate ?? false;
    const pinned = input.version !== undefined && !options.auto;
    return this.runner.submit({
      workspaceId: workspace.id, packageName: name, version: resolved.version, commandType: commandType ?? type,
      packageInstallationId: existing?.id ?? null, exclusive: true,
      job: this.registryJob(workspace, publisher, name, resolved, { autoUpdate, pinned, named: input.version !== undefined && !options.auto, chain: [name], bindings }),
    });
  }

  /**
   * An install request's bindings checked against what the package declares
   * (400 for a binding of something undeclared or named twice) and its
   * secret values opened now, each keyId used once.
   */
  private async openBindings(archive: PackageArchive, bindings: RequestBindings): Promise<DeployBindings> {
    const declarations = declarationsOfArchive(archive);
    const twice = (uris: string[]) => uris.find((u, i) => uris.indexOf(u) !== i);
    const repeated = twice(bindings.variables.map((b) => b.uri));
    if (repeated) throw badRequest(`variableBindings names <${repeated}> twice`);
    const undeclared = SecretsService.undeclared(declarations, { variables: bindings.variables.map((b) => b.uri), secrets: bindings.secrets.map((b) => b.uri) });
    if (undeclared) throw badRequest(undeclared);
    const secrets: OpenedBinding[] = this.secrets ? await this.secrets.openBindings(bindings.access, bindings.username, bindings.secrets) : [];
    return { variables: bindings.variables.map(({ uri, value }) => ({ uri, value })), secrets, actor: bindings.username };
  }

  /** The job of a registry install: download, check, dependencies, deploy. */
  private registryJob(workspace: Workspace, publisher: string, name: string, resolved: RegistryVersion,
    opts: { autoUpdate: boolean; pinned: boolean; named: boolean; chain: string[]; bindings?: DeployBindings }): Job {
    return async (ctx) => {
      if (resolved.yanked && opts.named) {
        await ctx.event('WARNING', `Version ${resolved.version} of ${publisher}/${name} is yanked; it is installed because it was named explicitly`);
      }
      await ctx.event('INFO', `Downloading ${publisher}/${name} ${resolved.version} from the registry`);
      let bytes: Buffer;
      try {
        bytes = await this.registry.download(publisher, name, resolved.version, ctx.signal);
      } catch (err) {
        ctx.signal.throwIfAborted();
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
      return this.deployment.deployPackage(ctx, workspace, archive, {
        registry: { publisher, name }, autoUpdate: opts.autoUpdate, pinned: opts.pinned, forceUpdate: false, bindings: opts.bindings ?? NO_BINDINGS,
      });
    };
  }

  /** How dependency resolution reads the workspace and runs child installs. */
  private readonly dependencyHost: DependencyHost = ((service: Lifecycle) => ({
    get registry() { return service.registry; },
    installedVersion: async (workspaceId, name) => (await this.records.installed(workspaceId, name))?.currentVersion ?? null,
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
  async installUpload(workspace: Workspace, bytes: Buffer, forceUpdate: boolean, requestBindings?: RequestBindings): Promise<LifecycleCommand> {
    const archive = await readPackageArchive(bytes, { maxArchiveBytes: this.options.maxArchiveBytes });
    const m = archive.manifest;
    if (!engineAdmits(m.engineVersion, workspace.engineVersion)) {
      throw new AppError('ENGINE_INCOMPATIBLE', `Package ${m.name} ${m.version} needs engine ${m.engineVersion}; workspace "${workspace.slug}" runs ${workspace.engineVersion}`,
        { engineVersion: m.engineVersion, workspaceEngineVersion: workspace.engineVersion });
    }
    await this.refuseOutsideDependents(workspace, m.name, m.version);
    const { type, existing } = await this.commandTypeFor(workspace.id, m.name, m.version);
    const bindings = hasBindings(requestBindings) ? await this.openBindings(archive, requestBindings) : NO_BINDINGS;
    return this.runner.submit({
      workspaceId: workspace.id, packageName: m.name, version: m.version, commandType: type,
      packageInstallationId: existing?.id ?? null, exclusive: false,
      job: async (ctx) => {
        await ctx.event('INFO', `Read the uploaded archive (${bytes.length} bytes, sha256 ${archive.sha256}): ${this.describeManifest(m)}${forceUpdate ? '; forceUpdate is on' : ''}`);
        // Queued behind another command of the package, the installed version may have changed meanwhile.
        const actualType = (await this.commandTypeFor(workspace.id, m.name, m.version)).type;
        await ensureDependencies(this.dependencyHost, ctx, workspace, m, [m.name]);
        const result = await this.deployment.deployPackage(ctx, workspace, archive, { registry: null, autoUpdate: false, pinned: false, forceUpdate, bindings });
        return { ...result, commandType: actualType };
      },
    });
  }

  /**
   * 409 when installed packages that depend on `name` need it in a range
   * that `version` is outside of, as P6 refuses to remove a package others
   * depend on (the job checks again when it runs: `deployPackage`).
   */
  private async refuseOutsideDependents(workspace: Workspace, name: string, version: string): Promise<void> {
    const refusing = await this.records.dependentsRefusing(workspace.id, name, version);
    if (refusing.length === 0) return;
    throw conflict(`Package "${name}" cannot be installed at version ${version}: ${refusing.map((d) => `installed package "${d.name}" needs it in "${d.versionRange}"`).join(', ')}; `
      + `choose a version inside ${refusing.length === 1 ? 'that range' : 'those ranges'}, or update or uninstall ${refusing.length === 1 ? 'that package' : 'those packages'} first`,
      { dependents: refusing.map((d) => d.name), ranges: refusing.map((d) => ({ package: d.name, versionRange: d.versionRange })) });
  }

  /** P6: removes matrices, their graphs, derived roles/agents/principals and the assignments of those roles. */
  async uninstall(workspace: Workspace, name: string): Promise<LifecycleCommand> {
    const ws = workspace.id;
    const rec = await this.records.installed(ws, name);
    const busy = this.runner.active(ws, name);
    if (!rec && !busy) throw notFound(`Package "${name}" is not installed in this workspace`);
    const needed = await this.records.dependentsOf(ws, name);
    if (needed.length) {
      throw conflict(`Package "${name}" cannot be uninstalled: installed package${needed.length === 1 ? '' : 's'} ${needed.map((d) => `"${d}"`).join(', ')} depend${needed.length === 1 ? 's' : ''} on it; uninstall ${needed.length === 1 ? 'it' : 'them'} first`,
        { dependents: needed });
    }
    return this.runner.submit({
      workspaceId: ws, packageName: name, version: rec?.currentVersion ?? busy!.version, commandType: 'UNINSTALL',
      packageInstallationId: rec?.id ?? null, exclusive: true,
      job: (ctx) => this.deployment.undeploy(ctx, ws, name),
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
    const matrix = await this.records.findMatrix(ws, matrixUri);
    if (!matrix) throw notFound(`Matrix <${matrixUri}> is not installed in this workspace`);
    const rec = (await this.records.installed(ws, matrix.packageName))!;
    return this.runner.submit({
      workspaceId: ws, packageName: rec.name, version: rec.currentVersion, commandType: 'REDEPLOY',
      packageInstallationId: rec.id, exclusive: false, ...(onOutcome ? { onOutcome } : {}),
      job: (ctx) => this.deployment.redeploy(ctx, ws, matrixUri, reason),
    });
  }
}

const hasBindings = (b: RequestBindings | undefined): b is RequestBindings => !!b && (b.variables.length > 0 || b.secrets.length > 0);
