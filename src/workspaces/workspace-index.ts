import { updateOp, type QuadStore, type WriteOp } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { prefixes } from '../rdf/vocab.js';
import { fragmentOf, iri, literal, sparql, sparqlFragment, type Sparql } from '../rdf/sparql.js';

/*
 * The index of workspaces (`<base>index`, a graph of the service's own,
 * docs/cluster.md "Residency"): what the service's reads across workspaces
 * need to know without reading every workspace's graphs.
 *
 *   <principal> wsm:actor <user> ; wsm:workspace <workspace>
 *       each principal of a workspace's `iam` graph that names its actor
 *       and that workspace (a member), as the `iam` graph holds it: a
 *       user's workspaces are listed from here
 *   <command> wsm:unfinishedIn <workspace>
 *       each lifecycle command whose status is pending or in progress (a
 *       superset: the sweep of unfinished commands reads the `packages`
 *       graphs of the workspaces listed here, not every workspace's)
 *   <installation> wsm:autoUpdate true ; wsm:workspace <workspace>
 *       each package installation that updates itself (a superset, read
 *       as the unfinished commands are, by each auto-update round)
 *   <base>index a wsm:WorkspaceIndex
 *       the index was built (`ensureWorkspaceIndex`)
 *
 * It is written in the same write as what it indexes (creating a
 * workspace, adding and removing a member, importing a workspace, creating
 * a command and finishing it), on every store, so answers read through it
 * are those read over every workspace. On the cluster store with
 * residency, the reads that use it name their graphs, so they load no
 * workspace; and the index's ops read no workspace graph (ops of their
 * own), so an instance that does not hold the workspace applies them
 * without loading it.
 */

/**
 * Marks the index built: in the write creating a workspace (or importing
 * one) too, so a store whose first start found it empty, and whose
 * bootstrap wrote nothing, has its index marked with its first workspace
 * (a store with data from before the index was built it at its start).
 */
export function indexBuiltOp(graphs: Graphs): Sparql {
  const index = iri(graphs.index);
  return sparql`INSERT DATA { GRAPH ${index} { ${index} a wsm:WorkspaceIndex } }`;
}

/** Index entries for the principals of `workspaceId`'s `iam` graph as the write leaves them (an update reading that graph: after the write's loads or inserts). */
export function indexMembersOp(graphs: Graphs, workspaceId: string): Sparql {
  const ws = iri(graphs.resource('workspace', workspaceId));
  return sparql`INSERT { GRAPH ${iri(graphs.index)} { ?p wsm:actor ?u ; wsm:workspace ${ws} } }
    WHERE { GRAPH ${iri(graphs.iam(workspaceId))} { ?p a wsm:Principal ; wsm:actor ?u ; wsm:workspace ${ws} } }`;
}

/** The index entry of one member's principal. */
export function indexMemberOp(graphs: Graphs, workspaceId: string, principalIri: string, userIri: string): Sparql {
  return sparql`INSERT DATA { GRAPH ${iri(graphs.index)} { ${iri(principalIri)} wsm:actor ${iri(userIri)} ; wsm:workspace ${iri(graphs.resource('workspace', workspaceId))} } }`;
}

/** Removes the index entry of a principal (reading only the index). */
export function unindexMemberOp(graphs: Graphs, principalIri: string): Sparql {
  return sparql`DELETE WHERE { GRAPH ${iri(graphs.index)} { ${iri(principalIri)} ?p ?o } }`;
}

/** Index entries for the unfinished commands of `workspaceId`'s `packages` graph as the write leaves it. */
export function indexUnfinishedOp(graphs: Graphs, workspaceId: string): Sparql {
  const ws = iri(graphs.resource('workspace', workspaceId));
  return sparql`INSERT { GRAPH ${iri(graphs.index)} { ?c wsm:unfinishedIn ${ws} } }
    WHERE { GRAPH ${iri(graphs.packages(workspaceId))} { ?c a wsm:LifecycleCommand ; wsm:status ?status ; wsm:workspace ${ws} . FILTER (?status IN ("pending", "in_progress")) } }`;
}

/** The index entry of a command: listed while unfinished, removed once finished. */
export function commandEntryOp(graphs: Graphs, workspaceId: string, commandIri: string, unfinished: boolean): Sparql {
  const entry = sparqlFragment`GRAPH ${iri(graphs.index)} { ${iri(commandIri)} wsm:unfinishedIn ${iri(graphs.resource('workspace', workspaceId))} }`;
  return unfinished ? sparql`INSERT DATA { ${entry} }` : sparql`DELETE DATA { ${entry} }`;
}

/** The index entry of a package installation: listed while it updates itself (`autoUpdate`), removed otherwise (an op reading only the index). */
export function autoUpdateEntryOp(graphs: Graphs, workspaceId: string, installationIri: string, on: boolean): WriteOp {
  const index = iri(graphs.index);
  const text = on
    ? sparql`${prefixes}INSERT DATA { GRAPH ${index} { ${iri(installationIri)} wsm:autoUpdate true ; wsm:workspace ${iri(graphs.resource('workspace', workspaceId))} } }`
    : sparql`${prefixes}DELETE WHERE { GRAPH ${index} { ${iri(installationIri)} ?p ?o } }`;
  return updateOp(text, [graphs.index]);
}

/** Index entries for the installations of `workspaceId`'s `packages` graph that update themselves, as the write leaves it. */
export function indexAutoUpdateOp(graphs: Graphs, workspaceId: string): Sparql {
  const ws = iri(graphs.resource('workspace', workspaceId));
  return sparql`INSERT { GRAPH ${iri(graphs.index)} { ?p wsm:autoUpdate true ; wsm:workspace ${ws} } }
    WHERE { GRAPH ${iri(graphs.packages(workspaceId))} { ?p a wsm:PackageInstallation ; wsm:autoUpdate true ; wsm:workspace ${ws} } }`;
}

/** The workspaces (ids) the index lists an installation that updates itself in. */
export async function workspacesWithAutoUpdate(store: QuadStore, graphs: Graphs): Promise<string[]> {
  const rows = await store.select(sparql`${prefixes}SELECT DISTINCT ?wsId WHERE {
    GRAPH ${iri(graphs.index)} { ?p wsm:autoUpdate true ; wsm:workspace ?ws } GRAPH ${iri(graphs.system)} { ?ws a wsm:Workspace ; wsm:id ?wsId } }`);
  return rows.map((b) => b.wsId!.value);
}

/** The workspaces (ids) the index lists an unfinished command in. */
export async function workspacesWithUnfinished(store: QuadStore, graphs: Graphs): Promise<string[]> {
  const rows = await store.select(sparql`${prefixes}SELECT DISTINCT ?wsId WHERE {
    GRAPH ${iri(graphs.index)} { ?c wsm:unfinishedIn ?ws } GRAPH ${iri(graphs.system)} { ?ws a wsm:Workspace ; wsm:id ?wsId } }`);
  return rows.map((b) => b.wsId!.value);
}

/**
 * Builds the index when the store has none (a store written before it):
 * read over every workspace once, in one write conditional on no index
 * being there, so instances starting together build it once. An empty
 * store is left empty (the first start's check, `bootstrap`): `'empty'`;
 * called again after the bootstrap with `wasEmpty`, it only marks the index
 * built (what the bootstrap wrote indexed itself), unless the store is
 * still empty. True when it built it.
 */
export async function ensureWorkspaceIndex(store: QuadStore, graphs: Graphs, wasEmpty = false): Promise<boolean | 'empty'> {
  const index = iri(graphs.index);
  const marker = sparql`${prefixes}ASK { GRAPH ${index} { ${index} a wsm:WorkspaceIndex } }`;
  if (await store.ask(marker)) return false;
  const mark = indexBuiltOp(graphs);
  // A store still empty stays so (its next start is a first start too).
  if (await store.isEmpty()) return 'empty';
  if (wasEmpty) return store.writeIf({ ask: marker, expect: false }, [{ kind: 'update', sparql: sparql`${prefixes}${fragmentOf(mark)}`, graphs: [graphs.index] }]);
  const workspaces = literal(`${graphs.base}workspaces/`);
  return store.writeIf({ ask: marker, expect: false }, [{
    kind: 'update',
    sparql: sparql`${prefixes}INSERT { GRAPH ${index} { ?p wsm:actor ?u ; wsm:workspace ?ws } } WHERE {
        GRAPH ${iri(graphs.system)} { ?ws a wsm:Workspace ; wsm:id ?wsId }
        BIND (IRI(CONCAT(${workspaces}, STR(?wsId), "/iam")) AS ?g)
        GRAPH ?g { ?p a wsm:Principal ; wsm:actor ?u ; wsm:workspace ?ws } } ;
      INSERT { GRAPH ${index} { ?c wsm:unfinishedIn ?ws } } WHERE {
        GRAPH ${iri(graphs.system)} { ?ws a wsm:Workspace ; wsm:id ?wsId }
        BIND (IRI(CONCAT(${workspaces}, STR(?wsId), "/packages")) AS ?g)
        GRAPH ?g { ?c a wsm:LifecycleCommand ; wsm:status ?status ; wsm:workspace ?ws . FILTER (?status IN ("pending", "in_progress")) } } ;
      INSERT { GRAPH ${index} { ?p wsm:autoUpdate true ; wsm:workspace ?ws } } WHERE {
        GRAPH ${iri(graphs.system)} { ?ws a wsm:Workspace ; wsm:id ?wsId }
        BIND (IRI(CONCAT(${workspaces}, STR(?wsId), "/packages")) AS ?g)
        GRAPH ?g { ?p a wsm:PackageInstallation ; wsm:autoUpdate true ; wsm:workspace ?ws } } ;
      ${fragmentOf(mark)}`,
    graphs: [graphs.index],
  }]);
}
