import type { QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { prefixes } from '../rdf/vocab.js';
import { sparql, iri } from '../rdf/sparql.js';
import { req } from '../rdf/bindings.js';
import { GraphCache } from '../store/graph-cache.js';

/**
 * The member users of a workspace in I5 order (SPARQL ORDER BY of the
 * username: code point order; usernames are unique), as user IRIs.
 *
 * Ordering needs every member: the store cannot give the first page by
 * username without reading and sorting all of them (docs/figures.md).
 * So the order is kept in the service's read cache (`GraphCache`)
 * while the two graphs it reads keep their revisions: the workspace's IAM
 * graph (memberships) and the system graph (usernames). The page's records
 * are read fresh. At most `capacity` workspaces are kept (least recently
 * used goes first).
 */
export class MemberOrder {
  private readonly cache: GraphCache<readonly string[]>;

  constructor(private readonly store: QuadStore, private readonly graphs: Graphs, capacity = 32) {
    this.cache = new GraphCache(store, capacity);
  }

  /** The user IRIs of the workspace's members, ordered by username. */
  members(workspaceId: string): Promise<readonly string[]> {
    return this.cache.get(workspaceId, [this.graphs.iam(workspaceId), this.graphs.system], async () =>
      (await this.store.select(sparql`${prefixes}SELECT ?u WHERE {
        GRAPH ${iri(this.graphs.iam(workspaceId))} { ?p wsm:principalType "USER" ; wsm:actor ?u }
        GRAPH ${iri(this.graphs.system)} { ?u wsm:username ?username } } ORDER BY ?username`)).map((b) => req(b, 'u')));
  }
}
