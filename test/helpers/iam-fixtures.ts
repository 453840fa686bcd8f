/**
 * FIXTURE of installed-matrix records, for the IAM tests until they can
 * install real packages. `installFixtureMatrix` writes, through the running
 * server's store, exactly the records docs/rdf-model.md says an installed
 * matrix leaves behind: the package installation and matrix records in the
 * packages graph, the specification graph, and the derived graph with the
 * matrix's roles, agents (`wsm:role` per `iam:hasRole`) and AGENT principals.
 */
import type { TestServer } from './server.js';
import { PREFIXES } from '../../src/rdf/vocab.js';
import { sparql, iri, literal, dateTime, integer, boolean, join, raw, type SparqlFragment } from '../../src/rdf/sparql.js';
import { stableId } from '../../src/rdf/ids.js';

export interface FixtureMatrix {
  matrixUri: string;
  /** Package holding the matrix; defaults to a name made from the matrix URI. */
  packageName?: string;
  roles: Array<{ uri: string; label: string; description?: string }>;
  agents: Array<{ uri: string; label: string; description?: string; roles: string[] }>;
}

export interface InstalledFixture {
  matrixId: string;
  packageId: string;
  roleIds: Record<string, string>;
  agentIds: Record<string, string>;
  /** Principal ids of the agents, by agent URI. */
  agentPrincipalIds: Record<string, string>;
}

/** Ids per docs/rdf-model.md (stable across a reinstall). */
export const fixtureIds = {
  matrix: (ws: string, matrixUri: string) => stableId('matrix', ws, matrixUri),
  role: (ws: string, roleUri: string) => stableId('role', ws, roleUri),
  agent: (ws: string, agentUri: string) => stableId('agent', ws, agentUri),
  agentPrincipal: (ws: string, agentUri: string) => stableId('principal', ws, 'agent', agentUri),
  package: (ws: string, name: string) => stableId('package', ws, name),
};

const packageNameOf = (matrixUri: string) => `fixture-${stableId('fixture', matrixUri).slice(0, 8)}`;

/**
 * Writes the records of an installed matrix (replacing its derived graph, as a
 * redeploy does). Returns the ids the service should answer.
 */
export async function installFixtureMatrix(t: TestServer, workspaceId: string, spec: FixtureMatrix, now = new Date()): Promise<InstalledFixture> {
  const { store, graphs } = t.server.services;
  const ws = iri(graphs.resource('workspace', workspaceId));
  const packageName = spec.packageName ?? packageNameOf(spec.matrixUri);
  const packageId = fixtureIds.package(workspaceId, packageName);
  const matrixId = fixtureIds.matrix(workspaceId, spec.matrixUri);
  const pkg = iri(graphs.resource('package', packageId));
  const matrix = iri(graphs.resource('matrix', matrixId));
  const t0 = dateTime(now);
  const packagesGraph = iri(graphs.packages(workspaceId));
  const matrixGraph = iri(graphs.matrix(workspaceId, matrixId));
  const derivedGraph = iri(graphs.derived(workspaceId, matrixId));
  const roleIds: Record<string, string> = {};
  const agentIds: Record<string, string> = {};
  const agentPrincipalIds: Record<string, string> = {};

  const derived: SparqlFragment[] = [];
  const specification: SparqlFragment[] = [sparql`${iri(spec.matrixUri)} a mtx:Matrix ; rdfs:label ${literal(packageName)} .`].map(raw);
  for (const role of spec.roles) {
    const id = fixtureIds.role(workspaceId, role.uri);
    roleIds[role.uri] = id;
    derived.push(raw(sparql`${iri(graphs.resource('role', id))} a wsm:Role ; wsm:id ${literal(id)} ; wsm:uri ${iri(role.uri)} ;
      wsm:label ${literal(role.label)} ; wsm:matrix ${matrix} ; wsm:workspace ${ws} ; wsm:createdAt ${t0} ; wsm:updatedAt ${t0} .`));
    if (role.description) derived.push(raw(sparql`${iri(graphs.resource('role', id))} wsm:description ${literal(role.description)} .`));
    specification.push(raw(sparql`${iri(role.uri)} a iam:Role ; rdfs:label ${literal(role.label)} .`));
  }
  for (const agent of spec.agents) {
    const id = fixtureIds.agent(workspaceId, agent.uri);
    const principalId = fixtureIds.agentPrincipal(workspaceId, agent.uri);
    agentIds[agent.uri] = id;
    agentPrincipalIds[agent.uri] = principalId;
    const a = iri(graphs.resource('agent', id));
    derived.push(raw(sparql`${a} a wsm:Agent ; wsm:id ${literal(id)} ; wsm:uri ${iri(agent.uri)} ;
      wsm:label ${literal(agent.label)} ; wsm:matrix ${matrix} ; wsm:workspace ${ws} ; wsm:createdAt ${t0} ; wsm:updatedAt ${t0} .`));
    if (agent.description) derived.push(raw(sparql`${a} wsm:description ${literal(agent.description)} .`));
    for (const roleUri of agent.roles) {
      derived.push(raw(sparql`${a} wsm:role ${iri(graphs.resource('role', fixtureIds.role(workspaceId, roleUri)))} .`));
      specification.push(raw(sparql`${iri(agent.uri)} iam:hasRole ${iri(roleUri)} .`));
    }
    derived.push(raw(sparql`${iri(graphs.resource('principal', principalId))} a wsm:Principal ; wsm:id ${literal(principalId)} ;
      wsm:principalType "AGENT" ; wsm:actor ${a} ; wsm:workspace ${ws} ; wsm:createdAt ${t0} .`));
    specification.push(raw(sparql`${iri(agent.uri)} a iam:Agent ; rdfs:label ${literal(agent.label)} .`));
  }

  await store.write([
    { kind: 'update', sparql: PREFIXES + sparql`
      DELETE WHERE { GRAPH ${packagesGraph} { ${pkg} ?pp ?po } } ;
      DELETE WHERE { GRAPH ${packagesGraph} { ${matrix} ?mp ?mo } } ;
      CLEAR SILENT GRAPH ${matrixGraph} ;
      CLEAR SILENT GRAPH ${derivedGraph} ;
      INSERT DATA {
        GRAPH ${packagesGraph} {
          ${pkg} a wsm:PackageInstallation ; wsm:id ${literal(packageId)} ; wsm:name ${literal(packageName)} ;
            wsm:currentVersion "1.0.0" ; wsm:autoUpdate ${boolean(false)} ; wsm:workspace ${ws} ; wsm:createdAt ${t0} ; wsm:updatedAt ${t0} .
          ${matrix} a wsm:Matrix ; wsm:id ${literal(matrixId)} ; wsm:uri ${iri(spec.matrixUri)} ; wsm:name ${literal(packageName)} ;
            wsm:dependencyCount ${integer(0)} ; wsm:package ${pkg} ; wsm:graph ${matrixGraph} ; wsm:workspace ${ws} .
        }
        GRAPH ${matrixGraph} { ${join(specification, '\n')} }
        GRAPH ${derivedGraph} { ${join(derived, '\n')} }
      }` },
  ]);
  return { matrixId, packageId, roleIds, agentIds, agentPrincipalIds };
}

/** Removes what `installFixtureMatrix` wrote, as an uninstall does (role assignments stay: the packages side prunes them). */
export async function uninstallFixtureMatrix(t: TestServer, workspaceId: string, matrixUri: string, packageName = packageNameOf(matrixUri)): Promise<void> {
  const { store, graphs } = t.server.services;
  const matrixId = fixtureIds.matrix(workspaceId, matrixUri);
  const packagesGraph = iri(graphs.packages(workspaceId));
  await store.update(PREFIXES + sparql`
    DELETE WHERE { GRAPH ${packagesGraph} { ${iri(graphs.resource('package', fixtureIds.package(workspaceId, packageName)))} ?pp ?po } } ;
    DELETE WHERE { GRAPH ${packagesGraph} { ${iri(graphs.resource('matrix', matrixId))} ?mp ?mo } } ;
    CLEAR SILENT GRAPH ${iri(graphs.matrix(workspaceId, matrixId))} ;
    CLEAR SILENT GRAPH ${iri(graphs.derived(workspaceId, matrixId))}`);
}
