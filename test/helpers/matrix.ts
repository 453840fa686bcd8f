import type { TestServer } from './server.js';
import { PREFIXES } from '../../src/rdf/vocab.js';
import { sparql, iri, literal, dateTime, integer, boolean, raw } from '../../src/rdf/sparql.js';
import { stableId, newId } from '../../src/rdf/ids.js';

/**
 * Test fixtures that put matrix knowledge in place through the running
 * server's store, exactly as docs/rdf-model.md lays it out, until package
 * installation exists. Switch `installFixtureMatrix` to a real install (P2)
 * when packages land; the tests only rely on its effect.
 */

export interface FixtureMatrix {
  /** The matrix URI (`<uri> a mtx:Matrix` in the Turtle). */
  uri: string;
  /** Turtle of the matrix specification. */
  turtle: string;
  /** Manifest name of the matrix (default: last path segment of the URI). */
  name?: string;
  /** Package holding it (default `fixture-<name>`). */
  packageName?: string;
  description?: string;
}

/** Installs a matrix: package record + matrix record in the packages graph, the Turtle in the matrix graph. */
export async function installFixtureMatrix(t: TestServer, workspaceId: string, matrix: FixtureMatrix): Promise<{ matrixId: string; graph: string; packageId: string }> {
  const { store, graphs } = t.server.services;
  const name = matrix.name ?? matrix.uri.replace(/[#/]+$/, '').split(/[#/]/).pop()!;
  const packageName = matrix.packageName ?? `fixture-${name.toLowerCase().replace(/[^a-z0-9-]/g, '-')}`;
  const packageId = stableId('package', workspaceId, packageName);
  const matrixId = stableId('matrix', workspaceId, matrix.uri);
  const graph = graphs.matrix(workspaceId, matrixId);
  const pkg = iri(graphs.resource('package', packageId));
  const m = iri(graphs.resource('matrix', matrixId));
  const ws = iri(graphs.resource('workspace', workspaceId));
  const now = dateTime(new Date());
  const g = iri(graphs.packages(workspaceId));
  const description = matrix.description ? sparql`${m} wsm:description ${literal(matrix.description)} .` : '';
  await store.write([
    { kind: 'update', sparql: PREFIXES + sparql`DELETE WHERE { GRAPH ${g} { ${m} ?p ?o } }` },
    { kind: 'update', sparql: PREFIXES + sparql`DROP SILENT GRAPH ${iri(graph)}` },
    {
      kind: 'update',
      sparql: PREFIXES + sparql`INSERT DATA { GRAPH ${g} {
        ${pkg} a wsm:PackageInstallation ; wsm:id ${literal(packageId)} ; wsm:name ${literal(packageName)} ;
          wsm:currentVersion "1.0.0" ; wsm:autoUpdate ${boolean(false)} ; wsm:workspace ${ws} ; wsm:createdAt ${now} ; wsm:updatedAt ${now} .
        ${m} a wsm:Matrix ; wsm:id ${literal(matrixId)} ; wsm:uri ${iri(matrix.uri)} ; wsm:name ${literal(name)} ;
          wsm:dependencyCount ${integer(0)} ; wsm:package ${pkg} ; wsm:graph ${iri(graph)} ; wsm:workspace ${ws} .
        ${raw(description)}
      } }`,
    },
    { kind: 'load', graph, format: 'text/turtle', data: matrix.turtle },
  ]);
  return { matrixId, graph, packageId };
}

/** Removes what `installFixtureMatrix` wrote for one matrix. */
export async function uninstallFixtureMatrix(t: TestServer, workspaceId: string, matrixUri: string): Promise<void> {
  const { store, graphs } = t.server.services;
  const matrixId = stableId('matrix', workspaceId, matrixUri);
  const m = iri(graphs.resource('matrix', matrixId));
  await store.write([
    { kind: 'update', sparql: PREFIXES + sparql`DELETE WHERE { GRAPH ${iri(graphs.packages(workspaceId))} { ${m} ?p ?o } }` },
    { kind: 'update', sparql: sparql`DROP SILENT GRAPH ${iri(graphs.matrix(workspaceId, matrixId))}` },
  ]);
}

/** An extension record plus its content graph (docs/rdf-model.md "Extensions"). */
export async function installFixtureExtension(
  t: TestServer, workspaceId: string, ext: { targetMatrixUri: string; turtle: string; active: boolean; label?: string },
): Promise<{ extensionId: string; graph: string }> {
  const { store, graphs } = t.server.services;
  const extensionId = newId();
  const graph = graphs.extension(workspaceId, extensionId);
  const x = iri(graphs.resource('extension', extensionId));
  const now = dateTime(new Date());
  await store.write([
    {
      kind: 'update',
      sparql: PREFIXES + sparql`INSERT DATA { GRAPH ${iri(graphs.extensions(workspaceId))} {
        ${x} a wsm:Extension ; wsm:id ${literal(extensionId)} ; wsm:label ${literal(ext.label ?? 'fixture extension')} ;
          wsm:targetMatrix ${iri(ext.targetMatrixUri)} ; wsm:active ${boolean(ext.active)} ;
          wsm:workspace ${iri(graphs.resource('workspace', workspaceId))} ; wsm:createdAt ${now} ; wsm:updatedAt ${now} .
      } }`,
    },
    { kind: 'load', graph, format: 'text/turtle', data: ext.turtle },
  ]);
  return { extensionId, graph };
}

/** Flips an extension's `wsm:active`. */
export async function setFixtureExtensionActive(t: TestServer, workspaceId: string, extensionId: string, active: boolean): Promise<void> {
  const { store, graphs } = t.server.services;
  const g = iri(graphs.extensions(workspaceId));
  const x = iri(graphs.resource('extension', extensionId));
  await store.write([
    { kind: 'update', sparql: PREFIXES + sparql`DELETE WHERE { GRAPH ${g} { ${x} wsm:active ?a } }` },
    { kind: 'update', sparql: PREFIXES + sparql`INSERT DATA { GRAPH ${g} { ${x} wsm:active ${boolean(active)} } }` },
  ]);
}

/** A small but real matrix specification: a matrix, three roles, two agents with their roles. */
export function supportMatrixTurtle(base = 'https://example.org/matrices/support'): string {
  return `@prefix mtx: <https://poliglot.io/os/spec/matrix#> .
@prefix iam: <https://poliglot.io/os/spec/iam#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix s: <${base}#> .

<${base}> a mtx:Matrix ;
  rdfs:label "Customer support" ;
  rdfs:comment "Roles and agents of the support desk." .

s:Triage a iam:Role ; rdfs:label "Triage" ; rdfs:comment "Sorts incoming tickets." .
s:Responder a iam:Role ; rdfs:label "Responder" ; rdfs:comment "Answers customers." .
s:Supervisor a iam:Role ; rdfs:label "Supervisor" .

s:TriageBot a iam:Agent ; rdfs:label "Triage bot" ; rdfs:comment "Labels and routes tickets." ;
  iam:hasRole s:Triage .
s:HelpBot a iam:Agent ; rdfs:label "Help bot" ;
  iam:hasRole s:Responder , s:Triage .
`;
}
