/**
 * Vocabularies as constants, so IRIs are never loose strings in domain code.
 * The service's own vocabulary is described in ontology/wsm.ttl.
 */
import { raw, type SparqlFragment } from './sparql.js';
function namespace<T extends string>(base: string, terms: readonly T[]): { readonly [K in T]: string } & { ns: string } {
  const out: Record<string, string> = { ns: base };
  for (const term of terms) out[term] = base + term;
  return out as { readonly [K in T]: string } & { ns: string };
}

export const RDF = namespace('http://www.w3.org/1999/02/22-rdf-syntax-ns#', ['type'] as const);
export const RDFS = namespace('http://www.w3.org/2000/01/rdf-schema#', ['label', 'comment'] as const);
export const XSD = namespace('http://www.w3.org/2001/XMLSchema#', ['string', 'boolean', 'integer', 'dateTime'] as const);
export const DCTERMS = namespace('http://purl.org/dc/terms/', ['description', 'title'] as const);
export const SH = namespace('http://www.w3.org/ns/shacl#', ['ValidationReport', 'conforms', 'result'] as const);

/** Matrix specification vocabulary of the ecosystem (docs/rdf-model.md). */
export const MTX = namespace('https://poliglot.io/os/spec/matrix#', ['Matrix', 'imports'] as const);
export const IAM = namespace('https://poliglot.io/os/spec/iam#', ['Role', 'Agent', 'hasRole'] as const);

/** The service's own vocabulary (ontology/wsm.ttl). */
export const WSM = namespace('https://w3id.org/wsm/ns#', [
  // classes
  'Workspace', 'User', 'Membership', 'Principal', 'RoleAssignment', 'Role', 'Agent',
  'PackageInstallation', 'Matrix', 'LifecycleCommand', 'CommandEvent', 'SlashCommand', 'Extension',
  // built-in individuals
  'WorkspaceAdministrator',
  // properties
  'id', 'slug', 'name', 'engineVersion', 'owner', 'createdAt', 'updatedAt',
  'username', 'email', 'firstName', 'lastName', 'website', 'emailVerified',
  'workspace', 'user', 'member', 'principal', 'principalType', 'actor', 'role', 'agent',
  'uri', 'label', 'description', 'matrix', 'definedBy', 'graph',
  'currentVersion', 'registryPublisher', 'registryName', 'autoUpdate', 'package', 'packageName',
  'version', 'commandType', 'status', 'errorMessage', 'message', 'level', 'sequence', 'command',
  'validationReport', 'validationConforms', 'validationViolationCount', 'validationWarningCount', 'validationInfoCount',
  'alias', 'interpretation', 'scriptType', 'scriptContent',
  'targetMatrix', 'active', 'content', 'lastCommand', 'dependencyCount', 'matrixName', 'manifest',
  // slash command parameters (docs/slash-commands.md)
  'Parameter', 'parameter', 'kind', 'datatype', 'required', 'position',
  // API keys (docs/iam.md)
  'ApiKey', 'keyHash', 'keyPrefix', 'expiresAt', 'lastUsedAt', 'systemAdmin',
  // the hosted registry, dependencies and pins (docs/packages.md)
  'Publisher', 'RegistryPackage', 'PackageVersion', 'publisher', 'ownerUsername', 'registryPackage', 'sha256', 'archiveSize',
  'publishedAt', 'publishedBy', 'yanked', 'yankReason', 'providesMatrix', 'definesRole', 'dependsOn', 'pinned', 'parentCommand',
  // several instances on the remote store (docs/store.md, "Command leases", the cache rule)
  'leaseOwner', 'ServiceInstance', 'leaseExpiresAt', 'generation',
  // the index of workspaces (src/workspaces/workspace-index.ts)
  'WorkspaceIndex', 'unfinishedIn',
  // sign-in (docs/iam.md, "Signing in"): the OpenID provider's records, its keys, passwords
  'SignInRecord', 'SignInKeys', 'PasswordCredential', 'recordKind', 'payload', 'grantId', 'sessionUid', 'consumedAt', 'passwordHash',
  // variables and secrets (docs/secrets.md)
  'Variable', 'ManagedSecret', 'SecretValue', 'SecretRead', 'ExchangeKey', 'variableType', 'value', 'secret', 'scope', 'scopeEntity',
  'sealedValue', 'readAt', 'usedAt', 'updatedBy',
] as const);

export const PREFIXES = `PREFIX wsm: <${WSM.ns}>
PREFIX rdf: <${RDF.ns}>
PREFIX rdfs: <${RDFS.ns}>
PREFIX xsd: <${XSD.ns}>
PREFIX mtx: <${MTX.ns}>
PREFIX iam: <${IAM.ns}>
PREFIX dcterms: <${DCTERMS.ns}>
PREFIX sh: <${SH.ns}>
`;

/** `PREFIXES` as a fragment of the `sparql` tag: `sparql\`${prefixes}SELECT ...\``. */
export const prefixes: SparqlFragment = raw(PREFIXES);
