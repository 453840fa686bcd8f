import type { Quad } from 'n3';
import { updateOp, type QuadStore, type WriteInput, type WriteOp } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { prefixes } from '../rdf/vocab.js';
import { sparql, sequence, iri, literal, dateTime, integer, boolean, raw, join } from '../rdf/sparql.js';
import { req } from '../rdf/bindings.js';
import type { WorkspaceService, Workspace } from '../workspaces/service.js';
import { quadsToNTriples } from '../rdf/turtle.js';
import type { ValidationReport } from './validation.js';
import { derivedIds } from './derive.js';
import type { PipelineJob, PipelinePool } from './pipeline-pool.js';
import type { ParseOutput, ValidateOutput } from './pipeline.js';
import type { PackageArchive } from './archive.js';
import type { Manifest } from './manifest.js';
import { CommandFailure, type CommandRunner, type JobContext, type JobResult } from './commands.js';
import { mentionedIris, plural, type PackageRecords } from './records.js';
import { SecretsService, type OpenedBinding } from '../secrets/service.js';

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

/**
 * Deployment of matrices (docs/packages.md, "Lifecycle"): the jobs of INSTALL, UPDATE,
 * REINSTALL, UNINSTALL and REDEPLOY commands. Each validates before it
 * writes and returns every change (matrix graphs, derived graphs, records,
 * role assignments, the extension hook's ops) for one atomic write.
 */
/** Above this many candidate roles, `rolesOutside` reads the roles of the workspace's other matrices instead of looking each up. */
const ROLE_LOOKUP_MAX = 500;

export class Deployment {
  /** See `ExtensionHook`. */
  hook: ExtensionHook | null = null;
  /** Variables and secrets declared by packages; set once by `PackageService.setSecrets`. */
  secrets: SecretsService | null = null;

  constructor(
    private readonly store: QuadStore,
    private readonly graphs: Graphs,
    private readonly workspaces: WorkspaceService,
    private readonly records: PackageRecords,
    private readonly runner: CommandRunner,
    /** Worker threads that parse, validate and derive packages off the event loop. */
    private readonly pipeline: PipelinePool,
  ) {}

  /** URIs of installed matrices (outside `exceptIds`) whose specification imports one of `uris`. */
  private async importers(workspaceId: string, uris: string[], exceptIds: Set<string>): Promise<string[]> {
    if (uris.length === 0) return [];
    // From the imported URIs to the graphs that import them: the cost follows the importers, not the matrices installed.
    const rows = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?m ?id WHERE {
      VALUES ?target { ${join(uris.map((u) => iri(u)))} }
      GRAPH ?g { ?m mtx:imports ?target }
      GRAPH ${iri(this.graphs.packages(workspaceId))} { ?rec wsm:graph ?g ; a wsm:Matrix ; wsm:id ?id } }`);
    return [...new Set(rows.filter((b) => !exceptIds.has(req(b, 'id'))).map((b) => req(b, 'm')))];
  }

  /** Roles defined in the derived graphs of these matrices. */
  private async rolesOf(workspaceId: string, matrixIds: string[]): Promise<Set<string>> {
    if (matrixIds.length === 0) return new Set();
    const values = join(matrixIds.map((id) => iri(this.graphs.derived(workspaceId, id))));
    const rows = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?r WHERE { VALUES ?g { ${values} } GRAPH ?g { ?r a wsm:Role } }`);
    return new Set(rows.map((b) => req(b, 'r')));
  }

  /** Agent principals defined in the derived graphs of these matrices. */
  private async principalsOf(workspaceId: string, matrixIds: string[]): Promise<Set<string>> {
    if (matrixIds.length === 0) return new Set();
    const values = join(matrixIds.map((id) => iri(this.graphs.derived(workspaceId, id))));
    const rows = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?q WHERE { VALUES ?g { ${values} } GRAPH ?g { ?q a wsm:Principal } }`);
    return new Set(rows.map((b) => req(b, 'q')));
  }

  /**
   * Those of `roleIris` that a derived graph of an installed matrix outside
   * `exceptIds` defines. A few hundred candidates are looked up by role in
   * one query. More (every IRI a large package mentions is a candidate,
   * 60,000 for a 120,000-triple one) are matched against the roles of the
   * workspace's other matrices, read once: 500 at a time that cost 120
   * queries, 20 s on a remote engine.
   */
  private async rolesOutside(workspaceId: string, exceptIds: Set<string>, roleIris: Iterable<string>): Promise<Set<string>> {
    const candidates = [...new Set(roleIris)];
    const pk = iri(this.graphs.packages(workspaceId));
    const out = new Set<string>();
    if (candidates.length === 0) return out;
    if (candidates.length <= ROLE_LOOKUP_MAX) {
      const rows = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?r ?id WHERE { VALUES ?r { ${join(candidates.map((r) => iri(r)))} }
        GRAPH ?g { ?r a wsm:Role } FILTER (STRENDS(STR(?g), "/derived"))
        BIND (IRI(SUBSTR(STR(?g), 1, STRLEN(STR(?g)) - 8)) AS ?mg)
        GRAPH ${pk} { ?m wsm:graph ?mg ; a wsm:Matrix ; wsm:id ?id } }`);
      for (const b of rows) if (!exceptIds.has(req(b, 'id'))) out.add(req(b, 'r'));
      return out;
    }
    const wanted = new Set(candidates);
    const except = [...exceptIds].map((id) => literal(id));
    // Every role of the workspace's other matrices (15,000 after a large install): read as IRIs only.
    const roles = await this.store.selectIris(sparql`${prefixes}SELECT DISTINCT ?r WHERE {
      GRAPH ${pk} { ?m a wsm:Matrix ; wsm:id ?id ; wsm:graph ?mg }
      ${raw(except.length ? sparql`FILTER (?id NOT IN (${join(except, ', ')}))` : '')}
      BIND (IRI(CONCAT(STR(?mg), "/derived")) AS ?g)
      GRAPH ?g { ?r a wsm:Role } }`, 'r');
    for (const r of roles) if (wanted.has(r)) out.add(r);
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
      ops.push(updateOp(sparql`${prefixes}DELETE { GRAPH ${iam} { ?a ?p ?o } } WHERE { GRAPH ${iam} {
        VALUES ?r { ${join(roles.map((r) => iri(r)))} } ?a a wsm:RoleAssignment ; wsm:role ?r ; ?p ?o } }`, [this.graphs.iam(workspaceId)]));
    }
    if (principals.length) {
      ops.push(updateOp(sparql`${prefixes}DELETE { GRAPH ${iam} { ?a ?p ?o } } WHERE { GRAPH ${iam} {
        VALUES ?q { ${join(principals.map((q) => iri(q)))} } ?a a wsm:RoleAssignment ; wsm:principal ?q ; ?p ?o } }`, [this.graphs.iam(workspaceId)]));
    }
    return ops;
  }

  /** createdAt of resources in a derived graph, so a redeploy keeps them. */
  private async createdAtOf(workspaceId: string, matrixId: string): Promise<Map<string, string>> {
    const rows = await this.store.select(sparql`${prefixes}SELECT ?s ?t WHERE { GRAPH ${iri(this.graphs.derived(workspaceId, matrixId))} { ?s wsm:createdAt ?t } }`);
    return new Map(rows.map((b) => [req(b, 's'), req(b, 't')]));
  }

  private matrixRecordOps(workspaceId: string, input: { id: string; uri: string; name: string; description: string | null; dependencyCount: number; packageId: string }): WriteOp {
    const g = iri(this.graphs.packages(workspaceId));
    const m = iri(this.records.matrixIri(input.id));
    const description = input.description !== null ? sparql`${m} wsm:description ${literal(input.description)} .` : '';
    return updateOp(sparql`${prefixes}${sequence([
      sparql`DELETE WHERE { GRAPH ${g} { ${m} ?p ?o } }`,
      sparql`INSERT DATA { GRAPH ${g} { ${m} a wsm:Matrix ; wsm:id ${literal(input.id)} ; wsm:uri ${iri(input.uri)} ; wsm:name ${literal(input.name)} ;
        wsm:dependencyCount ${integer(input.dependencyCount)} ; wsm:package ${iri(this.records.packageIri(input.packageId))} ;
        wsm:graph ${iri(this.graphs.matrix(workspaceId, input.id))} ; wsm:workspace ${iri(this.graphs.resource('workspace', workspaceId))} .
        ${raw(description)} } }`,
    ])}`, [this.graphs.packages(workspaceId)]);
  }

  private dropMatrixOps(workspaceId: string, matrixId: string): WriteOp {
    const g = iri(this.graphs.packages(workspaceId));
    return updateOp(sparql`${prefixes}${sequence([
      sparql`DROP SILENT GRAPH ${iri(this.graphs.matrix(workspaceId, matrixId))}`,
      sparql`DROP SILENT GRAPH ${iri(this.graphs.derived(workspaceId, matrixId))}`,
      sparql`DELETE WHERE { GRAPH ${g} { ${iri(this.records.matrixIri(matrixId))} ?p ?o } }`,
    ])}`, [this.graphs.matrix(workspaceId, matrixId), this.graphs.derived(workspaceId, matrixId), this.graphs.packages(workspaceId)]);
  }

  /**
   * The heart of INSTALL / UPDATE / REINSTALL: validates before it writes
   * (Turtle, imports, SHACL), derives roles and agents, and returns every
   * change as ops for one atomic write.
   */
  async deployPackage(ctx: JobContext, workspace: Workspace, archive: PackageArchive, opts: {
    registry: { publisher: string; name: string } | null; autoUpdate: boolean; pinned: boolean; forceUpdate: boolean; bindings: DeployBindings;
  }): Promise<JobResult> {
    return this.pipeline.run((job) => this.deployWith(job, ctx, workspace, archive, opts));
  }

  /** deployPackage on the worker of `job`: parsing, validation and derivation run there, store reads and events here. */
  private async deployWith(job: PipelineJob, ctx: JobContext, workspace: Workspace, archive: PackageArchive, opts: {
    registry: { publisher: string; name: string } | null; autoUpdate: boolean; pinned: boolean; forceUpdate: boolean; bindings: DeployBindings;
  }): Promise<JobResult> {
    const m = archive.manifest;
    const ws = workspace.id;
    const packageId = this.records.packageId(ws, m.name);
    // 0. Installed packages that depend on this one must admit the version (checked when the command was asked for too).
    const refusing = await this.records.dependentsRefusing(ws, m.name, m.version);
    if (refusing.length) {
      throw new CommandFailure(`${m.name} ${m.version} is outside the range installed packages need: ${refusing.map((d) => `${d.name} needs "${d.versionRange}"`).join(', ')}`,
        `Install a version of ${m.name} inside that range, or update or uninstall ${refusing.length === 1 ? 'that package' : 'those packages'} first.`);
    }
    // 1. Turtle (and every term checked against what the store accepts).
    const files: Array<{ uri: string; name: string; path: string; text: Uint8Array }> = [];
    for (const entry of m.matrices) {
      const text = archive.files.get(entry.path);
      if (text === undefined) throw new CommandFailure(`The archive has no file ${entry.path} for matrix ${entry.name}`, 'Add the file or fix manifest.json.');
      files.push({ uri: entry.uri, name: entry.name, path: entry.path, text });
    }
    const parsedOut = await job.parse({ matrices: files, roleIrisOf: { graphsBase: this.graphs.base, workspaceId: ws } });
    const parsed = m.matrices.map((entry, i) => ({ ...parsedOut.matrices[i]!, name: entry.name, uri: entry.uri, id: this.records.matrixId(ws, entry.uri), path: entry.path }));
    for (const p of parsed) await ctx.event('INFO', `Parsed matrix ${p.name} <${p.uri}> from ${p.path}: ${plural(p.tripleCount, 'triple')}`);
    // 2. Matrices of other packages. Only installed matrices the package's triples mention (or
    // that it owns) matter below: the imports, the context of validation and the moves.
    const extensionQuads = new Map<string, Quad[]>();
    const mentioned = new Set(parsedOut.mentioned);
    const previous = await this.records.matricesOfPackage(ws, m.name);
    const installedMatrices = [...(await this.records.matricesAmong(ws, [...mentioned, ...parsed.map((p) => p.uri)]))
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
    const extraMatrices = (await this.records.matricesAmong(ws, [...allMentioned].filter((u) => !mentioned.has(u))))
      .filter((x) => x.packageName !== m.name && !newUris.has(x.uri));
    const mentionedRoles = await this.rolesOutside(ws, touched, [...parsedOut.mentionedRoleIris, ...this.roleIrisFor(ws, [...allMentioned].filter((u) => !mentioned.has(u)))]);
    const context = { roleUris: await this.roleUrisOf(ws, mentionedRoles), matrixUris: [...outside, ...extraMatrices].map((x) => x.uri).sort() };
    const extensions = Object.fromEntries([...extensionQuads].map(([uri, quads]) => [uri, quads.length ? quadsToNTriples(quads) : '']));
    await this.validate(ctx, () => job.validate({ extensions, context, reservedBase: this.graphs.base, reportIri: this.graphs.report(ws, ctx.commandId) }));
    // 6. Variables and secrets the matrices declare, with their values.
    const declarationOps = await this.declarationOps(ctx, ws, m.name, parsedOut.declarations, parsed, opts.bindings);
    // 7. Derive and write.
    const now = this.runner.now();
    const derivedAll = await job.derive({
      graphsBase: this.graphs.base, workspaceId: ws, now,
      matrices: await Promise.all(parsed.map(async (p) => ({ uri: p.uri, id: p.id, createdAt: [...await this.createdAtOf(ws, p.id)] }))),
    });
    // The graphs' loads go first (no other op of the write names those graphs): see `WriteOp`'s `replace`.
    const graphLoads: WriteInput[] = [];
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
      graphLoads.push(
        { kind: 'load', replace: true, graph: this.graphs.matrix(ws, p.id), format: 'application/n-triples', data: derived.matrixNTriples },
        { kind: 'load', replace: true, graph: this.graphs.derived(ws, p.id), format: 'application/n-triples', data: derived.derivedNTriples },
      );
      ops.push(this.matrixRecordOps(ws, { id: p.id, uri: p.uri, name: p.name, description: p.description, dependencyCount: p.imports.length, packageId }));
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
      pinned: opts.pinned, dependsOn: m.dependencies.map((d) => d.name), manifest: m,
    }));
    ops.push(...extensionOps, ...declarationOps);
    await ctx.event('INFO', `Writing ${plural(parsed.length, 'matrix graph')} (${plural(tripleCount, 'triple')}) and ${plural(parsed.length, 'derived graph')} in one atomic write`);
    return {
      ops: [...graphLoads, ...ops],
      packageInstallationId: packageId,
      message: `Installed ${m.name} ${m.version}: ${plural(parsed.length, 'matrix')}, ${plural(roleCount, 'role')}, ${plural(agentCount, 'agent')}`.replace(/matrixs/, 'matrices'),
    };
  }

  /** The variables and secrets of a deployment; a required one left without a value fails the command, naming it. */
  private async declarationOps(ctx: JobContext, ws: string, packageName: string, declarations: ParseOutput['declarations'],
    parsed: Array<{ uri: string; name: string }>, bindings: DeployBindings): Promise<WriteOp[]> {
    if (!this.secrets) return [];
    const undeclared = SecretsService.undeclared(declarations, { variables: bindings.variables.map((b) => b.uri), secrets: bindings.secrets.map((b) => b.uri) });
    if (undeclared) throw new CommandFailure(undeclared, 'Bind only what the package declares.');
    const taken = await this.secrets.declaredElsewhere(ws, packageName, [...declarations.variables, ...declarations.secrets].map((d) => d.uri));
    if (taken.length) {
      throw new CommandFailure(`${taken.map((t) => `<${t.uri}> is already declared by installed package "${t.packageName}"`).join('; ')}`,
        'Give the declaration another URI, or uninstall that package first; nothing was changed.');
    }
    const names = new Map(parsed.map((p) => [p.uri, p.name]));
    const { ops, missing } = await this.secrets.deploymentOps(ws, packageName, declarations, names, bindings, bindings.actor ?? 'system');
    if (missing.length) {
      throw new CommandFailure(`Required declarations have no value: ${missing.join(', ')}`,
        'Install again with a binding for each (variableBindings, secretBindings); nothing was changed.');
    }
    if (declarations.variables.length || declarations.secrets.length) await ctx.event('INFO', `Declares ${plural(declarations.variables.length, 'variable')} and ${plural(declarations.secrets.length, 'managed secret')}; `
      + `${plural(bindings.variables.length + bindings.secrets.length, 'value')} bound by this install`);
    return ops;
  }

  private async roleUrisOf(workspaceId: string, roleIris: Set<string>): Promise<string[]> {
    if (roleIris.size === 0) return [];
    const rows = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?uri WHERE { VALUES ?r { ${join([...roleIris].map((r) => iri(r)))} }
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
    /** Kept on the record: its dependency ranges are checked when a package it depends on changes version. */
    manifest: Manifest;
  }): Promise<WriteOp> {
    const g = iri(this.graphs.packages(workspaceId));
    const p = iri(this.records.packageIri(input.id));
    const existing = await this.records.installed(workspaceId, input.name);
    const createdAt = existing?.createdAt ?? input.now;
    const registry = (input.registry ? sparql`${p} wsm:registryPublisher ${literal(input.registry.publisher)} ; wsm:registryName ${literal(input.registry.name)} ;
      wsm:pinned ${boolean(input.pinned)} .` : '')
      + input.dependsOn.map((d) => sparql`${p} wsm:dependsOn ${literal(d)} .`).join('\n');
    return updateOp(sparql`${prefixes}${sequence([
      sparql`DELETE WHERE { GRAPH ${g} { ${p} ?pp ?o } }`,
      sparql`INSERT DATA { GRAPH ${g} { ${p} a wsm:PackageInstallation ; wsm:id ${literal(input.id)} ; wsm:name ${literal(input.name)} ;
        wsm:currentVersion ${literal(input.version)} ; wsm:autoUpdate ${boolean(input.registry ? input.autoUpdate : false)} ;
        wsm:workspace ${iri(this.graphs.resource('workspace', workspaceId))} ; wsm:createdAt ${dateTime(createdAt)} ; wsm:updatedAt ${dateTime(input.now)} ;
        wsm:manifest ${literal(JSON.stringify(input.manifest))} .
        ${raw(registry)} } }`,
    ])}`, [this.graphs.packages(workspaceId)]);
  }

  /** The job of an UNINSTALL (P6): removes the package's matrices, their graphs, derived roles/agents/principals and the assignments of those roles. */
  async undeploy(ctx: JobContext, ws: string, name: string): Promise<JobResult> {
    const current = await this.records.installed(ws, name);
    if (!current) throw new CommandFailure(`Package "${name}" is not installed`, 'Nothing to uninstall.');
    const needing = await this.records.dependentsOf(ws, name);
    if (needing.length) {
      throw new CommandFailure(`Installed packages ${needing.map((d) => `"${d}"`).join(', ')} depend on "${name}"`, 'Uninstall them first.');
    }
    const matrices = await this.records.matricesOfPackage(ws, name);
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
    ops.push(updateOp(sparql`${prefixes}DELETE WHERE { GRAPH ${iri(this.graphs.packages(ws))} { ${iri(this.records.packageIri(current.id))} ?p ?o } }`, [this.graphs.packages(ws)]));
    if (this.hook?.undeploy) ops.push(...this.hook.undeploy({ workspaceId: ws, matrixUris: matrices.map((x) => x.uri), commandId: ctx.commandId }));
    if (this.secrets) ops.push(...await this.secrets.undeployOps(ws, name));
    await ctx.event('INFO', `Removing ${plural(goneRoles.length, 'role')}, ${plural(gonePrincipals.length, 'agent principal')} and their role assignments in one atomic write`);
    return { ops, message: `Uninstalled ${name} ${current.currentVersion}` };
  }

  /** The job of a REDEPLOY: derives one installed matrix's roles and agents again, from the matrix plus the extensions the hook supplies, validated first. */
  redeploy(ctx: JobContext, ws: string, matrixUri: string, reason: string): Promise<JobResult> {
    return this.pipeline.run(async (job) => {
      await ctx.event('INFO', `Redeploying matrix <${matrixUri}>: ${reason}`);
      const current = await this.records.findMatrix(ws, matrixUri);
      if (!current) throw new CommandFailure(`Matrix <${matrixUri}> is no longer installed`, 'Install its package again.');
      const parsed = await job.parse({ matrices: [{ uri: matrixUri, name: current.uri, path: 'installed matrix', text: await this.store.dumpGraph(current.graph) }], roleIrisOf: { graphsBase: this.graphs.base, workspaceId: ws } });
      const ext = this.hook ? await this.hook.deploy({ workspaceId: ws, matrixUri, matrixId: current.id, commandId: ctx.commandId }) : { quads: [], ops: [] };
      await ctx.event('INFO', `Read ${plural(parsed.matrices[0]!.tripleCount, 'triple')} of the matrix and ${plural(ext.quads.length, 'triple')} of active extensions`);
      // Validation only types the workspace's roles and matrices the validated triples mention.
      const mentioned = new Set([...parsed.mentioned, ...mentionedIris(ext.quads)]);
      const outside = (await this.records.matricesAmong(ws, mentioned)).filter((x) => x.id !== current.id);
      const mentionedRoles = await this.rolesOutside(ws, new Set([current.id]), [...parsed.mentionedRoleIris, ...this.roleIrisFor(ws, mentionedIris(ext.quads))]);
      const context = { roleUris: await this.roleUrisOf(ws, mentionedRoles), matrixUris: outside.map((x) => x.uri) };
      const extensions = { [matrixUri]: ext.quads.length ? quadsToNTriples(ext.quads) : '' };
      await this.validate(ctx, () => job.validate({ extensions, context, reservedBase: this.graphs.base, reportIri: this.graphs.report(ws, ctx.commandId) }));
      const now = this.runner.now();
      const [derived] = await job.derive({ graphsBase: this.graphs.base, workspaceId: ws, now, matrices: [{ uri: matrixUri, id: current.id, createdAt: [...await this.createdAtOf(ws, current.id)] }] });
      const newPrincipals = new Set(derived!.principalIris);
      const newRoles = new Set(derived!.roleIris);
      const candidates = [...await this.rolesOf(ws, [current.id])].filter((r) => !newRoles.has(r));
      const outsideRoles = await this.rolesOutside(ws, new Set([current.id]), candidates);
      const goneRoles = candidates.filter((r) => !outsideRoles.has(r));
      const gonePrincipals = [...await this.principalsOf(ws, [current.id])].filter((q) => !newPrincipals.has(q));
      const ops: WriteInput[] = [
        { kind: 'load', replace: true, graph: this.graphs.derived(ws, current.id), format: 'application/n-triples', data: derived!.derivedNTriples },
        ...this.assignmentCleanup(ws, goneRoles, gonePrincipals),
        ...ext.ops,
      ];
      await ctx.event('INFO', `Derived ${plural(derived!.roleCount, 'role')} and ${plural(derived!.agentCount, 'agent')}; writing the derived graph`);
      return { ops, message: `Redeployed matrix <${matrixUri}>` };
    });
  }
}
