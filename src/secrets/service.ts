import { updateOp, type QuadStore, type WriteOp } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import type { Logger } from '../logger.js';
import type { WorkspaceAccess } from '../workspaces/service.js';
import { prefixes } from '../rdf/vocab.js';
import { sparql, sequence, iri, isValidIri, literal, dateTime, boolean, raw, join, optionalTriple } from '../rdf/sparql.js';
import { req, str, bool, time } from '../rdf/bindings.js';
import { newId, stableId, UUID_PATTERN } from '../rdf/ids.js';
import { Clock } from '../rdf/clock.js';
import { AppError, badRequest, conflict, forbidden, notFound } from '../errors.js';
import {
  ALGORITHM, NONCE_BYTES, decodeBase64, exchangeKey, openFromClient, publicKeyOf, sealForClient, toBase64, type ExchangeKey, type SecretKeyring,
} from './crypto.js';
import type { Declarations } from './declarations.js';

export type Scope = 'workspace' | 'principal';
export const SCOPES: Scope[] = ['workspace', 'principal'];

export interface VariableView {
  id: string; uri: string; value: string | null; hasValue: boolean; variableType: string | null; label: string | null; required: boolean;
}
export interface SecretView {
  id: string; uri: string; description: string | null; createdAt: string; updatedAt: string;
  allowedScopes: Scope[]; matrix: { uri: string; name: string };
}
export interface SecretRead { id: string; secretUri: string; username: string; scope: Scope; scopeEntityId: string | null; readAt: string }

/** An end-to-end encrypted value as a client sends it (a value set, an install's secret binding). */
export interface SealedFromClient { encryptedValue: string; nonce: string; clientPublicKey: string; keyId: string }
/** A secret binding of an install, opened and sealed again under the secrets key. */
export interface OpenedBinding { uri: string; sealed: string }

/** Largest plaintext of a secret value. */
const MAX_VALUE_BYTES = 64 * 1024;

/**
 * Variables and managed secrets (docs/secrets.md). Variables are plaintext
 * records in the workspace's variables graph. Secret metadata and the record
 * of every value read are in the workspace's secrets graph; values are sealed
 * under the secrets key in a graph outside every query view. Values cross
 * the wire only end to end encrypted, each exchange under a keyId used once.
 */
export class SecretsService {
  private readonly clock = new Clock();

  constructor(
    private readonly store: QuadStore,
    private readonly graphs: Graphs,
    private readonly keyring: SecretKeyring | null,
    private readonly logger: Logger,
  ) {}

  // ------------------------------------------------------------------ ids

  variableId(ws: string, uri: string): string { return stableId('variable', ws, uri); }
  secretIdOf(ws: string, uri: string): string { return stableId('secret', ws, uri); }
  private variableIri(id: string): string { return this.graphs.resource('variable', id); }
  private secretIri(id: string): string { return this.graphs.resource('secret', id); }
  private valueIri(ws: string, uri: string, scope: Scope, entity: string): string {
    return this.graphs.resource('secret-value', stableId('secret-value', ws, uri, scope, entity));
  }
  /** What a sealed value is bound to: it opens only there. */
  private place(ws: string, uri: string, scope: Scope, entity: string): string { return `${ws}\n${uri}\n${scope}\n${entity}`; }

  private requireKeyring(): SecretKeyring {
    if (!this.keyring) {
      throw new AppError('SERVICE_UNAVAILABLE', 'Secret values are off on this service: its operator has not set WSM_SECRETS_KEY_FILE (the key that seals them at rest)');
    }
    return this.keyring;
  }

  // ------------------------------------------------------------ variables

  async listVariables(ws: string): Promise<VariableView[]> {
    const rows = await this.store.select(sparql`${prefixes}SELECT ?id ?uri ?value ?type ?label ?required WHERE { GRAPH ${iri(this.graphs.variables(ws))} {
      ?v a wsm:Variable ; wsm:id ?id ; wsm:uri ?uri ; wsm:required ?required .
      OPTIONAL { ?v wsm:value ?value } OPTIONAL { ?v wsm:variableType ?type } OPTIONAL { ?v wsm:label ?label } } } ORDER BY STR(?uri)`);
    return rows.map((b) => {
      const value = str(b, 'value');
      return { id: req(b, 'id'), uri: req(b, 'uri'), value, hasValue: value !== null, variableType: str(b, 'type'), label: str(b, 'label'), required: bool(b, 'required') ?? true };
    });
  }

  /** PUT .../{id}/value: null clears an optional variable. */
  async setVariable(ws: string, id: string, value: string | null): Promise<VariableView> {
    const found = (await this.listVariables(ws)).find((v) => v.id === id.toLowerCase() || v.uri === id);
    if (!found) throw notFound(`Variable "${id}" is not declared by any package installed in this workspace`);
    if (value === null && found.required) throw badRequest(`Variable <${found.uri}> is required; it cannot be cleared, only set to another value`);
    const g = iri(this.graphs.variables(ws));
    const v = iri(this.variableIri(found.id));
    // Only while the variable is still declared: an uninstall racing the set leaves no value behind.
    const applied = await this.store.writeIf({ ask: sparql`${prefixes}ASK { GRAPH ${g} { ${v} a wsm:Variable } }`, expect: true }, [updateOp(sparql`${prefixes}${sequence([
      sparql`DELETE WHERE { GRAPH ${g} { ${v} wsm:value ?old } }`,
      sparql`DELETE WHERE { GRAPH ${g} { ${v} wsm:updatedAt ?t } }`,
      sparql`INSERT DATA { GRAPH ${g} { ${v} wsm:updatedAt ${dateTime(this.clock.now())} . ${optionalTriple(v, raw('wsm:value'), value === null ? null : literal(value))} } }`,
    ])}`, [this.graphs.variables(ws)])]);
    if (!applied) throw notFound(`Variable "${id}" is no longer declared by any package installed in this workspace`);
    return { ...found, value, hasValue: value !== null };
  }

  // -------------------------------------------------------- secret metadata

  async listSecrets(ws: string, prefix?: string): Promise<SecretView[]> {
    const rows = await this.store.select(sparql`${prefixes}SELECT ?id ?uri ?description ?label ?created ?updated ?matrix ?matrixName WHERE { GRAPH ${iri(this.graphs.secrets(ws))} {
      ?s a wsm:ManagedSecret ; wsm:id ?id ; wsm:uri ?uri ; wsm:createdAt ?created ; wsm:updatedAt ?updated ; wsm:matrix ?matrix ; wsm:matrixName ?matrixName .
      OPTIONAL { ?s wsm:description ?description } OPTIONAL { ?s wsm:label ?label } } } ORDER BY STR(?uri)`);
    return rows
      .map((b) => ({
        id: req(b, 'id'), uri: req(b, 'uri'), description: str(b, 'description') ?? str(b, 'label'),
        createdAt: time(b, 'created'), updatedAt: time(b, 'updated'), allowedScopes: [...SCOPES],
        matrix: { uri: req(b, 'matrix'), name: req(b, 'matrixName') },
      }))
      .filter((s) => prefix === undefined || s.uri.startsWith(prefix));
  }

  /**
   * A secret by its id (the UUID), its IRI, or a QName `prefix:Name`: the
   * secrets whose IRI ends in `Name` (after `#` or `/`), the one of the
   * matrix named `prefix` when several do.
   */
  async getSecret(ws: string, secretId: string): Promise<SecretView> {
    const all = await this.listSecrets(ws);
    const direct = all.find((s) => s.id === secretId.toLowerCase() || s.uri === secretId);
    if (direct) return direct;
    const qname = /^([A-Za-z_][\w.-]*)?:([^/:#]+)$/.exec(secretId);
    if (qname && !UUID_PATTERN.test(secretId)) {
      const [, prefix, local] = qname;
      const named = all.filter((s) => s.uri.endsWith(`#${local}`) || s.uri.endsWith(`/${local}`));
      const ofMatrix = named.filter((s) => s.matrix.name === prefix);
      if (ofMatrix.length === 1) return ofMatrix[0]!;
      if (named.length === 1) return named[0]!;
      if (named.length > 1) throw badRequest(`"${secretId}" names several secrets (${named.map((s) => `<${s.uri}>`).join(', ')}); give the IRI`);
    }
    throw notFound(`Secret "${secretId}" is not declared by any package installed in this workspace`);
  }

  /** The record of value reads, newest first (administrators). */
  async reads(ws: string, secretUri?: string): Promise<SecretRead[]> {
    if (secretUri !== undefined && !isValidIri(secretUri)) throw badRequest(`uri must be the absolute IRI of a secret, not ${JSON.stringify(secretUri.slice(0, 200))}`);
    const rows = await this.store.select(sparql`${prefixes}SELECT ?id ?uri ?username ?scope ?entity ?at WHERE { GRAPH ${iri(this.graphs.secrets(ws))} {
      ?r a wsm:SecretRead ; wsm:id ?id ; wsm:uri ?uri ; wsm:username ?username ; wsm:scope ?scope ; wsm:readAt ?at . OPTIONAL { ?r wsm:scopeEntity ?entity }
      ${raw(secretUri ? sparql`FILTER (?uri = ${iri(secretUri)})` : '')} } } ORDER BY DESC(?at)`);
    return rows.map((b) => ({
      id: req(b, 'id'), secretUri: req(b, 'uri'), username: req(b, 'username'), scope: req(b, 'scope') as Scope,
      scopeEntityId: str(b, 'entity') || null, readAt: time(b, 'at'),
    }));
  }

  // ------------------------------------------------------ exchanges

  /** POST .../pubkey: a fresh server key for one exchange of this caller in this workspace. */
  pubkey(access: WorkspaceAccess, username: string): { serverPublicKey: string; keyId: string; expiresAt: string } {
    const minted = this.requireKeyring().mintExchangeKey(access.workspace.id, username, Date.now());
    return { serverPublicKey: toBase64(minted.serverPublicKey), keyId: minted.keyId, expiresAt: new Date(minted.expiresAt).toISOString() };
  }

  /** A keyId checked (ours, this workspace and caller, not expired); whether it was used is checked by the write that uses it. */
  private openKeyId(access: WorkspaceAccess, username: string, keyId: string): ExchangeKey {
    const key = this.requireKeyring().openExchangeKey(keyId);
    if (!key) throw badRequest('keyId is not one this service issued; ask POST /api/v1/secrets/{workspace}/pubkey for one');
    if (key.workspaceId !== access.workspace.id) throw badRequest('keyId was issued for another workspace');
    if (key.username !== username) throw badRequest('keyId was issued to another caller');
    if (key.expiresAt < Date.now()) throw badRequest('keyId has expired (each serves one exchange within minutes); ask POST .../pubkey for a new one');
    return key;
  }

  /** The write that marks a keyId used, and forgets used keyIds past their expiry; with the condition that it was not used. */
  private useKeyOps(key: ExchangeKey): { condition: { ask: ReturnType<typeof sparql>; expect: boolean }; op: WriteOp } {
    const g = iri(this.graphs.exchangeKeys);
    const k = iri(this.graphs.resource('exchange-key', key.id));
    const now = new Date().toISOString();
    return {
      condition: { ask: sparql`${prefixes}ASK { GRAPH ${g} { ${k} wsm:usedAt ?t } }`, expect: false },
      op: updateOp(sparql`${prefixes}${sequence([
        sparql`DELETE { GRAPH ${g} { ?old ?p ?o } } WHERE { GRAPH ${g} { ?old wsm:expiresAt ?e ; ?p ?o FILTER (?e < ${dateTime(now)}) } }`,
        sparql`INSERT DATA { GRAPH ${g} { ${k} a wsm:ExchangeKey ; wsm:usedAt ${dateTime(now)} ; wsm:expiresAt ${dateTime(new Date(key.expiresAt))} } }`,
      ])}`, [this.graphs.exchangeKeys]),
    };
  }

  private refusedUsed(): AppError {
    return conflict('keyId has been used already; each serves one exchange: ask POST .../pubkey for a new one');
  }

  /** Opens a client's end-to-end encrypted value with its keyId (not marking the keyId used). */
  private openClientValue(access: WorkspaceAccess, username: string, input: SealedFromClient, what = 'the value'): { key: ExchangeKey; plaintext: Uint8Array } {
    const clientKey = decodeBase64('clientPublicKey', input.clientPublicKey, 32);
    const nonce = decodeBase64('nonce', input.nonce, NONCE_BYTES);
    const ciphertext = decodeBase64('encryptedValue', input.encryptedValue);
    if (ciphertext.length > MAX_VALUE_BYTES + 16) throw badRequest(`encryptedValue is larger than ${MAX_VALUE_BYTES} bytes`);
    const key = this.openKeyId(access, username, input.keyId);
    const plaintext = openFromClient(exchangeKey(key.privateKey, clientKey), nonce, ciphertext);
    try {
      new TextDecoder('utf-8', { fatal: true }).decode(plaintext);
    } catch {
      throw badRequest(`${what} is not UTF-8 text once decrypted`);
    }
    return { key, plaintext };
  }

  /** The scope a value call names, and the entity it concerns, checked against the caller's access. */
  private async scopeOf(access: WorkspaceAccess, scope: Scope, scopeEntityId: string | undefined, mode: 'set' | 'read'): Promise<{ scope: Scope; entity: string }> {
    if (scope === 'workspace') {
      if (scopeEntityId !== undefined && scopeEntityId !== access.workspace.id && scopeEntityId !== access.workspace.slug) {
        throw badRequest('scopeEntityId of a workspace-scope value is the workspace itself (its id or slug), or left out');
      }
      if (mode === 'set' && !access.isAdmin) throw forbidden('Only administrators of this workspace set workspace-scope values');
      return { scope, entity: '' };
    }
    const entity = scopeEntityId ?? access.principalId;
    if (!entity) throw badRequest('scopeEntityId is required: you have no principal in this workspace');
    const own = entity === access.principalId;
    if (mode === 'read' && !own) throw forbidden('A principal-scope value is read by its principal alone');
    if (mode === 'set' && !own && !access.isAdmin) throw forbidden('A principal-scope value is set by its principal or by administrators');
    if (!own) {
      const exists = await this.store.ask(sparql`${prefixes}ASK { GRAPH ${iri(this.graphs.iam(access.workspace.id))} { ?p a wsm:Principal ; wsm:id ${literal(entity)} } }`);
      if (!exists) throw notFound(`Principal "${entity}" is not in this workspace`);
    }
    return { scope, entity };
  }

  private valueOp(ws: string, secret: { id: string; uri: string }, scope: Scope, entity: string, sealed: string, username: string, now: string): WriteOp {
    const g = iri(this.graphs.secretValues(ws));
    const v = iri(this.valueIri(ws, secret.uri, scope, entity));
    return updateOp(sparql`${prefixes}${sequence([
      sparql`DELETE WHERE { GRAPH ${g} { ${v} ?p ?o } }`,
      sparql`INSERT DATA { GRAPH ${g} { ${v} a wsm:SecretValue ; wsm:secret ${iri(this.secretIri(secret.id))} ; wsm:uri ${iri(secret.uri)} ;
        wsm:scope ${literal(scope)} ; wsm:scopeEntity ${literal(entity)} ; wsm:sealedValue ${literal(sealed)} ;
        wsm:updatedAt ${dateTime(now)} ; wsm:updatedBy ${literal(username)} } }`,
      sparql`DELETE WHERE { GRAPH ${iri(this.graphs.secrets(ws))} { ${iri(this.secretIri(secret.id))} wsm:updatedAt ?t } }`,
      sparql`INSERT DATA { GRAPH ${iri(this.graphs.secrets(ws))} { ${iri(this.secretIri(secret.id))} wsm:updatedAt ${dateTime(now)} } }`,
    ])}`, [this.graphs.secretValues(ws), this.graphs.secrets(ws)]);
  }

  /** PUT .../{secretId}/value. */
  async setValue(access: WorkspaceAccess, username: string, secretId: string, input: SealedFromClient & { scope: Scope; scopeEntityId?: string | undefined }): Promise<void> {
    const keyring = this.requireKeyring();
    const ws = access.workspace.id;
    const secret = await this.getSecret(ws, secretId);
    const { scope, entity } = await this.scopeOf(access, input.scope, input.scopeEntityId, 'set');
    const { key, plaintext } = this.openClientValue(access, username, input);
    const sealed = keyring.sealValue(plaintext, this.place(ws, secret.uri, scope, entity));
    const use = this.useKeyOps(key);
    // The keyId unused and the secret still declared (an uninstall racing the set leaves no value behind).
    const declared = sparql`GRAPH ${iri(this.graphs.secrets(ws))} { ${iri(this.secretIri(secret.id))} a wsm:ManagedSecret }`;
    const ask = sparql`${prefixes}ASK { ${raw(declared)} FILTER NOT EXISTS { GRAPH ${iri(this.graphs.exchangeKeys)} { ${iri(this.graphs.resource('exchange-key', key.id))} wsm:usedAt ?t } } }`;
    const applied = await this.store.writeIf({ ask, expect: true }, [use.op, this.valueOp(ws, secret, scope, entity, sealed, username, this.clock.now())]);
    if (!applied) {
      if (!await this.store.ask(sparql`${prefixes}ASK { ${raw(declared)} }`)) throw notFound(`Secret "${secretId}" is no longer declared by any package installed in this workspace`);
      throw this.refusedUsed();
    }
    this.logger.info({ workspace: ws, secret: secret.uri, scope, username }, 'secret value set');
  }

  /** GET .../{secretId}/value: the value encrypted for the caller's key; the read is recorded. */
  async readValue(access: WorkspaceAccess, username: string, secretId: string, input: { clientPublicKey: string; keyId: string; scope: Scope; scopeEntityId?: string | undefined }):
    Promise<{ encryptedValue: string; nonce: string; algorithm: string; serverPublicKey: string }> {
    const keyring = this.requireKeyring();
    const ws = access.workspace.id;
    const secret = await this.getSecret(ws, secretId);
    const { scope, entity } = await this.scopeOf(access, input.scope, input.scopeEntityId, 'read');
    const clientKey = decodeBase64('clientPublicKey', input.clientPublicKey, 32);
    const key = this.openKeyId(access, username, input.keyId);
    const symmetric = exchangeKey(key.privateKey, clientKey);
    const rows = await this.store.select(sparql`${prefixes}SELECT ?sealed WHERE { GRAPH ${iri(this.graphs.secretValues(ws))} {
      ${iri(this.valueIri(ws, secret.uri, scope, entity))} wsm:sealedValue ?sealed } }`);
    if (!rows.length) throw notFound(`Secret <${secret.uri}> has no ${scope}-scope value${scope === 'principal' ? ' for this principal' : ''}`);
    const plaintext = keyring.openValue(req(rows[0]!, 'sealed'), this.place(ws, secret.uri, scope, entity));
    const now = this.clock.now();
    const use = this.useKeyOps(key);
    const readId = newId();
    const g = iri(this.graphs.secrets(ws));
    const r = iri(this.graphs.resource('secret-read', readId));
    const record = updateOp(sparql`${prefixes}INSERT DATA { GRAPH ${g} { ${r} a wsm:SecretRead ; wsm:id ${literal(readId)} ; wsm:secret ${iri(this.secretIri(secret.id))} ;
      wsm:uri ${iri(secret.uri)} ; wsm:username ${literal(username)} ; wsm:scope ${literal(scope)} ; wsm:scopeEntity ${literal(entity)} ; wsm:readAt ${dateTime(now)} } }`,
    [this.graphs.secrets(ws)]);
    if (!await this.store.writeIf(use.condition, [use.op, record])) throw this.refusedUsed();
    this.logger.info({ workspace: ws, secret: secret.uri, scope, username }, 'secret value read');
    const out = sealForClient(symmetric, plaintext);
    return { encryptedValue: toBase64(out.ciphertext), nonce: toBase64(out.nonce), algorithm: ALGORITHM, serverPublicKey: toBase64(publicKeyOf(key.privateKey)) };
  }

  // ------------------------------------------------------------ installs

  /**
   * The secret bindings of an install request, opened now: each keyId is
   * used (and marked so) before the command exists, and the values are
   * sealed under the secrets key for the command to store.
   */
  async openBindings(access: WorkspaceAccess, username: string, bindings: Array<SealedFromClient & { uri: string }>): Promise<OpenedBinding[]> {
    if (bindings.length === 0) return [];
    const keyring = this.requireKeyring();
    const ws = access.workspace.id;
    const seen = new Set<string>();
    const opened = bindings.map((b) => {
      if (seen.has(b.uri)) throw badRequest(`secretBindings names <${b.uri}> twice`);
      seen.add(b.uri);
      const { key, plaintext } = this.openClientValue(access, username, b, `the value bound to <${b.uri}>`);
      return { uri: b.uri, key, sealed: keyring.sealValue(plaintext, this.place(ws, b.uri, 'workspace', '')) };
    });
    if (new Set(opened.map((o) => o.key.id)).size !== opened.length) throw badRequest('secretBindings use one keyId twice; each serves one exchange');
    for (const o of opened) {
      const use = this.useKeyOps(o.key);
      if (!await this.store.writeIf(use.condition, [use.op])) throw this.refusedUsed();
    }
    return opened.map((o) => ({ uri: o.uri, sealed: o.sealed }));
  }

  /** Variables and secrets of a package as installed now (its records), with what the values are. */
  private async ofPackage(ws: string, packageName: string): Promise<{ variables: Map<string, string | null>; secrets: Set<string> }> {
    const [vars, secrets] = await Promise.all([
      this.store.select(sparql`${prefixes}SELECT ?uri ?value WHERE { GRAPH ${iri(this.graphs.variables(ws))} {
        ?v a wsm:Variable ; wsm:uri ?uri ; wsm:package ${literal(packageName)} OPTIONAL { ?v wsm:value ?value } } }`),
      this.store.select(sparql`${prefixes}SELECT ?uri WHERE { GRAPH ${iri(this.graphs.secrets(ws))} { ?s a wsm:ManagedSecret ; wsm:uri ?uri ; wsm:package ${literal(packageName)} } }`),
    ]);
    return { variables: new Map(vars.map((b) => [req(b, 'uri'), str(b, 'value')])), secrets: new Set(secrets.map((b) => req(b, 'uri'))) };
  }

  /** Declarations among these URIs that another installed package made. */
  async declaredElsewhere(ws: string, packageName: string, uris: string[]): Promise<Array<{ uri: string; packageName: string }>> {
    if (!uris.length) return [];
    const rows = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?uri ?pkg WHERE { VALUES ?uri { ${join(uris.map((u) => iri(u)))} }
      VALUES ?g { ${iri(this.graphs.variables(ws))} ${iri(this.graphs.secrets(ws))} }
      GRAPH ?g { ?d wsm:uri ?uri ; wsm:package ?pkg FILTER (?pkg != ${literal(packageName)}) } }`);
    return rows.map((b) => ({ uri: req(b, 'uri'), packageName: req(b, 'pkg') }));
  }

  /** URIs of secrets with a workspace-scope value. */
  private async withWorkspaceValue(ws: string, uris: string[]): Promise<Set<string>> {
    if (!uris.length) return new Set();
    const rows = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?uri WHERE { VALUES ?uri { ${join(uris.map((u) => iri(u)))} }
      GRAPH ${iri(this.graphs.secretValues(ws))} { ?v wsm:uri ?uri ; wsm:scope "workspace" } }`);
    return new Set(rows.map((b) => req(b, 'uri')));
  }

  /** A binding for something the package does not declare: the 400 of an install request. */
  static undeclared(declarations: Declarations, bindings: { variables: string[]; secrets: string[] }): string | null {
    const vars = new Set(declarations.variables.map((v) => v.uri));
    const secrets = new Set(declarations.secrets.map((s) => s.uri));
    const badVar = bindings.variables.find((u) => !vars.has(u));
    if (badVar) return `variableBindings names <${badVar}>, which the package does not declare as a variable (build:Variable)`;
    const badSecret = bindings.secrets.find((u) => !secrets.has(u));
    if (badSecret) return `secretBindings names <${badSecret}>, which the package does not declare as a managed secret (secrets:ManagedSecret)`;
    return null;
  }

  /**
   * The ops an install, update or reinstall of `packageName` writes with its
   * deployment: the declarations become the workspace's variables and
   * secrets; values bound now replace kept ones; declarations the package no
   * longer makes go, with their values. `missing` names the required
   * declarations left without a value (the command then fails).
   */
  async deploymentOps(ws: string, packageName: string, declarations: Declarations, matrixNames: Map<string, string>,
    bindings: { variables: Array<{ uri: string; value: string }>; secrets: OpenedBinding[] }, username: string): Promise<{ ops: WriteOp[]; missing: string[] }> {
    const now = this.clock.now();
    const [before, kept, created] = await Promise.all([
      this.ofPackage(ws, packageName),
      this.withWorkspaceValue(ws, declarations.secrets.map((s) => s.uri)),
      this.createdAtOf(ws, packageName),
    ]);
    const bound = new Map(bindings.variables.map((b) => [b.uri, b.value]));
    const boundSecrets = new Set(bindings.secrets.map((b) => b.uri));
    const missing: string[] = [];
    const text = (value: string | null) => (value === null ? null : literal(value));
    const variables = declarations.variables.map((v) => {
      const value = bound.has(v.uri) ? bound.get(v.uri)! : before.variables.get(v.uri) ?? null;
      if (v.required && value === null) missing.push(`variable <${v.uri}>`);
      const id = this.variableId(ws, v.uri);
      const s = iri(this.variableIri(id));
      return sparql`${s} a wsm:Variable ; wsm:id ${literal(id)} ; wsm:uri ${iri(v.uri)} ; wsm:package ${literal(packageName)} ;
        wsm:matrix ${iri(v.sourceMatrix)} ; wsm:required ${boolean(v.required)} ;
        wsm:createdAt ${dateTime(created.get(this.variableIri(id)) ?? now)} ; wsm:updatedAt ${dateTime(now)} .
        ${optionalTriple(s, raw('wsm:value'), text(value))} ${optionalTriple(s, raw('wsm:variableType'), text(v.variableType))}
        ${optionalTriple(s, raw('wsm:label'), text(v.label))} ${optionalTriple(s, raw('wsm:description'), text(v.description))}`;
    });
    const secrets = declarations.secrets.map((d) => {
      if (d.required && !boundSecrets.has(d.uri) && !kept.has(d.uri)) missing.push(`secret <${d.uri}>`);
      const id = this.secretIdOf(ws, d.uri);
      const s = iri(this.secretIri(id));
      return sparql`${s} a wsm:ManagedSecret ; wsm:id ${literal(id)} ; wsm:uri ${iri(d.uri)} ; wsm:package ${literal(packageName)} ;
        wsm:matrix ${iri(d.sourceMatrix)} ; wsm:matrixName ${literal(matrixNames.get(d.sourceMatrix) ?? d.sourceMatrix)} ; wsm:required ${boolean(d.required)} ;
        wsm:createdAt ${dateTime(created.get(this.secretIri(id)) ?? now)} ; wsm:updatedAt ${dateTime(now)} .
        ${optionalTriple(s, raw('wsm:label'), text(d.label))} ${optionalTriple(s, raw('wsm:description'), text(d.description))}`;
    });
    const declared = new Set(declarations.secrets.map((s) => s.uri));
    const ops: WriteOp[] = [
      ...this.valueRemovalOps(ws, [...before.secrets].filter((u) => !declared.has(u))),
      // Declared only where the package had records: a write that declares the variables graph makes every query view reload it.
      ...(before.variables.size || before.secrets.size ? this.recordRemovalOps(ws, packageName) : []),
    ];
    if (variables.length) ops.push(updateOp(sparql`${prefixes}INSERT DATA { GRAPH ${iri(this.graphs.variables(ws))} { ${raw(variables.join('\n'))} } }`, [this.graphs.variables(ws)]));
    if (secrets.length) ops.push(updateOp(sparql`${prefixes}INSERT DATA { GRAPH ${iri(this.graphs.secrets(ws))} { ${raw(secrets.join('\n'))} } }`, [this.graphs.secrets(ws)]));
    for (const b of bindings.secrets) {
      ops.push(this.valueOp(ws, { id: this.secretIdOf(ws, b.uri), uri: b.uri }, 'workspace', '', b.sealed, username, now));
    }
    return { ops, missing };
  }

  /** createdAt of the package's variable and secret records, by record IRI. */
  private async createdAtOf(ws: string, packageName: string): Promise<Map<string, string>> {
    const rows = await this.store.select(sparql`${prefixes}SELECT ?s ?at WHERE { VALUES ?g { ${iri(this.graphs.variables(ws))} ${iri(this.graphs.secrets(ws))} }
      GRAPH ?g { ?s wsm:package ${literal(packageName)} ; wsm:createdAt ?at } }`);
    return new Map(rows.map((b) => [req(b, 's'), time(b, 'at')]));
  }

  /** Every value (each scope) of these secrets. */
  private valueRemovalOps(ws: string, secretUris: string[]): WriteOp[] {
    if (!secretUris.length) return [];
    const g = iri(this.graphs.secretValues(ws));
    return [updateOp(sparql`${prefixes}DELETE { GRAPH ${g} { ?v ?p ?o } } WHERE { VALUES ?uri { ${join(secretUris.map((u) => iri(u)))} } GRAPH ${g} { ?v wsm:uri ?uri ; ?p ?o } }`,
      [this.graphs.secretValues(ws)])];
  }

  /** The variable and secret records of a package. */
  private recordRemovalOps(ws: string, packageName: string): WriteOp[] {
    const vg = iri(this.graphs.variables(ws));
    const sg = iri(this.graphs.secrets(ws));
    return [updateOp(sparql`${prefixes}${sequence([
      sparql`DELETE { GRAPH ${vg} { ?v ?p ?o } } WHERE { GRAPH ${vg} { ?v a wsm:Variable ; wsm:package ${literal(packageName)} ; ?p ?o } }`,
      sparql`DELETE { GRAPH ${sg} { ?s ?p ?o } } WHERE { GRAPH ${sg} { ?s a wsm:ManagedSecret ; wsm:package ${literal(packageName)} ; ?p ?o } }`,
    ])}`, [this.graphs.variables(ws), this.graphs.secrets(ws)])];
  }

  /** The ops an uninstall writes: the package's variables and secrets go, with every value of those secrets. The read records stay. */
  async undeployOps(ws: string, packageName: string): Promise<WriteOp[]> {
    const before = await this.ofPackage(ws, packageName);
    if (!before.variables.size && !before.secrets.size) return [];
    return [...this.valueRemovalOps(ws, [...before.secrets]), ...this.recordRemovalOps(ws, packageName)];
  }
}
