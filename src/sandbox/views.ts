import type { QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { prefixes } from '../rdf/vocab.js';
import { iri, literal, sparql } from '../rdf/sparql.js';

/**
 * What a query of one workspace may see (docs/slash-commands.md):
 * - `knowledge` (slash commands): the graphs of the workspace's installed
 *   matrices (the packages graph's matrix records, `wsm:graph`, never the
 *   `/derived` graphs), of its active extensions, and its variables graph
 *   (the values packages' variables have: docs/secrets.md);
 * - `all` (the administrators' SPARQL endpoint): every graph of the
 *   workspace, the service's records included, plus the workspace's own
 *   record and its members' user records from the system graph.
 * Nothing of another workspace, ever, and no secret value: those live in a
 * graph outside the workspace's prefix (`Graphs.secretValues`).
 */
export type ViewKind = 'knowledge' | 'all';

export class WorkspaceViews {
  constructor(private readonly store: QuadStore, private readonly graphs: Graphs) {}

  /** Names of the graphs slash commands of the workspace see. */
  async knowledgeGraphs(workspaceId: string): Promise<string[]> {
    const prefix = this.graphs.workspacePrefix(workspaceId);
    const variables = this.graphs.variables(workspaceId);
    const rows = await this.store.select(sparql`${prefixes}
      SELECT DISTINCT ?g ?xid ?active WHERE {
        { GRAPH ${iri(this.graphs.packages(workspaceId))} { ?m a wsm:Matrix ; wsm:graph ?g } }
        UNION
        { GRAPH ${iri(this.graphs.extensions(workspaceId))} { ?x a wsm:Extension ; wsm:id ?xid ; wsm:active ?active . OPTIONAL { ?x wsm:graph ?g } } }
        UNION
        { GRAPH ${iri(variables)} { ?v a wsm:Variable } BIND (${iri(variables)} AS ?g) }
      }`);
    const names = new Set<string>();
    for (const row of rows) {
      if (row.xid) {
        if (row.active?.value !== 'true' && row.active?.value !== '1') continue;
        const name = row.g?.value ?? this.graphs.extension(workspaceId, row.xid.value);
        if (name.startsWith(`${prefix}extensions/`)) names.add(name);
      } else if (row.g?.value === variables) {
        // Only when a package declared variables: an empty graph in the view would send every worker to the snapshot for it.
        names.add(variables);
      } else if (row.g) {
        const name = row.g.value;
        // Defence in depth: only this workspace's matrix graphs, never the derived records.
        if (name.startsWith(`${prefix}matrices/`) && !name.endsWith('/derived')) names.add(name);
      }
    }
    return [...names].sort();
  }

  /** Names of every graph of the workspace (its records included). */
  async workspaceGraphs(workspaceId: string): Promise<string[]> {
    const prefix = this.graphs.workspacePrefix(workspaceId);
    // The remote store (Virtuoso answers `GRAPH ?g { }` with no graph): its own listing, which leaves out its staging graphs.
    if (this.store.syncRevisions) return (await this.store.graphNames(prefix)).filter((g) => g.startsWith(prefix)).sort();
    const rows = await this.store.select(sparql`SELECT DISTINCT ?g WHERE { GRAPH ?g { } FILTER(STRSTARTS(STR(?g), ${literal(prefix)})) }`);
    return rows.map((r) => r.g!.value).sort();
  }

  /** The workspace's own record and its members' user records, as N-Triples. */
  async systemExcerpt(workspaceId: string): Promise<string> {
    const ws = iri(this.graphs.resource('workspace', workspaceId));
    // Two queries: Virtuoso answers a UNION of a pattern and a VALUES branch, joined with the system graph, with nothing.
    const [record, members] = await Promise.all([
      this.store.construct(sparql`CONSTRUCT { ${ws} ?p ?o } WHERE { GRAPH ${iri(this.graphs.system)} { ${ws} ?p ?o } }`),
      this.store.construct(sparql`${prefixes}
        CONSTRUCT { ?s ?p ?o } WHERE {
          GRAPH ${iri(this.graphs.iam(workspaceId))} { ?member a wsm:Principal ; wsm:actor ?s }
          GRAPH ${iri(this.graphs.system)} { ?s ?p ?o }
        }`),
    ]);
    return `${record.trim() && !record.trim().startsWith('#') ? `${record.trim()}\n` : ''}${members}`;
  }

  /** The graphs a view holds. */
  async names(workspaceId: string, kind: ViewKind): Promise<string[]> {
    if (kind === 'knowledge') return this.knowledgeGraphs(workspaceId);
    return [...await this.workspaceGraphs(workspaceId), this.graphs.system];
  }

  /** One graph of a view as N-Triples, for a query worker (the system graph: only the workspace's excerpt). */
  async dump(workspaceId: string, kind: ViewKind, name: string): Promise<string> {
    if (kind === 'all' && name === this.graphs.system) return this.systemExcerpt(workspaceId);
    return await this.store.dumpGraph(name);
  }
}
