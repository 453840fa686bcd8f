import type { QuadStore, WriteOp } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { PREFIXES, WSM } from '../rdf/vocab.js';
import { sparql, iri } from '../rdf/sparql.js';
import { req } from '../rdf/bindings.js';
import { affectedBy } from '../store/write-reach.js';

/**
 * The member users of a workspace in I5 order (SPARQL ORDER BY of the
 * username: code point order; usernames are unique), as user IRIs.
 *
 * Ordering needs every member: the store cannot give the first page by
 * username without reading and sorting all of them (~50 ms at 10,000
 * members). So the order is computed once and kept until a write touches
 * what it depends on, found from the ops of `store.onWrite` (applied
 * synchronously with the write, so a read never sees a stale order):
 * - the workspace's IAM graph (memberships), named in the op;
 * - a username written to the system graph (a new user record);
 * - anything the op cannot be narrowed to (a graph variable, DROP ALL...).
 * Profile changes do not invalidate it: a user's username never changes
 * (the user's IRI is derived from it), and the page's records are read fresh.
 * At most `capacity` workspaces are kept (least recently used goes first).
 */
export class MemberOrder {
  private readonly cache = new Map<string, string[]>();

  constructor(private readonly store: QuadStore, private readonly graphs: Graphs, private readonly capacity = 32) {
    store.onWrite((ops) => { for (const op of ops) this.invalidate(op); });
  }

  /** The user IRIs of the workspace's members, ordered by username. */
  async members(workspaceId: string): Promise<readonly string[]> {
    let order = this.cache.get(workspaceId);
    if (order) {
      this.cache.delete(workspaceId); // refresh its place in the LRU order
    } else {
      const at = this.epoch;
      order = (await this.store.select(PREFIXES + sparql`SELECT ?u WHERE {
        GRAPH ${iri(this.graphs.iam(workspaceId))} { ?p wsm:principalType "USER" ; wsm:actor ?u }
        GRAPH ${iri(this.graphs.system)} { ?u wsm:username ?username } } ORDER BY ?username`)).map((b) => req(b, 'u'));
      // A write that may change an order happened while it was read: answer it, keep nothing.
      if (this.epoch !== at) return order;
      if (this.cache.size >= this.capacity) this.cache.delete(this.cache.keys().next().value!);
    }
    this.cache.set(workspaceId, order);
    return order;
  }

  /** Bumped by every write that may change some order (see `members`). */
  private epoch = 0;

  private invalidate(op: WriteOp): void {
    const reach = affectedBy(op, this.graphs);
    // A load into the system graph, or an update there that writes usernames, can change any order.
    const usernames = op.kind === 'load' || op.sparql.includes('wsm:username') || op.sparql.includes(`<${WSM.username}>`);
    if (reach.all || (reach.system && usernames) || [...reach.workspaces.values()].some((paths) => paths.has('iam'))) this.epoch++;
    if (reach.all || (reach.system && usernames)) {
      this.cache.clear();
      return;
    }
    for (const ws of [...this.cache.keys()]) if (reach.workspaces.get(ws)?.has('iam')) this.cache.delete(ws);
  }
}
