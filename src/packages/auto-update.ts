import type { QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import type { Logger } from '../logger.js';
import { prefixes } from '../rdf/vocab.js';
import { sparql, sequence, iri, literal, boolean } from '../rdf/sparql.js';
import { req } from '../rdf/bindings.js';
import { badRequest, conflict, notFound } from '../errors.js';
import { NOT_APPLIED, untilApplied } from '../store/conditional.js';
import type { Workspace, WorkspaceService } from '../workspaces/service.js';
import { newestCompatible, type Registry, type RegistryVersion } from './registry.js';
import { compareSemver, parseSemver } from './semver.js';
import type { CommandRunner, LifecycleCommand } from './commands.js';
import type { PackageRecords } from './records.js';
import type { PackageInstallation, PackageReads } from './reads.js';
import type { Lifecycle } from './lifecycle.js';
import { autoUpdateEntryOp, workspacesWithAutoUpdate } from '../workspaces/workspace-index.js';

/** Auto-update (docs/packages.md, "Auto-update"): the P3 toggle and the periodic round that queues UPDATE commands. */
export class AutoUpdate {
  constructor(
    private readonly store: QuadStore,
    private readonly graphs: Graphs,
    private readonly workspaces: WorkspaceService,
    private readonly records: PackageRecords,
    private readonly reads: PackageReads,
    private readonly lifecycle: Lifecycle,
    private readonly runner: CommandRunner,
    private readonly registry: Registry,
    private readonly logger: Logger,
  ) {}

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
    const rec = await this.records.installed(workspace.id, name);
    if (!rec) throw notFound(`Package "${name}" is not installed in this workspace`);
    if (!rec.registryPublisher) throw badRequest(`Package "${name}" was installed by upload, not from the registry; only registry packages update themselves`);
    const g = iri(this.graphs.packages(workspace.id));
    const p = iri(this.records.packageIri(rec.id));
    // Setting auto-update again lifts the pin of an explicitly named version (docs/packages.md, "Auto-update").
    const there = { ask: sparql`${prefixes}ASK { GRAPH ${g} { ${p} a wsm:PackageInstallation ; wsm:name ${literal(name)} ; wsm:registryPublisher ?publisher } }`, expect: true };
    const applied = await this.store.writeIf(there, [{ kind: 'update', sparql: sparql`${prefixes}${sequence([
      sparql`DELETE WHERE { GRAPH ${g} { ${p} wsm:autoUpdate ?a } }`,
      sparql`DELETE WHERE { GRAPH ${g} { ${p} wsm:pinned ?pinned } }`,
      sparql`INSERT DATA { GRAPH ${g} { ${p} wsm:autoUpdate ${boolean(autoUpdate)} ; wsm:pinned ${boolean(false)} } }`,
    ])}`, graphs: [this.graphs.packages(workspace.id)] }, autoUpdateEntryOp(this.graphs, workspace.id, this.records.packageIri(rec.id), autoUpdate)]);
    if (!applied) return NOT_APPLIED;
    return this.reads.get(workspace, name);
  }

  /**
   * One auto-update round: every registry package with autoUpdate whose
   * registry offers a newer compatible version gets an UPDATE command
   * (skipped while the package has an active command). Returns the queued commands.
   */
  async autoUpdateOnce(): Promise<LifecycleCommand[]> {
    // Each workspace's own packages graph only, never a graph a package wrote; only the workspaces the index of
    // workspaces lists such an installation in (src/workspaces/workspace-index.ts), each read naming its graph.
    const rows: Array<{ wsId: string; name: string }> = [];
    for (const wsId of await workspacesWithAutoUpdate(this.store, this.graphs)) {
      const found = await this.store.select(sparql`${prefixes}SELECT ?name WHERE {
        GRAPH ${iri(this.graphs.system)} { ?ws a wsm:Workspace ; wsm:id ${literal(wsId)} }
        GRAPH ${iri(this.graphs.packages(wsId))} { ?p a wsm:PackageInstallation ; wsm:name ?name ; wsm:autoUpdate true ; wsm:registryPublisher ?pub ; wsm:workspace ?ws } }`);
      for (const b of found) rows.push({ wsId, name: req(b, 'name') });
    }
    const queued: LifecycleCommand[] = [];
    for (const b of rows) {
      const workspace = await this.workspaces.find(b.wsId);
      const name = b.name;
      if (!workspace || this.runner.active(workspace.id, name)) continue;
      const rec = await this.records.installed(workspace.id, name);
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
        queued.push(await this.lifecycle.installFromRegistry(workspace, rec.registryPublisher, rec.registryName, { version: newest.version }, 'UPDATE', { auto: true }));
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
