import type { QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import type { Logger } from '../logger.js';
import type { Workspace, WorkspaceService } from '../workspaces/service.js';
import type { PageQuery, Page } from '../http/paging.js';
import { sharedPipelinePool, type PipelinePool } from './pipeline-pool.js';
import type { Registry } from './registry.js';
import { CommandRunner, CommandStore, type CommandType, type LifecycleCommand, type CommandEvent } from './commands.js';
import { PackageRecords, type MatrixRecord } from './records.js';
import { RegistryReads } from './registry-reads.js';
import { PackageReads, type PackageInstallation, type ValidationReportJson } from './reads.js';
import { Deployment, type ExtensionHook } from './deployment.js';
import { Lifecycle, type RequestBindings } from './lifecycle.js';
import type { SecretsService } from '../secrets/service.js';
import { AutoUpdate } from './auto-update.js';

export type { MatrixSummary, PackageInstallation, ValidationReportJson, ValidationEntry } from './reads.js';
export type { ExtensionHook } from './deployment.js';

/** Settings of the package service. */
export interface PackageServiceOptions {
  /** Limits of uploaded and downloaded archives. */
  maxArchiveBytes: number;
  /** Worker pool of the deployment pipeline; the process's shared pool when absent. */
  pipeline?: PipelinePool;
}

/**
 * Package installations and their lifecycle (docs/packages.md, "Lifecycle"): install
 * from the registry or an upload, update, reinstall, uninstall, redeploy.
 * The HTTP routes call it; the extensions area calls `requestRedeploy`.
 *
 * A facade over the parts that do the work, one job each:
 * - `Lifecycle` (lifecycle.ts): checks requests and submits commands to the
 *   `CommandRunner` (commands.ts); its jobs download, check, resolve dependencies;
 * - `Deployment` (deployment.ts): the matrix graphs, derived graphs and
 *   records a command writes, validated first, in one atomic write;
 * - `RegistryReads` (registry-reads.ts): the registry's latest versions for reads;
 * - `AutoUpdate` (auto-update.ts): the P3 toggle and the auto-update rounds;
 * - `PackageReads` (reads.ts): P4, P5, P7 to P10;
 * - `PackageRecords` (records.ts): the store reads of records they share.
 */
export class PackageService {
  readonly commands: CommandStore;
  readonly runner: CommandRunner;
  private readonly records: PackageRecords;
  private readonly reads: PackageReads;
  private readonly deployment: Deployment;
  private readonly lifecycle: Lifecycle;
  private readonly autoUpdate: AutoUpdate;

  constructor(
    store: QuadStore,
    private readonly graphs: Graphs,
    workspaces: WorkspaceService,
    readonly registry: Registry,
    logger: Logger,
    options: PackageServiceOptions,
  ) {
    this.commands = new CommandStore(store, graphs);
    this.runner = new CommandRunner(this.commands, store, logger);
    this.records = new PackageRecords(store, graphs);
    this.reads = new PackageReads(store, graphs, this.records, this.commands, new RegistryReads(registry, logger));
    this.deployment = new Deployment(store, graphs, workspaces, this.records, this.runner, options.pipeline ?? sharedPipelinePool());
    this.lifecycle = new Lifecycle(this.records, this.deployment, this.runner, registry, { maxArchiveBytes: options.maxArchiveBytes });
    this.autoUpdate = new AutoUpdate(store, graphs, workspaces, this.records, this.reads, this.lifecycle, this.runner, registry, logger);
  }

  /** See `ExtensionHook`. */
  setExtensionHook(hook: ExtensionHook): void { this.deployment.hook = hook; }

  /** Variables and secrets: install requests' bindings, and the declarations each deployment writes (docs/secrets.md). */
  setSecrets(secrets: SecretsService): void {
    this.deployment.secrets = secrets;
    this.lifecycle.secrets = secrets;
  }

  packageId(workspaceId: string, name: string): string { return this.records.packageId(workspaceId, name); }
  matrixId(workspaceId: string, matrixUri: string): string { return this.records.matrixId(workspaceId, matrixUri); }

  /** Installed matrix by URI, or null. */
  findMatrix(workspaceId: string, matrixUri: string): Promise<MatrixRecord | null> { return this.records.findMatrix(workspaceId, matrixUri); }

  // ---------------------------------------------------------------- reads

  /** P4. */
  list(workspace: Workspace, query: PageQuery): Promise<Page<PackageInstallation>> { return this.reads.list(workspace, query); }
  /** P5. */
  get(workspace: Workspace, name: string): Promise<PackageInstallation> { return this.reads.get(workspace, name); }
  /** P7. */
  listCommands(workspace: Workspace, name: string, pageIndex: number, size: number): Promise<LifecycleCommand[]> {
    return this.reads.listCommands(workspace, name, pageIndex, size);
  }
  /** P8. */
  getCommand(workspace: Workspace, commandId: string): Promise<LifecycleCommand> { return this.reads.getCommand(workspace, commandId); }
  /** P10. */
  events(workspace: Workspace, commandId: string): Promise<CommandEvent[]> { return this.reads.events(workspace, commandId); }
  /** P10 live: the command (status first) and its events, read together. */
  async progress(workspace: Workspace, commandId: string): Promise<{ command: LifecycleCommand; events: CommandEvent[] }> {
    const command = await this.reads.getCommand(workspace, commandId);
    return { command, events: await this.commands.events(workspace.id, command.id) };
  }
  /** The graphs whose writes may change a command's record or its events. */
  commandGraphs(workspaceId: string, commandId: string): string[] {
    return [this.graphs.packages(workspaceId), this.graphs.command(workspaceId, commandId)];
  }
  /** P9 as JSON. */
  report(workspace: Workspace, commandId: string): Promise<ValidationReportJson> { return this.reads.report(workspace, commandId); }
  /** P9 as Turtle. */
  reportAsTurtle(workspace: Workspace, commandId: string): Promise<string> { return this.reads.reportAsTurtle(workspace, commandId); }

  // ---------------------------------------------------------------- commands

  /** P1. */
  installFromRegistry(workspace: Workspace, publisher: string, name: string, input: { version?: string | undefined; autoUpdate?: boolean | undefined }, commandType?: CommandType, options: { auto?: boolean; bindings?: RequestBindings } = {}): Promise<LifecycleCommand> {
    return this.lifecycle.installFromRegistry(workspace, publisher, name, input, commandType, options);
  }
  /** P2. */
  installUpload(workspace: Workspace, bytes: Buffer, forceUpdate: boolean, bindings?: RequestBindings): Promise<LifecycleCommand> {
    return this.lifecycle.installUpload(workspace, bytes, forceUpdate, bindings);
  }
  /** P6. */
  uninstall(workspace: Workspace, name: string): Promise<LifecycleCommand> { return this.lifecycle.uninstall(workspace, name); }
  /** See `Lifecycle.requestRedeploy`. */
  requestRedeploy(workspace: Workspace, matrixUri: string, reason: string, onOutcome?: (command: LifecycleCommand) => void | Promise<void>): Promise<LifecycleCommand> {
    return this.lifecycle.requestRedeploy(workspace, matrixUri, reason, onOutcome);
  }

  // ---------------------------------------------------------------- auto-update

  /** P3. */
  setAutoUpdate(workspace: Workspace, name: string, autoUpdate: boolean): Promise<PackageInstallation> {
    return this.autoUpdate.setAutoUpdate(workspace, name, autoUpdate);
  }
  /** One auto-update round; returns the queued commands. */
  autoUpdateOnce(): Promise<LifecycleCommand[]> { return this.autoUpdate.autoUpdateOnce(); }
  /** Starts the auto-update check every `intervalSeconds`; returns a stopper. */
  startAutoUpdate(intervalSeconds: number): () => void { return this.autoUpdate.startAutoUpdate(intervalSeconds); }
}
