/**
 * The derived graph of a matrix (docs/rdf-model.md, "Matrix graphs"): the
 * roles and agents a matrix specification (plus its active extensions)
 * defines, as service records, and one AGENT principal per agent. Ids come
 * from stable keys, so a reinstall gives the same ids and role assignments
 * keep pointing at them.
 */
import { DataFactory, Writer, type Quad, type Quad_Object, type Term } from 'n3';
import type { Graphs } from '../rdf/graphs.js';
import { stableId } from '../rdf/ids.js';
import { DCTERMS, IAM, RDF, RDFS, WSM, XSD } from '../rdf/vocab.js';

const { namedNode, literal, quad } = DataFactory;

export interface DeriveInput {
  graphs: Graphs;
  workspaceId: string;
  /** Id of the matrix record (`stableId('matrix', W, matrixUri)`). */
  matrixId: string;
  /** The matrix specification, with the quads of its active extensions. */
  quads: Quad[];
  /** ISO date-time of this derivation (updatedAt, and createdAt of new records). */
  now: string;
  /** Resource IRI -> createdAt of an earlier derivation, kept on re-derivation. */
  createdAt?: Map<string, string>;
}

export interface DerivedMatrix {
  /** The derived graph as N-Triples (load it into `graphs.derived(W, M)`). */
  ntriples: string;
  /** Resource IRIs (`<base>id/role/R`) of the roles, sorted by role URI. */
  roleIris: string[];
  /** Resource IRIs (`<base>id/agent/G`) of the agents, sorted by agent URI. */
  agentIris: string[];
  /** Resource IRIs (`<base>id/principal/Q`) of the agents' principals, in the order of agentIris. */
  principalIris: string[];
}

/** Stable ids of the derived records (docs/rdf-model.md). */
export const derivedIds = {
  role: (workspaceId: string, roleUri: string) => stableId('role', workspaceId, roleUri),
  agent: (workspaceId: string, agentUri: string) => stableId('agent', workspaceId, agentUri),
  agentPrincipal: (workspaceId: string, agentUri: string) => stableId('principal', workspaceId, 'agent', agentUri),
};

/** Named subjects typed `type`, sorted. */
function subjectsOfType(quads: Quad[], type: string): string[] {
  const out = new Set<string>();
  for (const q of quads) {
    if (q.predicate.value === RDF.type && q.object.termType === 'NamedNode' && q.object.value === type
      && q.subject.termType === 'NamedNode') out.add(q.subject.value);
  }
  return [...out].sort();
}

/**
 * The text of one of the subject's `predicates`, in that order of preference;
 * among values of one predicate: no language tag first, then English, then
 * the others by language and text, so the choice is stable.
 */
function pickText(statements: Quad[], predicates: string[]): string | null {
  for (const predicate of predicates) {
    const values = statements
      .filter((q) => q.predicate.value === predicate && q.object.termType === 'Literal')
      .map((q) => ({ text: q.object.value, lang: (q.object as { language?: string }).language ?? '' }));
    if (values.length === 0) continue;
    const rank = (lang: string) => (lang === '' ? 0 : lang.toLowerCase() === 'en' || lang.toLowerCase().startsWith('en-') ? 1 : 2);
    values.sort((a, b) => rank(a.lang) - rank(b.lang) || a.lang.localeCompare(b.lang) || a.text.localeCompare(b.text));
    return values[0]!.text;
  }
  return null;
}

/** The last segment of an IRI, as a label of last resort. */
function localName(uri: string): string {
  const name = uri.replace(/[#/]+$/, '').split(/[#/:]/).pop();
  return name || uri;
}

/**
 * Derives the `<...>/matrices/M/derived` graph from a matrix's quads:
 * `wsm:Role` records for `iam:Role`s, `wsm:Agent` records for `iam:Agent`s
 * with one `wsm:role` per `iam:hasRole` (pointing at the stable role id,
 * also when another matrix defines that role), and a `wsm:Principal` of type
 * AGENT per agent. Roles and agents named by blank nodes are skipped (the
 * SHACL shapes refuse them).
 */
export function deriveMatrix(input: DeriveInput): DerivedMatrix {
  const { graphs, workspaceId: ws, matrixId, quads, now } = input;
  // Written as N-Triples a record at a time, so the quads die young instead of all 135,000 of a
  // large matrix surviving to the end, where the collector copies them (docs/figures.md).
  const writer = new Writer({ format: 'N-Triples' });
  const chunks: string[] = [];
  let pending: Quad[] = [];
  const flush = () => {
    if (pending.length) chunks.push(writer.quadsToString(pending));
    pending = [];
  };
  const add = (s: string, p: string, o: Quad_Object | Term) => pending.push(quad(namedNode(s), namedNode(p), o as Quad_Object));
  const time = (value: string) => literal(value, namedNode(XSD.dateTime));
  const createdAt = (iri: string) => time(input.createdAt?.get(iri) ?? now);
  const workspace = namedNode(graphs.resource('workspace', ws));
  const matrix = namedNode(graphs.resource('matrix', matrixId));

  // statements by named subject
  const bySubject = new Map<string, Quad[]>();
  for (const q of quads) {
    if (q.subject.termType !== 'NamedNode') continue;
    const list = bySubject.get(q.subject.value);
    if (list) list.push(q); else bySubject.set(q.subject.value, [q]);
  }
  const about = (uri: string) => bySubject.get(uri) ?? [];

  const record = (kind: 'role' | 'agent', id: string, uri: string, type: string): string => {
    const iri = graphs.resource(kind, id);
    add(iri, RDF.type, namedNode(type));
    add(iri, WSM.id, literal(id));
    add(iri, WSM.uri, namedNode(uri));
    add(iri, WSM.label, literal(pickText(about(uri), [RDFS.label]) ?? localName(uri)));
    const description = pickText(about(uri), [RDFS.comment, DCTERMS.description]);
    if (description !== null) add(iri, WSM.description, literal(description));
    add(iri, WSM.matrix, matrix);
    add(iri, WSM.workspace, workspace);
    add(iri, WSM.createdAt, createdAt(iri));
    add(iri, WSM.updatedAt, time(now));
    flush();
    return iri;
  };

  const roleIris = subjectsOfType(quads, IAM.Role).map((uri) => record('role', derivedIds.role(ws, uri), uri, WSM.Role));

  const agentIris: string[] = [];
  const principalIris: string[] = [];
  for (const uri of subjectsOfType(quads, IAM.Agent)) {
    const agentIri = record('agent', derivedIds.agent(ws, uri), uri, WSM.Agent);
    const roles = new Set(about(uri)
      .filter((q) => q.predicate.value === IAM.hasRole && q.object.termType === 'NamedNode')
      .map((q) => q.object.value));
    for (const roleUri of [...roles].sort()) add(agentIri, WSM.role, namedNode(graphs.resource('role', derivedIds.role(ws, roleUri))));

    const principalId = derivedIds.agentPrincipal(ws, uri);
    const principalIri = graphs.resource('principal', principalId);
    add(principalIri, RDF.type, namedNode(WSM.Principal));
    add(principalIri, WSM.id, literal(principalId));
    add(principalIri, WSM.principalType, literal('AGENT'));
    add(principalIri, WSM.actor, namedNode(agentIri));
    add(principalIri, WSM.workspace, workspace);
    add(principalIri, WSM.createdAt, createdAt(principalIri));
    agentIris.push(agentIri);
    principalIris.push(principalIri);
    flush();
  }

  flush();
  const ntriples = chunks.join('');
  return { ntriples, roleIris, agentIris, principalIris };
}
