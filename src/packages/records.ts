import type { Quad } from 'n3';
import type { QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { prefixes } from '../rdf/vocab.js';
import { sparql, iri, literal, raw, join } from '../rdf/sparql.js';
import { stableId } from '../rdf/ids.js';
import { req, str, bool, time } from '../rdf/bindings.js';
import { rangeAdmits } from './dependencies.js';
import type { IriSet } from '../rdf/iri-set.js';

/**
 * Store reads of the package records (installations and matrices) in a
 * workspace's packages graph, shared by the lifecycle, the deployment, the
 * RDF reads and auto-update.
 */

export interface InstalledRecord {
  id: string;
  name: string;
  currentVersion: string;
  createdAt: string;
  updatedAt: string;
  registryPublisher: string | null;
  registryName: string | null;
  autoUpdate: boolean;
  /** Installed at a version named explicitly: auto-update leaves it until P3 sets auto-update again. */
  pinned: boolean;
}

export interface MatrixRecord { id: string; uri: string; packageName: string; graph: string }

export const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

export class PackageRecords {
  constructor(private readonly store: QuadStore, private readonly graphs: Graphs) {}

  packageId(workspaceId: string, name: string): string { return stableId('package', workspaceId, name); }
  matrixId(workspaceId: string, matrixUri: string): string { return stableId('matrix', workspaceId, matrixUri); }
  packageIri(id: string): string { return this.graphs.resource('package', id); }
  matrixIri(id: string): string { return this.graphs.resource('matrix', id); }

  /** `lead`, a pattern that narrows ?p, comes first: Oxigraph joins in the order written. */
  async installedRecords(workspaceId: string, filter: string, modifiers = '', lead = ''): Promise<InstalledRecord[]> {
    const rows = await this.store.select(sparql`${prefixes}SELECT * WHERE { GRAPH ${iri(this.graphs.packages(workspaceId))} {
      ${raw(lead)}
      ?p a wsm:PackageInstallation ; wsm:id ?id ; wsm:name ?name ; wsm:currentVersion ?currentVersion ;
         wsm:autoUpdate ?autoUpdate ; wsm:createdAt ?createdAt ; wsm:updatedAt ?updatedAt .
      OPTIONAL { ?p wsm:registryPublisher ?registryPublisher } OPTIONAL { ?p wsm:registryName ?registryName }
      OPTIONAL { ?p wsm:pinned ?pinned }
      ${raw(filter)} } } ${raw(modifiers)}`);
    return rows.map((b) => ({
      id: req(b, 'id'), name: req(b, 'name'), currentVersion: req(b, 'currentVersion'), createdAt: time(b, 'createdAt'), updatedAt: time(b, 'updatedAt'),
      registryPublisher: str(b, 'registryPublisher'), registryName: str(b, 'registryName'), autoUpdate: bool(b, 'autoUpdate') ?? false,
      pinned: bool(b, 'pinned') ?? false,
    }));
  }

  async installed(workspaceId: string, name: string): Promise<InstalledRecord | null> {
    return (await this.installedRecords(workspaceId, '', 'LIMIT 1', sparql`?p wsm:name ${literal(name)} .`))[0] ?? null;
  }

  /** `lead`, a pattern that narrows ?m (or ?uri, ?p), comes first: Oxigraph joins in the order written. */
  private async matrixRecords(workspaceId: string, filter = '', lead = ''): Promise<MatrixRecord[]> {
    const rows = await this.store.select(sparql`${prefixes}SELECT ?id ?uri ?packageName ?graph WHERE { GRAPH ${iri(this.graphs.packages(workspaceId))} {
      ${raw(lead)}
      ?m a wsm:Matrix ; wsm:id ?id ; wsm:uri ?uri ; wsm:graph ?graph ; wsm:package ?p . ?p wsm:name ?packageName .
      ${raw(filter)} } } ORDER BY ?uri`);
    return rows.map((b) => ({ id: req(b, 'id'), uri: req(b, 'uri'), packageName: req(b, 'packageName'), graph: req(b, 'graph') }));
  }

  /** Installed matrix by URI, or null. */
  async findMatrix(workspaceId: string, matrixUri: string): Promise<MatrixRecord | null> {
    return (await this.matrixRecords(workspaceId, '', sparql`?m wsm:uri ${iri(matrixUri)} .`)).find((m) => m.uri === matrixUri) ?? null;
  }

  /**
   * Installed matrices whose URI is one of `uris`. A few hundred URIs are
   * looked up by URI in one query; more (a package names every IRI of its
   * Turtle, 120,000 for a large one) are matched against the workspace's
   * matrices read once, which are far fewer than that: looking them up in
   * batches costs a query per batch, slow on a remote engine (docs/figures.md).
   */
  async matricesAmong(workspaceId: string, uris: IriSet | string[]): Promise<MatrixRecord[]> {
    // A set is taken as it is: a large package mentions 100,000 IRIs, and each copy of them held the event loop.
    const wanted: IriSet = Array.isArray(uris) ? new Set(uris) : uris;
    if (wanted.size === 0) return [];
    let found: MatrixRecord[];
    if (wanted.size <= LOOKUP_BY_URI_MAX) {
      found = await this.matrixRecords(workspaceId, '', sparql`VALUES ?uri { ${join([...wanted].map((u) => iri(u)))} } ?m wsm:uri ?uri .`);
    } else {
      found = (await this.matrixRecords(workspaceId)).filter((m) => wanted.has(m.uri));
    }
    return found.sort((a, b) => (a.uri < b.uri ? -1 : a.uri > b.uri ? 1 : 0));
  }

  /** Installed matrices of one package. */
  matricesOfPackage(workspaceId: string, name: string): Promise<MatrixRecord[]> {
    return this.matrixRecords(workspaceId, '', sparql`?p wsm:name ${literal(name)} . ?m wsm:package ?p .`);
  }

  /**
   * Installed packages depending on `name` whose range for it does not
   * admit `version` (their manifest, kept on the installation record, says
   * the range; a record written before the manifest was kept is not known
   * to refuse anything).
   */
  async dependentsRefusing(workspaceId: string, name: string, version: string): Promise<Array<{ name: string; versionRange: string }>> {
    const rows = await this.store.select(sparql`${prefixes}SELECT ?name ?manifest WHERE { GRAPH ${iri(this.graphs.packages(workspaceId))} {
      ?p wsm:dependsOn ${literal(name)} ; a wsm:PackageInstallation ; wsm:name ?name . OPTIONAL { ?p wsm:manifest ?manifest } } } ORDER BY ?name`);
    const refusing: Array<{ name: string; versionRange: string }> = [];
    for (const row of rows) {
      const dependent = req(row, 'name');
      const manifest = str(row, 'manifest');
      if (dependent === name || manifest === null) continue;
      let dependencies: Array<{ name?: unknown; versionRange?: unknown }> = [];
      try {
        dependencies = (JSON.parse(manifest) as { dependencies?: typeof dependencies }).dependencies ?? [];
      } catch {
        continue;
      }
      for (const dep of dependencies) {
        if (dep.name === name && typeof dep.versionRange === 'string' && !rangeAdmits(dep.versionRange, version)) refusing.push({ name: dependent, versionRange: dep.versionRange });
      }
    }
    return refusing;
  }

  /** Names of installed packages whose manifest depends on `name`. */
  async dependentsOf(workspaceId: string, name: string): Promise<string[]> {
    const rows = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?name WHERE { GRAPH ${iri(this.graphs.packages(workspaceId))} {
      ?p wsm:dependsOn ${literal(name)} ; a wsm:PackageInstallation ; wsm:name ?name } } ORDER BY ?name`);
    return rows.map((b) => req(b, 'name')).filter((n) => n !== name);
  }
}

/** IRIs a set of triples names as subject or object. */
export function mentionedIris(quads: Quad[]): Set<string> {
  const out = new Set<string>();
  for (const q of quads) {
    if (q.subject.termType === 'NamedNode') out.add(q.subject.value);
    if (q.object.termType === 'NamedNode') out.add(q.object.value);
  }
  return out;
}

/** Above this many URIs, `matricesAmong` reads the workspace's matrices instead of looking each URI up. */
const LOOKUP_BY_URI_MAX = 500;
