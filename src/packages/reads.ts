import type { QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { prefixes } from '../rdf/vocab.js';
import { sparql, iri, join } from '../rdf/sparql.js';
import { UUID_PATTERN } from '../rdf/ids.js';
import { req, str, int } from '../rdf/bindings.js';
import { notFound } from '../errors.js';
import type { Workspace } from '../workspaces/service.js';
import type { PageQuery, Page } from '../http/paging.js';
import { offsetOf, page } from '../http/paging.js';
import { reportTurtle } from './validation.js';
import { ReportReader } from './report-json.js';
import { compareSemver } from './semver.js';
import { GraphCache } from '../store/graph-cache.js';
import type { CommandStore, LifecycleCommand, LifecycleCommandSummary, CommandEvent } from './commands.js';
import type { InstalledRecord, PackageRecords } from './records.js';
import type { RegistryReads } from './registry-reads.js';

/** The MatrixSummary shape (docs/api.md). */
export interface MatrixSummary {
  id: string;
  /** The matrix URI (docs/rdf-model.md). */
  uri: string;
  name: string;
  description: string | null;
  dependencyCount: number;
}

/** The package installation shape of P4 and P5 (docs/api.md). */
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

/** The RDF reads of the packages area: P4, P5, P7, P8, P9 and P10. */
export class PackageReads {
  constructor(
    private readonly store: QuadStore,
    private readonly graphs: Graphs,
    private readonly records: PackageRecords,
    private readonly commands: CommandStore,
    private readonly registryReads: RegistryReads,
  ) {
    this.p5Reads = new GraphCache(store, 1000);
    this.reports = new ReportReader(store);
  }

  /** P9's reads. */
  private readonly reports: ReportReader;

  private async toInstallation(workspace: Workspace, rec: InstalledRecord, matrices: MatrixSummary[], latestCommand?: LifecycleCommandSummary | null): Promise<PackageInstallation> {
    const latestVersion = await this.registryReads.latestFromRegistry(workspace, rec);
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
    const values = join(packageIds.map((id) => iri(this.records.packageIri(id))));
    const rows = await this.store.select(sparql`${prefixes}SELECT ?pid ?id ?uri ?name ?description ?dependencyCount WHERE {
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
    const total = Number((await this.store.select(sparql`${prefixes}SELECT (COUNT(?p) AS ?n) WHERE { GRAPH ${g} { ?p a wsm:PackageInstallation } }`))[0]?.n?.value ?? 0);
    // A page past the last is empty without asking (Virtuoso refuses an OFFSET past 32 bits).
    const records = offsetOf(query) >= total ? [] : await this.records.installedRecords(workspace.id, '', `ORDER BY ?name LIMIT ${query.pageSize} OFFSET ${offsetOf(query)}`);
    const matrices = await this.matrixSummaries(workspace.id, records.map((r) => r.id));
    const items = await Promise.all(records.map((r) => this.toInstallation(workspace, r, matrices.get(r.id) ?? [])));
    return page(items, query, total);
  }

  /** P5's store reads (record, matrices, newest command): all from the workspace's packages graph, kept while it does not change. */
  private readonly p5Reads: GraphCache<{ rec: InstalledRecord; matrices: MatrixSummary[]; latestCommand: LifecycleCommandSummary | null } | null>;

  /** P5. */
  async get(workspace: Workspace, name: string): Promise<PackageInstallation> {
    const found = await this.p5Reads.get(`${workspace.id}\n${name}`, [this.graphs.packages(workspace.id)], async () => {
      const rec = await this.records.installed(workspace.id, name);
      if (!rec) return null;
      return { rec, matrices: (await this.matrixSummaries(workspace.id, [rec.id])).get(rec.id) ?? [], latestCommand: await this.commands.latestSummary(workspace.id, rec.name) };
    });
    if (!found) throw notFound(`Package "${name}" is not installed in this workspace`);
    // Copies: the cached read stays as read whatever a caller does with its answer.
    return this.toInstallation(workspace, { ...found.rec }, found.matrices.map((m) => ({ ...m })), found.latestCommand && { ...found.latestCommand });
  }

  /** P7: 404 when the package is neither installed nor has any command. */
  async listCommands(workspace: Workspace, name: string, pageIndex: number, size: number): Promise<LifecycleCommand[]> {
    if (!await this.records.installed(workspace.id, name) && !await this.commands.hasCommands(workspace.id, name)) {
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
    // The command's own id: the one given may differ in case (UUIDs are matched case-insensitively).
    const { id } = await this.getCommand(workspace, commandId);
    return await this.commands.events(workspace.id, id);
  }

  private async reportNTriples(workspace: Workspace, commandId: string): Promise<string> {
    const { id } = await this.getCommand(workspace, commandId);
    const graph = await this.commands.reportGraph(workspace.id, id);
    if (!graph) throw notFound(`Command ${commandId} has no validation report: it never reached validation`);
    return await this.store.dumpGraph(graph);
  }

  /** P9 as JSON (report-json.ts: one SELECT, kept while the report graph does not change). */
  async report(workspace: Workspace, commandId: string): Promise<ValidationReportJson> {
    const { id } = await this.getCommand(workspace, commandId);
    const graph = await this.commands.reportGraph(workspace.id, id);
    if (!graph) throw notFound(`Command ${commandId} has no validation report: it never reached validation`);
    return this.reports.json(graph);
  }

  /** P9 as Turtle. */
  async reportAsTurtle(workspace: Workspace, commandId: string): Promise<string> {
    return reportTurtle(await this.reportNTriples(workspace, commandId));
  }
}
