import type { QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { RDF, WSM, prefixes } from '../rdf/vocab.js';
import { sparql, sequence, iri, literal, dateTime, boolean, join, type Sparql, type SparqlFragment } from '../rdf/sparql.js';
import { UUID_PATTERN } from '../rdf/ids.js';
import { str, req, bool, time } from '../rdf/bindings.js';
import { GraphCache } from '../store/graph-cache.js';
import { cachedStableId } from '../rdf/ids.js';
import type { AuthContext } from '../auth/context.js';
import type { Binding } from '../store/store.js';

/** The User shape (docs/api.md). */
export interface User {
  id: string;
  username: string;
  email: string | null;
  firstName: string | null;
  lastName: string | null;
  website: string | null;
  emailVerified: boolean;
  createdAt: string;
  updatedAt: string;
}

export type UserProfile = AuthContext['profile'];

const PROFILE_FIELDS = ['email', 'firstName', 'lastName', 'website'] as const;

/** Columns selected by `USER_PATTERN`, in the variable names `userFromBinding` reads. */
export function userPattern(u: SparqlFragment): string {
  return sparql`${u} wsm:id ?userId ; wsm:username ?username ; wsm:createdAt ?userCreatedAt ; wsm:updatedAt ?userUpdatedAt .
    OPTIONAL { ${u} wsm:email ?email } OPTIONAL { ${u} wsm:firstName ?firstName } OPTIONAL { ${u} wsm:lastName ?lastName }
    OPTIONAL { ${u} wsm:website ?website } OPTIONAL { ${u} wsm:emailVerified ?emailVerified }`;
}

export function userFromBinding(b: Binding): User {
  return {
    id: req(b, 'userId'),
    username: req(b, 'username'),
    email: str(b, 'email'),
    firstName: str(b, 'firstName'),
    lastName: str(b, 'lastName'),
    website: str(b, 'website'),
    emailVerified: bool(b, 'emailVerified') ?? false,
    createdAt: time(b, 'userCreatedAt'),
    updatedAt: time(b, 'userUpdatedAt'),
  };
}

/** Predicate IRI -> the variable name `userFromBinding` reads it from. */
const USER_COLUMNS = new Map<string, string>([
  [WSM.id, 'userId'], [WSM.username, 'username'], [WSM.createdAt, 'userCreatedAt'], [WSM.updatedAt, 'userUpdatedAt'],
  [WSM.email, 'email'], [WSM.firstName, 'firstName'], [WSM.lastName, 'lastName'], [WSM.website, 'website'],
  [WSM.emailVerified, 'emailVerified'],
]);

/**
 * Users are global (system graph), identified by username; their id is
 * derived from the username (`stableId('user', username)`), so a user's IRI
 * is computed, never looked up: every read here is by known subject and
 * costs the same with 10 users or 100,000. Profile fields come from token
 * claims and are written only when a request carries different values.
 */
export class UserService {
  /** User records by IRI (null: none), kept while the system graph does not change. */
  private readonly cache: GraphCache<User | null>;

  constructor(private readonly store: QuadStore, private readonly graphs: Graphs) {
    this.cache = new GraphCache(store, 10_000);
  }

  userIri(userId: string): string {
    return this.graphs.resource('user', userId);
  }

  idOf(username: string): string {
    return cachedStableId('user', username);
  }

  /** Reads one user by id or username (by its computed IRI). */
  async get(key: { id?: string; username?: string }): Promise<User | null> {
    if (key.id !== undefined) {
      return UUID_PATTERN.test(key.id) ? this.byIri(this.userIri(key.id.toLowerCase())) : null;
    }
    if (key.username === undefined) return null;
    const user = await this.byIri(this.userIri(this.idOf(key.username)));
    return user && user.username === key.username ? user : null;
  }

  /** Reads one user record by IRI; null when there is none. */
  byIri(userIri: string): Promise<User | null> {
    return this.cache.get(userIri, [this.graphs.system], async () => (await this.read([userIri])).get(userIri) ?? null);
  }

  /**
   * Reads user records by IRI in one query (`VALUES` on the subject, every
   * predicate: a pattern with OPTIONALs would be planned over all users).
   * IRIs without a user record are absent from the answer. Records read
   * since the last write come from the cache.
   */
  async byIris(userIris: readonly string[]): Promise<Map<string, User>> {
    const out = new Map<string, User>();
    const missing: string[] = [];
    if (userIris.length > 0) await this.cache.sync([this.graphs.system]);
    for (const u of userIris) {
      const hit = this.cache.peek(u);
      if (!hit.found) missing.push(u);
      else if (hit.value) out.set(u, hit.value);
    }
    if (missing.length === 0) return out;
    const depends = [this.graphs.system];
    const at = this.cache.revisionsOf(depends);
    const read = await this.read(missing);
    for (const u of missing) {
      const user = read.get(u) ?? null;
      this.cache.keep(u, depends, at, user);
      if (user) out.set(u, user);
    }
    return out;
  }

  private async read(userIris: readonly string[]): Promise<Map<string, User>> {
    const out = new Map<string, User>();
    if (userIris.length === 0) return out;
    const rows = await this.store.select(sparql`${prefixes}SELECT ?u ?p ?o WHERE {
      VALUES ?u { ${join(userIris.map(iri), ' ')} } GRAPH ${iri(this.graphs.system)} { ?u ?p ?o } }`);
    const columns = new Map<string, Binding>();
    const typed = new Set<string>();
    for (const b of rows) {
      const u = b.u!.value;
      const p = b.p!.value;
      if (p === RDF.type) {
        if (b.o!.value === WSM.User) typed.add(u);
        continue;
      }
      const name = USER_COLUMNS.get(p);
      if (!name) continue;
      let binding = columns.get(u);
      if (!binding) columns.set(u, (binding = {}));
      binding[name] ??= b.o;
    }
    for (const u of userIris) {
      const b = columns.get(u);
      if (b && typed.has(u) && b.userId && b.username && b.userCreatedAt && b.userUpdatedAt) out.set(u, userFromBinding(b));
    }
    return out;
  }

  /**
   * Creates the user if needed and writes the given profile fields (fields
   * left undefined keep their value). Returns the user.
   */
  /** Whether the user's record exists and says what `profile` says (then `upsert` would write nothing). */
  async isCurrent(username: string, profile: UserProfile): Promise<boolean> {
    const existing = await this.get({ username });
    if (!existing) return false;
    for (const field of PROFILE_FIELDS) {
      if (profile[field] !== undefined && profile[field] !== existing[field]) return false;
    }
    return profile.emailVerified === undefined || profile.emailVerified === existing.emailVerified;
  }

  async upsert(username: string, profile: UserProfile, now = new Date()): Promise<User> {
    const existing = await this.get({ username });
    const id = existing?.id ?? this.idOf(username);
    const u = iri(this.userIri(id));
    const g = iri(this.graphs.system);
    const changes: Array<[string, SparqlFragment]> = [];
    for (const field of PROFILE_FIELDS) {
      const value = profile[field];
      if (value !== undefined && value !== existing?.[field]) changes.push([field, literal(value)]);
    }
    if (profile.emailVerified !== undefined && profile.emailVerified !== existing?.emailVerified) {
      changes.push(['emailVerified', boolean(profile.emailVerified)]);
    }
    // The common case (every authenticated request): the record is as the claims say, so nothing is written.
    if (existing && changes.length === 0) return existing;
    const ops: Sparql[] = [];
    if (!existing) {
      // Conditional, so two first requests of the same user racing each other create one record.
      ops.push(sparql`INSERT { GRAPH ${g} { ${u} a wsm:User ; wsm:id ${literal(id)} ; wsm:username ${literal(username)} ;
        wsm:createdAt ${dateTime(now)} ; wsm:updatedAt ${dateTime(now)} ; wsm:emailVerified ${boolean(false)} . } }
        WHERE { VALUES ?condition { true } FILTER NOT EXISTS { GRAPH ${g} { ${u} a wsm:User } } }`);
    }
    for (const [field, value] of changes) {
      const p = iri(WSM[field as keyof typeof WSM] as string);
      ops.push(sparql`DELETE WHERE { GRAPH ${g} { ${u} ${p} ?old } }`);
      ops.push(sparql`INSERT DATA { GRAPH ${g} { ${u} ${p} ${value} } }`);
    }
    if (existing) {
      ops.push(sparql`DELETE WHERE { GRAPH ${g} { ${u} wsm:updatedAt ?old } }`);
      ops.push(sparql`INSERT DATA { GRAPH ${g} { ${u} wsm:updatedAt ${dateTime(now)} } }`);
    }
    await this.store.update(sparql`${prefixes}${sequence(ops)}`, [this.graphs.system]);
    return (await this.get({ username }))!;
  }
}
