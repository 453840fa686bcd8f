import { createHash, randomBytes } from 'node:crypto';
import type { QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { prefixes } from '../rdf/vocab.js';
import { sparql, iri, literal, dateTime, boolean, integer, raw } from '../rdf/sparql.js';
import { newId, UUID_PATTERN } from '../rdf/ids.js';
import { bool, req, str, optTime, time } from '../rdf/bindings.js';
import { badRequest, forbidden, notFound, unauthorized } from '../errors.js';
import { NOT_APPLIED, untilApplied } from '../store/conditional.js';
import { ExclusiveSections } from '../store/sections.js';
import type { UserService } from '../users/service.js';
import type { AuthContext } from './context.js';

/**
 * API keys (docs/iam.md, "API keys"): a long random secret a user makes to
 * call the API with `X-Api-Key` instead of a bearer token. Only the key's
 * SHA-256 is stored (a `wsm:ApiKey` record in the system graph, see
 * docs/iam.md); the key itself is answered once, at creation, and only to
 * a caller with a bearer token. A key acts as its owner, with system
 * administration if the owner's token had it when making the key. Revoking
 * deletes the record; an expired key is refused.
 */

export const EXPIRES_IN = {
  SEVEN_DAYS: 7,
  FOURTEEN_DAYS: 14,
  THIRTY_DAYS: 30,
  NINETY_DAYS: 90,
  NEVER: null,
} as const;
export type ExpiresIn = keyof typeof EXPIRES_IN;

export interface ApiKeyInfo {
  id: string;
  name: string;
  prefix: string;
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
}

export interface NewApiKey extends Omit<ApiKeyInfo, 'lastUsedAt'> {
  /** The key itself: shown once, never stored. */
  key: string;
}

export const MAX_KEYS_PER_USER = 100;
/** `lastUsedAt` is written at most this often per key, so using a key does not mean a write per request. */
const LAST_USED_RESOLUTION_MS = 60_000;
const KEY_PATTERN = /^wsm_([0-9a-f]{8})_([A-Za-z0-9_-]{43})$/;

const hashOf = (key: string): string => createHash('sha256').update(key, 'utf8').digest('hex');

export class ApiKeyService {
  /** Key id -> when its lastUsedAt was last written (ms). */
  private readonly lastWritten = new Map<string, number>();
  /** Creations by user id, one at a time (see `create`). */
  private readonly creations = new ExclusiveSections();

  constructor(
    private readonly store: QuadStore,
    private readonly graphs: Graphs,
    private readonly users: UserService,
    private readonly clock: () => number = Date.now,
  ) {}

  private keyIri(id: string): string { return this.graphs.resource('api-key', id); }

  /**
   * Makes a key for the caller; the answer is the only time the key is seen.
   * Only a bearer token makes keys (403 for a key): a key cannot outlive,
   * outrank or escape the revocation of the key that would have made it.
   * The limit per user is kept by the write's condition: racing creations
   * cannot pass it together.
   */
  async create(auth: AuthContext, name: string, expiresIn: ExpiresIn): Promise<NewApiKey> {
    if (auth.apiKeyId !== undefined) {
      throw forbidden('API keys are made with a bearer token (Authorization: Bearer <token>), not with another API key');
    }
    const user = await this.users.get({ username: auth.username });
    if (!user) throw unauthorized('The caller has no user record');
    const trimmed = name.trim();
    if (trimmed.length === 0) throw badRequest('name must not be empty');
    const full = () => badRequest(`A user may hold at most ${MAX_KEYS_PER_USER} API keys; revoke one first`);
    // One creation per user at a time in this process, so racing creations do not fail each other's
    // condition (on a remote engine, deadlock each other by the hundred); across instances the
    // condition alone keeps the limit.
    return this.creations.run(user.id, () => untilApplied(async () => {
      if ((await this.list(auth)).length >= MAX_KEYS_PER_USER) throw full();
      return this.createOnce(this.users.userIri(user.id), auth.systemAdmin, trimmed, expiresIn);
    }, full));
  }

  private async createOnce(userIri: string, systemAdmin: boolean, name: string, expiresIn: ExpiresIn): Promise<NewApiKey | typeof NOT_APPLIED> {
    const id = newId();
    const prefix = `wsm_${randomBytes(4).toString('hex')}`;
    const key = `${prefix}_${randomBytes(32).toString('base64url')}`;
    const now = new Date(this.clock());
    const days = EXPIRES_IN[expiresIn];
    const expiresAt = days === null ? null : new Date(now.getTime() + days * 86_400_000);
    const k = iri(this.keyIri(id));
    const g = iri(this.graphs.system);
    const owner = iri(userIri);
    const roomLeft = sparql`${prefixes}ASK {
      { SELECT (COUNT(?held) AS ?count) WHERE { GRAPH ${g} { ?held wsm:owner ${owner} ; a wsm:ApiKey } } }
      FILTER (?count < ${integer(MAX_KEYS_PER_USER)}) }`;
    const applied = await this.store.writeIf({ ask: roomLeft, expect: true }, [{ kind: 'update', sparql: sparql`${prefixes}INSERT DATA { GRAPH ${g} {
      ${k} a wsm:ApiKey ; wsm:id ${literal(id)} ; wsm:name ${literal(name)} ; wsm:keyPrefix ${literal(prefix)} ;
        wsm:keyHash ${literal(hashOf(key))} ; wsm:owner ${owner} ;
        wsm:systemAdmin ${boolean(systemAdmin)} ; wsm:createdAt ${dateTime(now)} .
      ${raw(expiresAt ? sparql`${k} wsm:expiresAt ${dateTime(expiresAt)} .` : '')}
    } }`, graphs: [this.graphs.system] }]);
    if (!applied) return NOT_APPLIED;
    return { id, name, prefix, key, createdAt: now.toISOString(), expiresAt: expiresAt?.toISOString() ?? null };
  }

  /** The caller's keys, newest first, without the keys themselves. */
  async list(auth: AuthContext): Promise<ApiKeyInfo[]> {
    const owner = iri(this.users.userIri(this.users.idOf(auth.username)));
    const rows = await this.store.select(sparql`${prefixes}SELECT ?id ?name ?prefix ?createdAt ?expiresAt ?lastUsedAt WHERE {
      GRAPH ${iri(this.graphs.system)} {
        ?k wsm:owner ${owner} ; a wsm:ApiKey ; wsm:id ?id ; wsm:name ?name ; wsm:keyPrefix ?prefix ; wsm:createdAt ?createdAt .
        OPTIONAL { ?k wsm:expiresAt ?expiresAt } OPTIONAL { ?k wsm:lastUsedAt ?lastUsedAt }
      } } ORDER BY DESC(?createdAt) ?id`);
    return rows.map((b) => ({
      id: req(b, 'id'), name: req(b, 'name'), prefix: req(b, 'prefix'), createdAt: time(b, 'createdAt'),
      expiresAt: optTime(b, 'expiresAt'), lastUsedAt: optTime(b, 'lastUsedAt'),
    }));
  }

  /** Revokes one of the caller's keys (404 when the caller has no such key). */
  async revoke(auth: AuthContext, id: string): Promise<ApiKeyInfo> {
    const key = UUID_PATTERN.test(id) ? (await this.list(auth)).find((k) => k.id === id.toLowerCase()) : undefined;
    if (!key) throw notFound(`API key "${id}" not found`);
    await this.store.update(sparql`${prefixes}DELETE WHERE { GRAPH ${iri(this.graphs.system)} { ${iri(this.keyIri(key.id))} ?p ?o } }`, [this.graphs.system]);
    this.lastWritten.delete(key.id);
    return key;
  }

  /** The caller a key stands for; 401 for an unknown, revoked or expired key. */
  async verify(key: string): Promise<AuthContext> {
    if (!KEY_PATTERN.test(key.trim())) throw unauthorized('Invalid API key: it is not a key this service makes (wsm_<prefix>_<secret>)');
    const rows = await this.store.select(sparql`${prefixes}SELECT ?id ?username ?systemAdmin ?expiresAt WHERE {
      GRAPH ${iri(this.graphs.system)} {
        ?k wsm:keyHash ${literal(hashOf(key.trim()))} ; a wsm:ApiKey ; wsm:id ?id ; wsm:owner ?u ; wsm:systemAdmin ?systemAdmin .
        ?u wsm:username ?username .
        OPTIONAL { ?k wsm:expiresAt ?expiresAt }
      } } LIMIT 1`);
    const row = rows[0];
    if (!row) throw unauthorized('Invalid API key: unknown or revoked');
    const now = this.clock();
    const expiresAt = str(row, 'expiresAt');
    if (expiresAt !== null && new Date(expiresAt).getTime() <= now) throw unauthorized('Invalid API key: it has expired');
    const id = req(row, 'id');
    await this.touch(id, now);
    return { username: req(row, 'username'), systemAdmin: bool(row, 'systemAdmin') === true, apiKeyId: id, profile: {} };
  }

  /** Records the use, at most once a minute per key. */
  private async touch(id: string, now: number): Promise<void> {
    const last = this.lastWritten.get(id);
    if (last !== undefined && now - last < LAST_USED_RESOLUTION_MS) return;
    this.lastWritten.set(id, now);
    const k = iri(this.keyIri(id));
    const g = iri(this.graphs.system);
    // Only while the key still exists: a use racing its revocation must not leave half a record.
    await this.store.update(sparql`${prefixes}DELETE { GRAPH ${g} { ${k} wsm:lastUsedAt ?old } }
      INSERT { GRAPH ${g} { ${k} wsm:lastUsedAt ${dateTime(new Date(now))} } }
      WHERE { GRAPH ${g} { ${k} a wsm:ApiKey . OPTIONAL { ${k} wsm:lastUsedAt ?old } } }`, [this.graphs.system]);
  }
}
