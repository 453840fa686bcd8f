import type { Quad } from 'n3';
import { RDF } from '../rdf/vocab.js';

/** The ecosystem's vocabularies of package declarations (docs/secrets.md). */
export const BUILD_NS = 'https://poliglot.io/os/spec/build#';
export const SECRETS_NS = 'https://poliglot.io/os/spec/secrets#';
const RDFS_IS_DEFINED_BY = 'http://www.w3.org/2000/01/rdf-schema#isDefinedBy';

export interface VariableDeclaration {
  uri: string;
  variableType: string | null;
  label: string | null;
  description: string | null;
  required: boolean;
  /** The matrix of the package that defines it (`rdfs:isDefinedBy`). */
  sourceMatrix: string;
}

export interface SecretDeclaration {
  uri: string;
  label: string | null;
  description: string | null;
  required: boolean;
  sourceMatrix: string;
}

export interface Declarations { variables: VariableDeclaration[]; secrets: SecretDeclaration[] }

export const NO_DECLARATIONS: Declarations = { variables: [], secrets: [] };

/**
 * The variables (`build:Variable`) and managed secrets
 * (`secrets:ManagedSecret`) the quads declare, each tied by
 * `rdfs:isDefinedBy` to one of `matrixUris` (the package's own matrices;
 * declarations of other matrices are not the package's). `required` is true
 * unless said otherwise. Sorted by URI.
 */
export function extractDeclarations(quads: Iterable<Quad>, matrixUris: Iterable<string>): Declarations {
  const matrices = new Set(matrixUris);
  const bySubject = new Map<string, Map<string, string[]>>();
  const variables = new Set<string>();
  const secrets = new Set<string>();
  for (const q of quads) {
    if (q.subject.termType !== 'NamedNode') continue;
    const s = q.subject.value;
    const p = q.predicate.value;
    if (p === RDF.type && q.object.value === `${BUILD_NS}Variable`) variables.add(s);
    if (p === RDF.type && q.object.value === `${SECRETS_NS}ManagedSecret`) secrets.add(s);
    if (p !== RDFS_IS_DEFINED_BY && !p.startsWith(BUILD_NS) && !p.startsWith(SECRETS_NS)) continue;
    let props = bySubject.get(s);
    if (!props) {
      props = new Map<string, string[]>();
      bySubject.set(s, props);
    }
    const list = props.get(p) ?? [];
    list.push(q.object.value);
    props.set(p, list);
  }
  const first = (s: string, p: string): string | null => bySubject.get(s)?.get(p)?.[0] ?? null;
  const matrixOf = (s: string): string | null => (bySubject.get(s)?.get(RDFS_IS_DEFINED_BY) ?? []).find((m) => matrices.has(m)) ?? null;
  const required = (text: string | null): boolean => text === null || ['true', '1'].includes(text.trim().toLowerCase());
  const out: Declarations = { variables: [], secrets: [] };
  for (const uri of [...variables].sort()) {
    const sourceMatrix = matrixOf(uri);
    if (!sourceMatrix) continue;
    out.variables.push({
      uri, sourceMatrix, variableType: first(uri, `${BUILD_NS}variableType`), label: first(uri, `${BUILD_NS}label`),
      description: first(uri, `${BUILD_NS}description`), required: required(first(uri, `${BUILD_NS}required`)),
    });
  }
  for (const uri of [...secrets].sort()) {
    const sourceMatrix = matrixOf(uri);
    if (!sourceMatrix) continue;
    out.secrets.push({
      uri, sourceMatrix, label: first(uri, `${SECRETS_NS}label`), description: first(uri, `${SECRETS_NS}description`),
      required: required(first(uri, `${SECRETS_NS}required`)),
    });
  }
  return out;
}
