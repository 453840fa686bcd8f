import { updateOp, type LoadData, type WriteInput, type WriteOp } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { prefixes } from '../rdf/vocab.js';
import { sparql, sequence, iri, literal, dateTime, integer, boolean, raw, join } from '../rdf/sparql.js';
import type { WorkspaceService } from '../workspaces/service.js';
import type { Manifest } from './manifest.js';
import { autoUpdateEntryOp } from '../workspaces/workspace-index.js';
import type { PackageRecords } from './records.js';

/**
 * The writes of a deployment, each built as an op of the command's one
 * atomic write: the graphs of a matrix, its record and the package's,
 * their removal, and the removal of role assignments.
 */
export class DeploymentWrites {
  constructor(
    private readonly graphs: Graphs,
    private readonly workspaces: WorkspaceService,
    private readonly records: PackageRecords,
  ) {}

  /** Replaces a graph with N-Triples. Such loads go first in a write (no other op of it names their graphs): see `WriteOp`'s `replace`. */
  graphLoad(graph: string, data: LoadData): WriteInput {
    return { kind: 'load', replace: true, graph, format: 'application/n-triples', data };
  }

  /** Writes (or rewrites) the record of an installed matrix. */
  matrixRecord(workspaceId: string, input: { id: string; uri: string; name: string; description: string | null; dependencyCount: number; packageId: string }): WriteOp {
    const g = iri(this.graphs.packages(workspaceId));
    const m = iri(this.records.matrixIri(input.id));
    const description = input.description !== null ? sparql`${m} wsm:description ${literal(input.description)} .` : '';
    return updateOp(sparql`${prefixes}${sequence([
      sparql`DELETE WHERE { GRAPH ${g} { ${m} ?p ?o } }`,
      sparql`INSERT DATA { GRAPH ${g} { ${m} a wsm:Matrix ; wsm:id ${literal(input.id)} ; wsm:uri ${iri(input.uri)} ; wsm:name ${literal(input.name)} ;
        wsm:dependencyCount ${integer(input.dependencyCount)} ; wsm:package ${iri(this.records.packageIri(input.packageId))} ;
        wsm:graph ${iri(this.graphs.matrix(workspaceId, input.id))} ; wsm:workspace ${iri(this.graphs.resource('workspace', workspaceId))} .
        ${raw(description)} } }`,
    ])}`, [this.graphs.packages(workspaceId)]);
  }

  /** Removes an installed matrix: its graph, its derived graph and its record. */
  dropMatrix(workspaceId: string, matrixId: string): WriteOp {
    const g = iri(this.graphs.packages(workspaceId));
    return updateOp(sparql`${prefixes}${sequence([
      sparql`DROP SILENT GRAPH ${iri(this.graphs.matrix(workspaceId, matrixId))}`,
      sparql`DROP SILENT GRAPH ${iri(this.graphs.derived(workspaceId, matrixId))}`,
      sparql`DELETE WHERE { GRAPH ${g} { ${iri(this.records.matrixIri(matrixId))} ?p ?o } }`,
    ])}`, [this.graphs.matrix(workspaceId, matrixId), this.graphs.derived(workspaceId, matrixId), this.graphs.packages(workspaceId)]);
  }

  /** Deletes the role assignments (IAM graph) of roles and principals that disappear. */
  assignmentCleanup(workspaceId: string, roles: string[], principals: string[]): WriteOp[] {
    const iam = iri(this.graphs.iam(workspaceId));
    const ops: WriteOp[] = [];
    // The built-in administrator role belongs to the workspace, not to a package: whatever a package or an
    // extension declared, its assignments are never removed here (issue 12, acceptance 3).
    const builtIn = this.workspaces.roleIri(this.workspaces.adminRoleId(workspaceId));
    roles = roles.filter((r) => r !== builtIn);
    if (roles.length) {
      ops.push(updateOp(sparql`${prefixes}DELETE { GRAPH ${iam} { ?a ?p ?o } } WHERE { GRAPH ${iam} {
        VALUES ?r { ${join(roles.map((r) => iri(r)))} } ?a a wsm:RoleAssignment ; wsm:role ?r ; ?p ?o } }`, [this.graphs.iam(workspaceId)]));
    }
    if (principals.length) {
      ops.push(updateOp(sparql`${prefixes}DELETE { GRAPH ${iam} { ?a ?p ?o } } WHERE { GRAPH ${iam} {
        VALUES ?q { ${join(principals.map((q) => iri(q)))} } ?a a wsm:RoleAssignment ; wsm:principal ?q ; ?p ?o } }`, [this.graphs.iam(workspaceId)]));
    }
    return ops;
  }

  /** Writes (or rewrites) the record of a package installation. */
  installationRecord(workspaceId: string, input: {
    id: string; name: string; version: string; registry: { publisher: string; name: string } | null; autoUpdate: boolean;
    /** When the package was first installed (kept across updates), and now. */
    createdAt: string; now: string;
    pinned: boolean; dependsOn: string[];
    /** Kept on the record: its dependency ranges are checked when a package it depends on changes version. */
    manifest: Manifest;
  }): WriteOp[] {
    const g = iri(this.graphs.packages(workspaceId));
    const p = iri(this.records.packageIri(input.id));
    const registry = (input.registry ? sparql`${p} wsm:registryPublisher ${literal(input.registry.publisher)} ; wsm:registryName ${literal(input.registry.name)} ;
      wsm:pinned ${boolean(input.pinned)} .` : '')
      + input.dependsOn.map((d) => sparql`${p} wsm:dependsOn ${literal(d)} .`).join('\n');
    return [updateOp(sparql`${prefixes}${sequence([
      sparql`DELETE WHERE { GRAPH ${g} { ${p} ?pp ?o } }`,
      sparql`INSERT DATA { GRAPH ${g} { ${p} a wsm:PackageInstallation ; wsm:id ${literal(input.id)} ; wsm:name ${literal(input.name)} ;
        wsm:currentVersion ${literal(input.version)} ; wsm:autoUpdate ${boolean(input.registry ? input.autoUpdate : false)} ;
        wsm:workspace ${iri(this.graphs.resource('workspace', workspaceId))} ; wsm:createdAt ${dateTime(input.createdAt)} ; wsm:updatedAt ${dateTime(input.now)} ;
        wsm:manifest ${literal(JSON.stringify(input.manifest))} .
        ${raw(registry)} } }`,
    ])}`, [this.graphs.packages(workspaceId)]),
    // The index of workspaces lists it while it updates itself (src/workspaces/workspace-index.ts).
    autoUpdateEntryOp(this.graphs, workspaceId, this.records.packageIri(input.id), input.registry !== null && input.autoUpdate)];
  }

  /** Removes the record of a package installation. */
  dropInstallationRecord(workspaceId: string, packageId: string): WriteOp[] {
    return [updateOp(sparql`${prefixes}DELETE WHERE { GRAPH ${iri(this.graphs.packages(workspaceId))} { ${iri(this.records.packageIri(packageId))} ?p ?o } }`, [this.graphs.packages(workspaceId)]),
      autoUpdateEntryOp(this.graphs, workspaceId, this.records.packageIri(packageId), false)];
  }
}
