import type { QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { prefixes } from '../rdf/vocab.js';
import { iri, literal, sparql } from '../rdf/sparql.js';
import { WorkerPool, type PoolLimits, type QueryWorker } from './pool.js';
import type { Job, QueryRequest } from './scheduling.js';
import type { Staleness } from './sync.js';

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
    // The remote store (Virtuoso answers `GRAPH ?g { }` with no graph) and the cluster store: their own listing (the cluster's loads only the workspace named), which leaves out their own graphs.
    if (!this.store.capabilities.graphPatternNamesGraphs) return (await this.store.graphNames(prefix)).filter((g) => g.startsWith(prefix)).sort();
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

/** One view of one workspace in the sandbox: its workers, the queries waiting for them, and what its copies hold. */
export class View {
  readonly workers: WorkerPool;
  queue: Job[] = [];
  /** Jobs handed to a worker (preparing its copy or running), until their dispatch ends. */
  dispatched = new Set<Job>();
  /** The graphs the view sees: name -> version, bumped when the graph may have changed (`ViewSync.refresh`). */
  graphs = new Map<string, number>();
  /** What writes since the last refresh may have changed. */
  stale: Staleness = { everything: true, names: true, graphs: new Set() };
  /** Shared store: the store revision of each graph the view depends on, at its last refresh. */
  seen = new Map<string, number>();
  /** Quads in its workers' copies (as the last sync reported; unknown before the first). */
  quads: number | undefined;
  lastUsed = Date.now();
  constructor(readonly key: string, readonly workspaceId: string, readonly kind: ViewKind, limits: PoolLimits) {
    this.workers = new WorkerPool(limits);
  }
  alive(): QueryWorker[] { return this.workers.alive(); }
}

/** Whether a knowledge-view query may run in the whole view, confined to the knowledge graphs: one that names no dataset of its own (the confinement replaces it). */
export function runsInWholeView(request: QueryRequest): boolean {
  return request.union === true && !request.defaultGraphs && !request.namedGraphs;
}

/**
 * The views the sandbox keeps, at most `maxViews` (the least recently used
 * idle one goes first; one unused for `viewIdleMs` goes at the next `tidy`),
 * and which of a workspace's views answers its queries: the whole view
 * holds every graph the knowledge view does (docs/slash-commands.md), so
 * once its copy is loaded it serves both (`wholeViewFor`).
 */
export class OpenViews {
  private readonly views = new Map<string, View>();

  constructor(private readonly limits: PoolLimits & { maxViews: number; viewIdleMs: number }) {}

  get size(): number { return this.views.size; }
  values(): IterableIterator<View> { return this.views.values(); }

  /** The view, if it is open. */
  get(workspaceId: string, kind: ViewKind): View | undefined { return this.views.get(`${kind}:${workspaceId}`); }

  /** The view, opened now if it is not (making room first). */
  open(workspaceId: string, kind: ViewKind): View {
    const key = `${kind}:${workspaceId}`;
    let view = this.views.get(key);
    if (!view) {
      this.evictIfFull();
      view = new View(key, workspaceId, kind, this.limits);
      this.views.set(key, view);
    }
    return view;
  }

  /** Still open (not dropped since it was opened). */
  isOpen(view: View): boolean { return this.views.get(view.key) === view; }

  /**
   * The workspace's whole view, when a knowledge query can run there instead
   * of in a copy of its own, so one copy of the workspace serves both while
   * administrators query it. Only once its copy is loaded (until then the
   * knowledge view answers, as before), and only for a query that names no
   * dataset of its own (FROM, FROM NAMED, protocol graphs): the
   * confinement replaces the query's dataset. (The knowledge view's copy
   * is dropped when the whole view's copy is loaded, or when the knowledge
   * view goes idle after that: see `Scheduler`.)
   */
  wholeViewFor(workspaceId: string, request: QueryRequest): View | undefined {
    if (!runsInWholeView(request)) return undefined;
    const whole = this.get(workspaceId, 'all');
    if (!whole || whole.alive().length === 0) return undefined;
    if (whole.quads !== undefined) return whole;
    // The whole view is loading its first copy: wait for it rather than load a second one, unless the knowledge view's copy is there now.
    const knowledge = this.get(workspaceId, 'knowledge');
    return knowledge && knowledge.quads !== undefined && knowledge.alive().length > 0 ? undefined : whole;
  }

  /** The workspace's whole view once a copy of it is loaded in a live worker. */
  loadedWholeView(workspaceId: string): View | undefined {
    const whole = this.get(workspaceId, 'all');
    return whole && whole.quads !== undefined && whole.alive().length > 0 ? whole : undefined;
  }

  /** Drops the workspace's knowledge view when nothing waits for or runs in it (its queries go to the whole view). */
  dropIdleKnowledgeView(workspaceId: string): void {
    const knowledge = this.get(workspaceId, 'knowledge');
    if (knowledge && knowledge.queue.length === 0 && !knowledge.workers.anyBusy()) this.drop(knowledge);
  }

  /** Stops the view's workers and forgets it. */
  drop(view: View): void {
    view.workers.killAll();
    this.views.delete(view.key);
  }

  /** Drops unused views and retires their extra idle workers. */
  tidy(): void {
    const now = Date.now();
    for (const view of [...this.views.values()]) {
      const busy = view.queue.length > 0 || view.workers.anyBusy();
      if (!busy && now - view.lastUsed > this.limits.viewIdleMs) {
        this.drop(view);
        continue;
      }
      view.workers.retireIdle(now);
    }
  }

  clear(): void { this.views.clear(); }

  private evictIfFull(): void {
    if (this.views.size < this.limits.maxViews) return;
    const idle = [...this.views.values()]
      .filter((v) => v.queue.length === 0 && v.alive().every((w) => !w.busy))
      .sort((a, b) => a.lastUsed - b.lastUsed)[0];
    if (idle) this.drop(idle);
  }
}
