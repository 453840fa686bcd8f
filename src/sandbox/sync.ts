import type { Logger } from '../logger.js';
import { StoreUnreachableError, type QuadStore } from '../store/store.js';
import type { GraphPlaces, Graphs } from '../rdf/graphs.js';
import { hasSnapshotCoverage } from '../store/embedded/snapshot-coverage.js';
import type { FromWorker, SyncMessage } from './protocol.js';
import { nextMessageId, type QueryWorker } from './pool.js';
import type { View, ViewKind, WorkspaceViews } from './views.js';
import type { MemoryWatch } from './memory.js';
import type { SandboxCounters } from './scheduling.js';

/** What writes since a view's last refresh may have changed. */
export interface Staleness {
  /** Reload every graph (a write it cannot place). */
  everything: boolean;
  /** Which graphs are visible may have changed (records were written). */
  names: boolean;
  /** Graphs written to. */
  graphs: Set<string>;
}

/**
 * Can the write have changed what a view sees? The knowledge view depends
 * on the matrix graphs, the extension graphs, and the records that say
 * which of them are visible (packages and extensions graphs); the whole
 * workspace view on every graph of the workspace and the system graph.
 */
export function reaches(write: GraphPlaces, workspaceId: string, kind: ViewKind): boolean {
  const paths = write.workspaces.get(workspaceId);
  if (kind === 'all') return write.system || paths !== undefined;
  if (!paths) return false;
  for (const graph of paths) {
    if (graph === 'packages' || graph === 'extensions' || graph === 'variables' || graph.startsWith('extensions/')) return true;
    if (graph.startsWith('matrices/') && !graph.endsWith('/derived')) return true;
  }
  return false;
}

/**
 * Keeps the workers' copies of a view's data up to date with the store.
 * Writes mark the views they can have changed stale, from the graphs each
 * write declares (`staleAfterWrite`, `reaches`); before a worker runs its
 * next query, the view's list of graphs is brought up to date (`refresh`)
 * and the worker receives only the graphs that changed (`syncWorker`),
 * which it rebuilds itself from the newest snapshot file and the journal
 * records after it (the main thread sends where those are:
 * `graphSources`); only graphs an update wrote from other graphs' content
 * are dumped from the store.
 */
export class ViewSync {
  /** Versions of view graphs (see `View.graphs`). */
  private graphVersion = 0;

  constructor(
    private readonly store: QuadStore,
    private readonly graphs: Graphs,
    private readonly workspaceViews: WorkspaceViews,
    private readonly logger: Logger,
    private readonly counters: SandboxCounters,
    private readonly memory: MemoryWatch,
  ) {}

  /** Marks the views a write can have changed stale, from the graphs the write declared. */
  staleAfterWrite(declared: ReadonlySet<string>, views: Iterable<View>): void {
    const write = this.graphs.placesOf(declared);
    for (const view of views) {
      if (!reaches(write, view.workspaceId, view.kind)) continue;
      const stale = view.stale;
      if (write.system) stale.graphs.add(this.graphs.system);
      const prefix = this.graphs.workspacePrefix(view.workspaceId);
      for (const path of write.workspaces.get(view.workspaceId) ?? []) {
        stale.graphs.add(prefix + path);
        // The system graph's excerpt holds the members' user records: who the members are is in the IAM graph.
        if (view.kind === 'all' && prefix + path === this.graphs.iam(view.workspaceId)) stale.graphs.add(this.graphs.system);
        // Records choose the knowledge view's graphs; any new graph may join the whole-workspace view.
        if (view.kind === 'all' || path === 'packages' || path === 'extensions') stale.names = true;
      }
    }
  }

  /**
   * Brings the view's list of graphs up to date after writes: recomputes
   * which graphs it sees when records changed, and gives a new version to
   * each graph that may have changed, so workers reload just those.
   */
  async refresh(view: View): Promise<void> {
    if (this.store.capabilities.otherInstancesWrite) await this.staleAfterOtherInstances(view);
    const { stale } = view;
    if (!stale.everything && !stale.names && stale.graphs.size === 0) return;
    // Reset first: writes made while the names are read mark the view stale again.
    view.stale = { everything: false, names: false, graphs: new Set() };
    const names = stale.everything || stale.names ? await this.workspaceViews.names(view.workspaceId, view.kind) : [...view.graphs.keys()];
    const next = new Map<string, number>();
    for (const name of names) {
      const version = view.graphs.get(name);
      next.set(name, version !== undefined && !stale.everything && !stale.graphs.has(name) ? version : ++this.graphVersion);
    }
    view.graphs = next;
    if (this.store.capabilities.otherInstancesWrite) {
      // Graphs new to the view: their revisions now, before they are dumped (a write after this moves them).
      const fresh = names.filter((name) => !view.seen.has(name));
      if (fresh.length > 0) {
        await this.store.syncRevisions(fresh);
        for (const name of fresh) view.seen.set(name, this.store.revision(name));
      }
    }
  }

  /**
   * Several instances on one store: their writes reach no `onWrite` of this
   * process. The view is checked against the store's revisions of the graphs
   * it depends on (`syncRevisions`: one query for the engine's generations),
   * as the read cache is (docs/store.md, the cache rule): a graph
   * whose revision moved since the last refresh is reloaded, and when one
   * of the records that choose the view's graphs moved, the names are read
   * again. Revisions are taken before the graphs are dumped, so a write
   * during the dump moves them again and the next query reloads.
   */
  private async staleAfterOtherInstances(view: View): Promise<void> {
    const ws = view.workspaceId;
    const records = view.kind === 'knowledge'
      ? [this.graphs.packages(ws), this.graphs.extensions(ws)]
      : [this.graphs.packages(ws), this.graphs.extensions(ws), this.graphs.iam(ws), this.graphs.slashCommands(ws), this.graphs.system];
    const tracked = [...new Set([...records, ...view.graphs.keys()])];
    await this.store.syncRevisions(tracked);
    for (const g of tracked) {
      const revision = this.store.revision(g);
      const before = view.seen.get(g);
      view.seen.set(g, revision);
      // First sight: the view has not loaded it since (a new view is stale as a whole; new names are seen in `refresh`).
      if (before === undefined || before === revision) continue;
      view.stale.graphs.add(g);
      if (records.includes(g)) view.stale.names = true;
      // As in `staleAfterWrite`: the system graph's excerpt depends on the members, in the IAM graph.
      if (view.kind === 'all' && g === this.graphs.iam(ws)) view.stale.graphs.add(this.graphs.system);
    }
  }

  /**
   * Brings the worker's copy up to the view's graphs (after `refresh`):
   * drops the graphs the view no longer sees and loads those whose version
   * it does not hold. Resolves false when the copy was up to date already.
   * A write while syncing bumps versions: the next query syncs again.
   */
  async syncWorker(view: View, worker: QueryWorker): Promise<boolean> {
    const drop = [...worker.held.keys()].filter((name) => !view.graphs.has(name));
    const load = [...view.graphs].filter(([name, version]) => worker.held.get(name) !== version);
    if (!drop.length && !load.length) return false;
    this.counters.loads++;
    this.counters.graphsLoaded += load.length;
    const held = new Map(view.graphs);
    let synced: FromWorker;
    this.memory.syncStarted();
    worker.preparing = true;
    try {
      // The worker rebuilds the graphs itself, in its own thread: from the newest snapshot file and
      // the journal records after it, or (the remote store) from the engine's answers, which it asks
      // for. Only the system graph's excerpt is made here, and graphs the journal cannot give (written
      // from other graphs' content) are sent afterwards.
      const names = load.map(([name]) => name);
      const excerpt = names.filter((name) => view.kind === 'all' && name === this.graphs.system);
      const rebuilt = names.filter((name) => !excerpt.includes(name));
      const sources = rebuilt.length > 0 && hasSnapshotCoverage(this.store) ? await this.store.graphSources(rebuilt) : undefined;
      const fetch = !sources ? await this.dumpRequests(rebuilt) : undefined;
      synced = await worker.call({
        type: 'sync',
        id: nextMessageId(),
        drop,
        load: await this.dumpGraphs(view, sources || fetch ? excerpt : names),
        ...(fetch ? { fetch } : {}),
        ...(sources?.snapshot ? { fromSnapshot: sources.snapshot } : {}),
        ...(sources ? { fromJournal: sources.journal } : {}),
      });
      if (synced.type === 'error' && synced.kind === 'snapshot') {
        // Removed by later snapshots, say: the worker left those graphs empty; send them as text.
        this.logger.warn({ view: view.key, reason: synced.message }, 'query worker could not read the snapshot; sending the graphs instead');
        synced = await worker.call({ type: 'sync', id: nextMessageId(), drop: [], load: await this.dumpGraphs(view, rebuilt) });
      } else if (synced.type === 'synced' && sources) {
        const unreplayed = synced.unreplayed ?? [];
        this.counters.graphsFromSnapshot += sources.snapshot?.graphs.length ?? 0;
        this.counters.graphsFromJournal += sources.journal.graphs.length - unreplayed.length;
        if (unreplayed.length > 0) synced = await worker.call({ type: 'sync', id: nextMessageId(), drop: [], load: await this.dumpGraphs(view, unreplayed) });
      }
    } finally {
      worker.preparing = false;
      this.memory.syncEnded();
    }
    if (synced.type === 'error' && synced.kind === 'unreachable') throw new StoreUnreachableError(synced.message);
    if (synced.type === 'error') throw new Error(`syncing the workspace's graphs failed: ${synced.message}`);
    worker.held = held;
    if (synced.type === 'synced') {
      this.counters.synced[view.kind]++;
      worker.memoryAfterSync = synced.memory;
      view.quads = synced.quads;
    }
    return true;
  }

  /** Requests a worker sends itself for graphs of the remote store (`QuadStore.graphDumpRequest`); undefined on other stores. */
  private async dumpRequests(names: string[]): Promise<SyncMessage['fetch']> {
    const request = this.store.graphDumpRequest?.bind(this.store);
    if (!request) return undefined;
    return await Promise.all(names.map(async (name) => ({ name, request: await request(name) })));
  }

  /** Graphs of a view as N-Triples, one engine call each, with an event-loop turn before each. */
  private async dumpGraphs(view: View, names: string[]): Promise<Array<{ name: string; ntriples: string }>> {
    const out: Array<{ name: string; ntriples: string }> = [];
    for (const name of names) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      out.push({ name, ntriples: await this.workspaceViews.dump(view.workspaceId, view.kind, name) });
    }
    return out;
  }
}
