import type { QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { prefixes } from '../rdf/vocab.js';
import { sparql, iri, join } from '../rdf/sparql.js';
import { req } from '../rdf/bindings.js';
import { derivedIds } from './derive.js';
import type { IriSet } from '../rdf/iri-set.js';

/** Above this many candidate roles, `rolesOutside` reads the roles of the workspace's other matrices instead of looking each up. */
const ROLE_LOOKUP_MAX = 500;

/**
 * What a deployment reads of the workspace's installed matrices besides
 * their records (`PackageRecords`): who imports them, the roles and agent
 * principals their derived graphs define, and the createdAt a redeploy keeps.
 */
export class DeploymentReads {
  constructor(private readonly store: QuadStore, private readonly graphs: Graphs) {}

  /** URIs of installed matrices (outside `exceptIds`) whose specification imports one of `uris`. */
  async importers(workspaceId: string, uris: string[], exceptIds: Set<string>): Promise<string[]> {
    if (uris.length === 0) return [];
    const graphs = (await this.installedMatrices(workspaceId, exceptIds)).map((m) => m.graph);
    if (graphs.length === 0) return [];
    // Each graph looked up by the imported URIs (both bound: an index lookup a pair).
    const rows = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?m WHERE {
      VALUES ?target { ${join(uris.map((u) => iri(u)))} }
      VALUES ?g { ${join(graphs.map((g) => iri(g)))} }
      GRAPH ?g { ?m mtx:imports ?target } }`);
    return rows.map((b) => req(b, 'm'));
  }

  /** Roles defined in the derived graphs of these matrices. */
  async rolesOf(workspaceId: string, matrixIds: string[]): Promise<Set<string>> {
    if (matrixIds.length === 0) return new Set();
    const values = join(matrixIds.map((id) => iri(this.graphs.derived(workspaceId, id))));
    const rows = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?r WHERE { VALUES ?g { ${values} } GRAPH ?g { ?r a wsm:Role } }`);
    return new Set(rows.map((b) => req(b, 'r')));
  }

  /** Agent principals defined in the derived graphs of these matrices. */
  async principalsOf(workspaceId: string, matrixIds: string[]): Promise<Set<string>> {
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
  async rolesOutside(workspaceId: string, exceptIds: Set<string>, wanted: IriSet): Promise<Set<string>> {
    // The candidates are looked in as they are (a large package mentions 100,000 IRIs: each copy held the event loop).
    const out = new Set<string>();
    if (wanted.size === 0) return out;
    const graphs = await this.derivedGraphs(workspaceId, exceptIds);
    if (graphs.length === 0) return out;
    const values = join(graphs.map((g) => iri(g)));
    if (wanted.size <= ROLE_LOOKUP_MAX) {
      const rows = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?r WHERE { VALUES ?r { ${join([...wanted].map((r) => iri(r)))} }
        VALUES ?g { ${values} } GRAPH ?g { ?r a wsm:Role } }`);
      for (const b of rows) out.add(req(b, 'r'));
      return out;
    }
    // Every role of the workspace's other matrices (15,000 after a large install): read as IRIs only.
    const roles = await this.store.selectIris(sparql`${prefixes}SELECT DISTINCT ?r WHERE { VALUES ?g { ${values} } GRAPH ?g { ?r a wsm:Role } }`, 'r');
    for (const r of roles) if (wanted.has(r)) out.add(r);
    return out;
  }

  /**
   * The matrices installed in the workspace (as its packages graph records
   * them), but those of `exceptIds`, with their graphs: reads of those
   * graphs name them, so that on the cluster store with residency they
   * load only this workspace.
   */
  private async installedMatrices(workspaceId: string, exceptIds: ReadonlySet<string> = new Set()): Promise<Array<{ id: string; graph: string }>> {
    const rows = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?id ?mg WHERE {
      GRAPH ${iri(this.graphs.packages(workspaceId))} { ?m a wsm:Matrix ; wsm:id ?id ; wsm:graph ?mg } }`);
    return rows.map((b) => ({ id: req(b, 'id'), graph: req(b, 'mg') })).filter((m) => !exceptIds.has(m.id));
  }

  /** The derived graphs of the installed matrices but those of `exceptIds`. */
  private async derivedGraphs(workspaceId: string, exceptIds: ReadonlySet<string> = new Set()): Promise<string[]> {
    return (await this.installedMatrices(workspaceId, exceptIds)).map((m) => `${m.graph}/derived`);
  }

  /** Role IRIs the derivation gives the role URIs among `uris`. */
  roleIrisFor(workspaceId: string, uris: Iterable<string>): string[] {
    return [...uris].map((u) => this.graphs.resource('role', derivedIds.role(workspaceId, u)));
  }

  /** The URIs (as a package names them) of these role IRIs, from the IAM graph or a derived graph of a matrix installed in the workspace. */
  async roleUrisOf(workspaceId: string, roleIris: Set<string>): Promise<string[]> {
    if (roleIris.size === 0) return [];
    const graphs = [this.graphs.iam(workspaceId), ...await this.derivedGraphs(workspaceId)];
    const rows = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?uri WHERE { VALUES ?r { ${join([...roleIris].map((r) => iri(r)))} }
      VALUES ?g { ${join(graphs.map((g) => iri(g)))} } GRAPH ?g { ?r wsm:uri ?uri } }`);
    return rows.map((b) => req(b, 'uri'));
  }

  /** createdAt of resources in a derived graph, so a redeploy keeps them. */
  async createdAtOf(workspaceId: string, matrixId: string): Promise<Map<string, string>> {
    const rows = await this.store.select(sparql`${prefixes}SELECT ?s ?t WHERE { GRAPH ${iri(this.graphs.derived(workspaceId, matrixId))} { ?s wsm:createdAt ?t } }`);
    return new Map(rows.map((b) => [req(b, 's'), req(b, 't')]));
  }
}
