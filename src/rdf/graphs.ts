/**
 * The cluster journal's stream of the service's own graphs (users,
 * workspaces, the registry, sign-in): every graph that is not a
 * workspace's (`Graphs.streamOf`).
 */
export const SERVICE_STREAM = 'service';

/** The cluster journal's stream of one workspace's graphs: `ws:<workspace id>` (the id, not the slug: a slug can change). */
export const workspaceStream = (ws: string): string => `ws:${ws}`;

/** Where some graphs lie (see `Graphs.placesOf`). */
export interface GraphPlaces {
  /** The system graph is among them. */
  system: boolean;
  /** Workspace id -> the graphs of it, as paths under `<base>workspaces/<id>/` (`iam`, `matrices/M`, ...). */
  workspaces: Map<string, Set<string>>;
}

/**
 * Named graphs of the store, all under one configurable base IRI
 * (WSM_BASE_IRI). One helper names every graph, so graph IRIs are built in
 * one place:
 *
 *   <base>system                                   workspaces and users
 *   <base>registry                                 the hosted registry: publishers, packages, versions
 *   <base>sign-in                                  the OpenID provider's records and keys, passwords
 *   <base>index                                    the index of workspaces: members, unfinished commands
 *   <base>workspaces/<ws>/iam                      memberships, principals, role assignments, built-in role
 *   <base>workspaces/<ws>/packages                 installations, matrices (records), lifecycle commands
 *   <base>workspaces/<ws>/commands/<cmd>           events of one lifecycle command
 *   <base>workspaces/<ws>/commands/<cmd>/report    its SHACL validation report
 *   <base>workspaces/<ws>/matrices/<matrix>        a matrix specification, as installed
 *   <base>workspaces/<ws>/matrices/<matrix>/derived roles and agents derived from it (+ extensions)
 *   <base>workspaces/<ws>/extensions               extension records
 *   <base>workspaces/<ws>/extensions/<ext>         an extension's Turtle content
 *   <base>workspaces/<ws>/slash-commands           slash command records
 *   <base>workspaces/<ws>/variables                variables packages declare, with their values
 *   <base>workspaces/<ws>/secrets                  managed secrets (metadata only) and the record of value reads
 *   <base>secret-values/<ws>                       secret values, sealed: outside every workspace view
 *   <base>secret-exchange-keys                     keyIds already used (one exchange each)
 */
export class Graphs {
  constructor(readonly base: string) {
    if (!base.endsWith('/')) this.base = `${base}/`;
  }
  get system(): string { return `${this.base}system`; }
  get registry(): string { return `${this.base}registry`; }
  get signIn(): string { return `${this.base}sign-in`; }
  /** The index of workspaces: members, unfinished commands (src/workspaces/workspace-index.ts). */
  get index(): string { return `${this.base}index`; }
  workspacePrefix(ws: string): string { return `${this.base}workspaces/${ws}/`; }
  iam(ws: string): string { return `${this.base}workspaces/${ws}/iam`; }
  packages(ws: string): string { return `${this.base}workspaces/${ws}/packages`; }
  command(ws: string, cmd: string): string { return `${this.base}workspaces/${ws}/commands/${cmd}`; }
  report(ws: string, cmd: string): string { return `${this.base}workspaces/${ws}/commands/${cmd}/report`; }
  matrix(ws: string, matrixId: string): string { return `${this.base}workspaces/${ws}/matrices/${matrixId}`; }
  derived(ws: string, matrixId: string): string { return `${this.base}workspaces/${ws}/matrices/${matrixId}/derived`; }
  extensions(ws: string): string { return `${this.base}workspaces/${ws}/extensions`; }
  extension(ws: string, ext: string): string { return `${this.base}workspaces/${ws}/extensions/${ext}`; }
  slashCommands(ws: string): string { return `${this.base}workspaces/${ws}/slash-commands`; }
  variables(ws: string): string { return `${this.base}workspaces/${ws}/variables`; }
  secrets(ws: string): string { return `${this.base}workspaces/${ws}/secrets`; }
  /** Not under the workspace's prefix on purpose: no query view (slash commands, the SPARQL endpoint) holds it. */
  secretValues(ws: string): string { return `${this.base}secret-values/${ws}`; }
  get exchangeKeys(): string { return `${this.base}secret-exchange-keys`; }

  /**
   * Places graph IRIs (e.g. the graphs a write declared): the system graph,
   * and for each workspace the paths of its graphs. Other graphs (the
   * registry, graphs outside the base) are not placed.
   */
  placesOf(graphIris: Iterable<string>): GraphPlaces {
    const places: GraphPlaces = { system: false, workspaces: new Map() };
    const prefix = `${this.base}workspaces/`;
    for (const g of graphIris) {
      if (g === this.system) places.system = true;
      if (!g.startsWith(prefix)) continue;
      const rest = g.slice(prefix.length);
      const slash = rest.indexOf('/');
      if (slash <= 0) continue;
      const ws = rest.slice(0, slash);
      if (!places.workspaces.has(ws)) places.workspaces.set(ws, new Set());
      places.workspaces.get(ws)!.add(rest.slice(slash + 1));
    }
    return places;
  }

  /**
   * The stream of the cluster's journal a graph's writes are recorded in
   * (docs/cluster.md, "Streams"): a workspace's graphs (those under its
   * prefix, and its sealed secret values) are `ws:<id>`; every other graph
   * (the system graph, the registry, sign-in, graphs outside the base, the
   * default graph) is `service`.
   */
  streamOf(graph: string): string {
    for (const prefix of [`${this.base}workspaces/`, `${this.base}secret-values/`]) {
      if (!graph.startsWith(prefix)) continue;
      const rest = graph.slice(prefix.length);
      const slash = rest.indexOf('/');
      const ws = slash < 0 ? rest : rest.slice(0, slash);
      // `<base>workspaces/<ws>` itself is no graph of the workspace (its graphs lie under `<ws>/`).
      if (ws && (slash > 0 || prefix.endsWith('secret-values/'))) return workspaceStream(ws);
    }
    return SERVICE_STREAM;
  }

  /** Resource IRIs (subjects of records), also under the base. */
  resource(kind: string, id: string): string { return `${this.base}id/${kind}/${id}`; }
}
