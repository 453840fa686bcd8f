import type { Quad } from 'n3';
import type { QuadStore, WriteInput, WriteOp } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import type { WorkspaceService, Workspace } from '../workspaces/service.js';
import { quadsToNTriples } from '../rdf/turtle.js';
import type { ValidationReport } from './validation.js';
import type { PipelineJob, PipelinePool } from './pipeline-pool.js';
import type { DerivedOutput, ParsedMatrix, ParseOutput, ValidateInput } from './pipeline.js';
import type { PackageArchive } from './archive.js';
import type { Manifest } from './manifest.js';
import { CommandFailure, type CommandRunner, type JobContext, type JobResult } from './commands.js';
import { mentionedIris, plural, type MatrixRecord, type PackageRecords } from './records.js';
import { SecretsService, type OpenedBinding } from '../secrets/service.js';
import { DeploymentReads } from './deployment-reads.js';
import { DeploymentWrites } from './deployment-writes.js';
import { SortedIris, withIris, type IriSet } from '../rdf/iri-set.js';

/** Values an install binds to what the package declares (docs/secrets.md); `actor` is who sent them. */
export interface DeployBindings {
  variables: Array<{ uri: string; value: string }>;
  secrets: OpenedBinding[];
  actor: string | null;
}

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

/** What an INSTALL, UPDATE or REINSTALL is asked to record besides the matrices. */
interface InstallOptions {
  registry: { publisher: string; name: string } | null;
  autoUpdate: boolean;
  pinned: boolean;
  forceUpdate: boolean;
  bindings: DeployBindings;
}

/** A matrix a deployment writes: as parsed, with its record id and where its text came from. */
interface DeployedMatrix extends ParsedMatrix {
  id: string;
  name: string;
  /** Its file in the archive ('installed matrix' for a REDEPLOY). */
  path: string;
}

/** A package's matrices as parsed (in the job's worker), and what the parse found in them. */
type ParsedPackage = Omit<ParseOutput, 'matrices'> & { matrices: DeployedMatrix[] };

/**
 * What a deployment command changes, decided before anything is written.
 * Each command makes one (`planInstall`, `planRedeploy`, `planRemoval`);
 * the named steps below check it, add the extensions to it, and turn it
 * into the ops of the command's one atomic write.
 */
interface DeploymentPlan {
  workspaceId: string;
  commandId: string;
  /** The matrices whose graphs it writes: a package's, or the one a REDEPLOY derives again. */
  deployed: DeployedMatrix[];
  /** Installed matrices it removes: an uninstall's, or those an update leaves out. */
  removed: MatrixRecord[];
  /** Ids of the matrices whose derived graphs change (deployed and removed): roles are gone only if no other matrix defines them. */
  touched: Set<string>;
  /** IRIs the deployed triples mention, and the role IRI each would have: what validation must know of the workspace. */
  mentioned: IriSet;
  mentionedRoleIris: IriSet;
  /** Installed matrices outside `touched` that the deployed triples mention (imports, validation context). */
  others: MatrixRecord[];
  /** Per deployed matrix URI, the extensions deployed with it; and the hook's ops for the write (`collectExtensions`). */
  extensions: Map<string, Quad[]>;
  extensionOps: WriteOp[];
}

/**
 * Deployment of matrices (docs/packages.md, "Lifecycle"): the jobs of
 * INSTALL, UPDATE and REINSTALL (`deployPackage`), UNINSTALL (`undeploy`)
 * and REDEPLOY (`redeploy`). Each makes a `DeploymentPlan` and composes the
 * named steps below over it: it validates before it writes and returns
 * every change (matrix graphs, derived graphs, records, role assignments,
 * the extension hook's ops) for one atomic write.
 */
export class Deployment {
  /** See `ExtensionHook`. */
  hook: ExtensionHook | null = null;
  /** Variables and secrets declared by packages; set once by `PackageService.setSecrets`. */
  secrets: SecretsService | null = null;
  private readonly reads: DeploymentReads;
  private readonly writes: DeploymentWrites;

  constructor(
    private readonly store: QuadStore,
    private readonly graphs: Graphs,
    workspaces: WorkspaceService,
    private readonly records: PackageRecords,
    private readonly runner: CommandRunner,
    /** Worker threads that parse, validate and derive packages off the event loop. */
    private readonly pipeline: PipelinePool,
  ) {
    this.reads = new DeploymentReads(store, graphs);
    this.writes = new DeploymentWrites(graphs, workspaces, records);
  }

  // ---------------------------------------------------------------- the jobs

  /**
   * The job of INSTALL / UPDATE / REINSTALL: validates before it writes
   * (Turtle, imports, SHACL), derives roles and agents, and returns every
   * change as ops for one atomic write. Parsing, validation and derivation
   * run on a pipeline worker; store reads and events here.
   */
  deployPackage(ctx: JobContext, workspace: Workspace, archive: PackageArchive, opts: InstallOptions): Promise<JobResult> {
    return this.pipeline.run((job) => this.install(job, ctx, workspace.id, archive, opts));
  }

  private async install(job: PipelineJob, ctx: JobContext, ws: string, archive: PackageArchive, opts: InstallOptions): Promise<JobResult> {
    const m = archive.manifest;
    await this.refuseOutsideDependents(ws, m);
    const parsed = await this.parseArchive(job, ctx, ws, archive);
    const plan = await this.planInstall(ctx, ws, m.name, parsed, opts.forceUpdate);
    await this.checkImports(ctx, plan);
    await this.collectExtensions(plan);
    for (const p of plan.deployed) {
      const quads = plan.extensions.get(p.uri) ?? [];
      if (quads.length) await ctx.event('INFO', `Matrix ${p.name}: deploying ${plural(quads.length, 'triple')} of active extensions with it`);
    }
    await this.validate(ctx, job, plan);
    const declarationOps = await this.bindDeclarations(ctx, ws, m.name, parsed.declarations, plan.deployed, opts.bindings);
    const { now, derived } = await this.derive(job, plan);
    const packageId = this.records.packageId(ws, m.name);
    const ops: WriteInput[] = await this.writeGraphs(ctx, plan, derived, packageId);
    ops.push(...this.removeMatrices(plan));
    for (const d of plan.removed) await ctx.event('WARNING', `Matrix <${d.uri}> is not in version ${m.version}; it is removed with its roles and agents`);
    ops.push(...this.deactivateExtensions(plan));
    const gone = await this.removeGoneAssignments(plan, derived);
    ops.push(...gone.ops);
    if (gone.roles.length || gone.principals.length) {
      await ctx.event('WARNING', `${plural(gone.roles.length, 'role')} and ${plural(gone.principals.length, 'agent principal')} no longer exist; their role assignments are removed`);
    }
    ops.push(...await this.writeInstallationRecord(ws, packageId, m, opts, now));
    ops.push(...plan.extensionOps, ...declarationOps);
    const tripleCount = plan.deployed.reduce((n, p) => n + p.tripleCount, 0);
    await ctx.event('INFO', `Writing ${plural(plan.deployed.length, 'matrix graph')} (${plural(tripleCount, 'triple')}) and ${plural(plan.deployed.length, 'derived graph')} in one atomic write`);
    const roleCount = derived.reduce((n, d) => n + d.roleCount, 0);
    const agentCount = derived.reduce((n, d) => n + d.agentCount, 0);
    return {
      ops,
      packageInstallationId: packageId,
      message: `Installed ${m.name} ${m.version}: ${plural(plan.deployed.length, 'matrix')}, ${plural(roleCount, 'role')}, ${plural(agentCount, 'agent')}`.replace(/matrixs/, 'matrices'),
    };
  }

  /** The job of an UNINSTALL (P6): removes the package's matrices, their graphs, derived roles/agents/principals and the assignments of those roles. */
  async undeploy(ctx: JobContext, ws: string, name: string): Promise<JobResult> {
    const { plan, installation } = await this.planRemoval(ctx, ws, name);
    await ctx.event('INFO', `Removing ${plural(plan.removed.length, 'matrix')} of ${name} ${installation.currentVersion}: ${plan.removed.map((x) => `<${x.uri}>`).join(', ')}`.replace(/matrixs/, 'matrices'));
    await this.warnImporters(ctx, plan);
    const gone = await this.removeGoneAssignments(plan, []);
    const ops: WriteOp[] = [
      ...this.removeMatrices(plan),
      ...gone.ops,
      ...this.writes.dropInstallationRecord(ws, installation.id),
      ...this.deactivateExtensions(plan),
      ...(this.secrets ? await this.secrets.undeployOps(ws, name) : []),
    ];
    await ctx.event('INFO', `Removing ${plural(gone.roles.length, 'role')}, ${plural(gone.principals.length, 'agent principal')} and their role assignments in one atomic write`);
    return { ops, message: `Uninstalled ${name} ${installation.currentVersion}` };
  }

  /** The job of a REDEPLOY: derives one installed matrix's roles and agents again, from the matrix plus the extensions the hook supplies, validated first. */
  redeploy(ctx: JobContext, ws: string, matrixUri: string, reason: string): Promise<JobResult> {
    return this.pipeline.run(async (job) => {
      await ctx.event('INFO', `Redeploying matrix <${matrixUri}>: ${reason}`);
      const plan = await this.planRedeploy(job, ctx, ws, matrixUri);
      const matrix = plan.deployed[0]!;
      await this.collectExtensions(plan);
      await ctx.event('INFO', `Read ${plural(matrix.tripleCount, 'triple')} of the matrix and ${plural(plan.extensions.get(matrixUri)?.length ?? 0, 'triple')} of active extensions`);
      await this.validate(ctx, job, plan);
      const { derived } = await this.derive(job, plan);
      const gone = await this.removeGoneAssignments(plan, derived);
      const ops: WriteInput[] = [
        this.writes.graphLoad(this.graphs.derived(ws, matrix.id), derived[0]!.derivedNTriples),
        ...gone.ops,
        ...plan.extensionOps,
      ];
      await ctx.event('INFO', `Derived ${plural(derived[0]!.roleCount, 'role')} and ${plural(derived[0]!.agentCount, 'agent')}; writing the derived graph`);
      return { ops, message: `Redeployed matrix <${matrixUri}>` };
    });
  }

  // ---------------------------------------------------------------- plans

  /**
   * An install's plan: the package's matrices, those of its installed
   * version it leaves out, and the installed matrices of other packages it
   * mentions. A matrix another package installed moves to this one only
   * with `forceUpdate`.
   */
  private async planInstall(ctx: JobContext, ws: string, packageName: string, parsed: ParsedPackage, forceUpdate: boolean): Promise<DeploymentPlan> {
    // Only installed matrices the package's triples mention (or that it owns) matter: the imports, the context of validation and the moves.
    const mentioned = new SortedIris(parsed.mentioned);
    const previous = await this.records.matricesOfPackage(ws, packageName);
    // The package's own matrices are mentioned by their own triples, as a rule: the mentioned set is then looked in as it is.
    const unmentioned = parsed.matrices.map((p) => p.uri).filter((u) => !mentioned.has(u));
    const mentionedInstalled = await this.records.matricesAmong(ws, mentioned);
    if (unmentioned.length > 0) {
      const seen = new Set(mentionedInstalled.map((x) => x.id));
      mentionedInstalled.push(...(await this.records.matricesAmong(ws, unmentioned)).filter((x) => !seen.has(x.id)));
      mentionedInstalled.sort((a, b) => (a.uri < b.uri ? -1 : a.uri > b.uri ? 1 : 0));
    }
    for (const p of parsed.matrices) {
      const owner = mentionedInstalled.find((x) => x.uri === p.uri && x.packageName !== packageName);
      if (!owner) continue;
      if (!forceUpdate) {
        throw new CommandFailure(`Matrix <${p.uri}> is already installed by package "${owner.packageName}"`,
          'Upload again with forceUpdate=true to move it to this package, or give the matrix another URI.');
      }
      await ctx.event('WARNING', `forceUpdate: matrix <${p.uri}> moves from package "${owner.packageName}" to "${packageName}"`);
    }
    const newUris = new Set(parsed.matrices.map((p) => p.uri));
    const removed = previous.filter((x) => !newUris.has(x.uri));
    const touched = new Set([...parsed.matrices.map((p) => p.id), ...removed.map((x) => x.id)]);
    return {
      workspaceId: ws, commandId: ctx.commandId, deployed: parsed.matrices, removed, touched,
      mentioned, mentionedRoleIris: new SortedIris(parsed.mentionedRoleIris),
      others: mentionedInstalled.filter((x) => !touched.has(x.id)),
      extensions: new Map(), extensionOps: [],
    };
  }

  /** A redeploy's plan: the installed matrix, read back from its graph and parsed again. */
  private async planRedeploy(job: PipelineJob, ctx: JobContext, ws: string, matrixUri: string): Promise<DeploymentPlan> {
    const current = await this.records.findMatrix(ws, matrixUri);
    if (!current) throw new CommandFailure(`Matrix <${matrixUri}> is no longer installed`, 'Install its package again.');
    const name = current.uri;
    const path = 'installed matrix';
    const parsed = await job.parse({ matrices: [{ uri: matrixUri, name, path, text: await this.store.dumpGraph(current.graph) }], roleIrisOf: { graphsBase: this.graphs.base, workspaceId: ws } });
    const mentioned = new SortedIris(parsed.mentioned);
    return {
      workspaceId: ws, commandId: ctx.commandId, deployed: [{ ...parsed.matrices[0]!, uri: matrixUri, id: current.id, name, path }], removed: [], touched: new Set([current.id]),
      mentioned, mentionedRoleIris: new SortedIris(parsed.mentionedRoleIris),
      others: (await this.records.matricesAmong(ws, mentioned)).filter((x) => x.id !== current.id),
      extensions: new Map(), extensionOps: [],
    };
  }

  /** An uninstall's plan: every matrix of the package goes. Refused when the package is not installed or others depend on it. */
  private async planRemoval(ctx: JobContext, ws: string, name: string): Promise<{ plan: DeploymentPlan; installation: { id: string; currentVersion: string } }> {
    const installation = await this.records.installed(ws, name);
    if (!installation) throw new CommandFailure(`Package "${name}" is not installed`, 'Nothing to uninstall.');
    const needing = await this.records.dependentsOf(ws, name);
    if (needing.length) {
      throw new CommandFailure(`Installed packages ${needing.map((d) => `"${d}"`).join(', ')} depend on "${name}"`, 'Uninstall them first.');
    }
    const removed = await this.records.matricesOfPackage(ws, name);
    const plan: DeploymentPlan = {
      workspaceId: ws, commandId: ctx.commandId, deployed: [], removed, touched: new Set(removed.map((x) => x.id)),
      mentioned: new Set(), mentionedRoleIris: new Set(), others: [], extensions: new Map(), extensionOps: [],
    };
    return { plan, installation };
  }

  // ---------------------------------------------------------------- checks

  /** Installed packages that depend on this one must admit the version (checked when the command was asked for too). */
  private async refuseOutsideDependents(ws: string, m: Manifest): Promise<void> {
    const refusing = await this.records.dependentsRefusing(ws, m.name, m.version);
    if (refusing.length) {
      throw new CommandFailure(`${m.name} ${m.version} is outside the range installed packages need: ${refusing.map((d) => `${d.name} needs "${d.versionRange}"`).join(', ')}`,
        `Install a version of ${m.name} inside that range, or update or uninstall ${refusing.length === 1 ? 'that package' : 'those packages'} first.`);
    }
  }

  /** The package's matrices parsed from the archive's files (and every term checked against what the store accepts). */
  private async parseArchive(job: PipelineJob, ctx: JobContext, ws: string, archive: PackageArchive): Promise<ParsedPackage> {
    const m = archive.manifest;
    const files: Array<{ uri: string; name: string; path: string; text: Uint8Array }> = [];
    for (const entry of m.matrices) {
      const text = archive.files.get(entry.path);
      if (text === undefined) throw new CommandFailure(`The archive has no file ${entry.path} for matrix ${entry.name}`, 'Add the file or fix manifest.json.');
      files.push({ uri: entry.uri, name: entry.name, path: entry.path, text });
    }
    const out = await job.parse({ matrices: files, roleIrisOf: { graphsBase: this.graphs.base, workspaceId: ws } });
    const matrices = m.matrices.map((entry, i) => ({ ...out.matrices[i]!, name: entry.name, uri: entry.uri, id: this.records.matrixId(ws, entry.uri), path: entry.path }));
    for (const p of matrices) await ctx.event('INFO', `Parsed matrix ${p.name} <${p.uri}> from ${p.path}: ${plural(p.tripleCount, 'triple')}`);
    return { ...out, matrices };
  }

  /** Every import of a deployed matrix is deployed with it or installed already. */
  private async checkImports(ctx: JobContext, plan: DeploymentPlan): Promise<void> {
    const available = new Set([...plan.deployed.map((p) => p.uri), ...plan.others.map((x) => x.uri)]);
    for (const p of plan.deployed) {
      const missing = p.imports.filter((u) => !available.has(u));
      if (missing.length) {
        throw new CommandFailure(`Matrix ${p.name} imports ${missing.map((u) => `<${u}>`).join(', ')}, which is neither in this package nor installed in the workspace`,
          'Install the package that provides it first, or remove the mtx:imports statement.');
      }
      if (p.imports.length) await ctx.event('INFO', `Matrix ${p.name} imports ${p.imports.map((u) => `<${u}>`).join(', ')}: all available`);
    }
  }

  /** An uninstall warns about installed matrices of other packages that import the removed ones (they stay). */
  private async warnImporters(ctx: JobContext, plan: DeploymentPlan): Promise<void> {
    const importers = await this.reads.importers(plan.workspaceId, plan.removed.map((x) => x.uri), plan.touched);
    if (importers.length) {
      await ctx.event('WARNING', `Installed matrices of other packages import matrices being removed: ${importers.map((d) => `<${d}>`).join(', ')}; they keep working but their imports will not resolve until the package is installed again`);
    }
  }

  /** The extensions the hook deploys with each deployed matrix, into the plan. */
  private async collectExtensions(plan: DeploymentPlan): Promise<void> {
    if (!this.hook) return;
    for (const p of plan.deployed) {
      const ext = await this.hook.deploy({ workspaceId: plan.workspaceId, matrixUri: p.uri, matrixId: p.id, commandId: plan.commandId });
      plan.extensions.set(p.uri, ext.quads);
      plan.extensionOps.push(...ext.ops);
    }
  }

  /**
   * SHACL validation of the deployed matrices with their extensions (in the
   * job's worker): keeps the report on the command and fails it on a
   * violation. Validation only types the workspace's roles and matrices the
   * validated triples mention.
   */
  private async validate(ctx: JobContext, job: PipelineJob, plan: DeploymentPlan): Promise<ValidationReport> {
    const ws = plan.workspaceId;
    const fromExtensions = [...mentionedIris([...plan.extensions.values()].flat())].filter((u) => !plan.mentioned.has(u));
    const extensionMatrices = (await this.records.matricesAmong(ws, fromExtensions)).filter((x) => !plan.touched.has(x.id));
    const roles = await this.reads.rolesOutside(ws, plan.touched, withIris(plan.mentionedRoleIris, this.reads.roleIrisFor(ws, fromExtensions)));
    const context: ValidateInput['context'] = { roleUris: await this.reads.roleUrisOf(ws, roles), matrixUris: [...plan.others, ...extensionMatrices].map((x) => x.uri).sort() };
    const extensions = Object.fromEntries([...plan.extensions].map(([uri, quads]) => [uri, quads.length ? quadsToNTriples(quads) : '']));
    const { report, ntriples } = await job.validate({ extensions, context, reservedBase: this.graphs.base, reportIri: this.graphs.report(ws, ctx.commandId) });
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

  /** The variables and secrets of a deployment; a required one left without a value fails the command, naming it. */
  private async bindDeclarations(ctx: JobContext, ws: string, packageName: string, declarations: ParseOutput['declarations'],
    matrices: Array<{ uri: string; name: string }>, bindings: DeployBindings): Promise<WriteOp[]> {
    if (!this.secrets) return [];
    const undeclared = SecretsService.undeclared(declarations, { variables: bindings.variables.map((b) => b.uri), secrets: bindings.secrets.map((b) => b.uri) });
    if (undeclared) throw new CommandFailure(undeclared, 'Bind only what the package declares.');
    const taken = await this.secrets.declaredElsewhere(ws, packageName, [...declarations.variables, ...declarations.secrets].map((d) => d.uri));
    if (taken.length) {
      throw new CommandFailure(`${taken.map((t) => `<${t.uri}> is already declared by installed package "${t.packageName}"`).join('; ')}`,
        'Give the declaration another URI, or uninstall that package first; nothing was changed.');
    }
    const names = new Map(matrices.map((p) => [p.uri, p.name]));
    const { ops, missing } = await this.secrets.deploymentOps(ws, packageName, declarations, names, bindings, bindings.actor ?? 'system');
    if (missing.length) {
      throw new CommandFailure(`Required declarations have no value: ${missing.join(', ')}`,
        'Install again with a binding for each (variableBindings, secretBindings); nothing was changed.');
    }
    if (declarations.variables.length || declarations.secrets.length) await ctx.event('INFO', `Declares ${plural(declarations.variables.length, 'variable')} and ${plural(declarations.secrets.length, 'managed secret')}; `
      + `${plural(bindings.variables.length + bindings.secrets.length, 'value')} bound by this install`);
    return ops;
  }

  /** Roles and agents derived (in the job's worker) from each deployed matrix and its extensions; resources derived before keep their createdAt. */
  private async derive(job: PipelineJob, plan: DeploymentPlan): Promise<{ now: string; derived: DerivedOutput[] }> {
    const now = this.runner.now();
    const derived = await job.derive({
      graphsBase: this.graphs.base, workspaceId: plan.workspaceId, now,
      matrices: await Promise.all(plan.deployed.map(async (p) => ({ uri: p.uri, id: p.id, createdAt: [...await this.reads.createdAtOf(plan.workspaceId, p.id)] }))),
    });
    return { now, derived };
  }

  // ---------------------------------------------------------------- writes

  /**
   * Each deployed matrix's graph and derived graph, replaced (these loads
   * first: no other op of the write names those graphs, see `WriteOp`'s
   * `replace`), then the matrices' records.
   */
  private async writeGraphs(ctx: JobContext, plan: DeploymentPlan, derived: DerivedOutput[], packageId: string): Promise<WriteInput[]> {
    const ws = plan.workspaceId;
    const loads: WriteInput[] = [];
    const records: WriteOp[] = [];
    for (const [i, p] of plan.deployed.entries()) {
      const d = derived[i]!;
      loads.push(this.writes.graphLoad(this.graphs.matrix(ws, p.id), d.matrixNTriples), this.writes.graphLoad(this.graphs.derived(ws, p.id), d.derivedNTriples));
      records.push(this.writes.matrixRecord(ws, { id: p.id, uri: p.uri, name: p.name, description: p.description, dependencyCount: p.imports.length, packageId }));
      await ctx.event('INFO', `Matrix ${p.name}: ${plural(p.tripleCount, 'triple')} for graph ${this.graphs.matrix(ws, p.id)}; derived ${plural(d.roleCount, 'role')} and ${plural(d.agentCount, 'agent')}`);
    }
    return [...loads, ...records];
  }

  /** Drops the removed matrices: their graphs, derived graphs and records. */
  private removeMatrices(plan: DeploymentPlan): WriteOp[] {
    return plan.removed.map((x) => this.writes.dropMatrix(plan.workspaceId, x.id));
  }

  /** The hook's ops for extensions that target the removed matrices (they stay, inactive). */
  private deactivateExtensions(plan: DeploymentPlan): WriteOp[] {
    if (plan.removed.length === 0 || !this.hook?.undeploy) return [];
    return this.hook.undeploy({ workspaceId: plan.workspaceId, matrixUris: plan.removed.map((x) => x.uri), commandId: plan.commandId });
  }

  /**
   * Roles and agent principals the touched matrices defined that no longer
   * exist (not derived again in `derived`, and, for roles, defined by no
   * other installed matrix), and the deletes of their role assignments.
   */
  private async removeGoneAssignments(plan: DeploymentPlan, derived: DerivedOutput[]): Promise<{ roles: string[]; principals: string[]; ops: WriteOp[] }> {
    const ws = plan.workspaceId;
    const keptRoles = new Set(derived.flatMap((d) => d.roleIris));
    const keptPrincipals = new Set(derived.flatMap((d) => d.principalIris));
    const candidates = [...await this.reads.rolesOf(ws, [...plan.touched])].filter((r) => !keptRoles.has(r));
    const outside = await this.reads.rolesOutside(ws, plan.touched, new Set(candidates));
    const roles = candidates.filter((r) => !outside.has(r));
    const principals = [...await this.reads.principalsOf(ws, [...plan.touched])].filter((q) => !keptPrincipals.has(q));
    return { roles, principals, ops: this.writes.assignmentCleanup(ws, roles, principals) };
  }

  /** The package's installation record; an update keeps the createdAt of the installed one. */
  private async writeInstallationRecord(ws: string, packageId: string, m: Manifest, opts: InstallOptions, now: string): Promise<WriteOp[]> {
    const existing = await this.records.installed(ws, m.name);
    return this.writes.installationRecord(ws, {
      id: packageId, name: m.name, version: m.version, registry: opts.registry, autoUpdate: opts.autoUpdate, createdAt: existing?.createdAt ?? now, now,
      pinned: opts.pinned, dependsOn: m.dependencies.map((d) => d.name), manifest: m,
    });
  }
}
