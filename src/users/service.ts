import type { QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { PREFIXES, WSM } from '../rdf/vocab.js';
import { sparql, iri, literal, dateTime, boolean, raw, join, type SparqlFragment } from '../rdf/sparql.js';
import { stableId } from '../rdf/ids.js';
import { str, req, bool, time } from '../rdf/bindings.js';
import type { AuthContext } from '../auth/context.js';
import type { Binding } from '../store/store.js';

/** The User shape of INTERFACE.md. */
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

/**
 * Users are global (system graph), identified by username; their id is
 * derived from the username so it is stable. Profile fields come from token
 * claims and are refreshed when a request carries different values.
 */
export class UserService {
  /** username -> fingerprint of the profile last written, to skip no-op writes. */
  private readonly known = new Map<string, string>();

  constructor(private readonly store: QuadStore, private readonly graphs: Graphs) {}

  userIri(userId: string): string {
    return this.graphs.resource('user', userId);
  }

  idOf(username: string): string {
    return stableId('user', username);
  }

  /** Reads one user by id or username. */
  get(key: { id?: string; username?: string }): User | null {
    const u = raw('?u');
    const filter = key.id ? sparql`?u wsm:id ${literal(key.id)} .` : sparql`?u wsm:username ${literal(key.username ?? '')} .`;
    const rows = this.store.select(`${PREFIXES} SELECT * WHERE { GRAPH ${iri(this.graphs.system).__sparql} { ?u a wsm:User . ${filter} ${userPattern(u)} } } LIMIT 1`);
    return rows[0] ? userFromBinding(rows[0]) : null;
  }

  /**
   * Creates the user if needed and writes the given profile fields (fields
   * left undefined keep their value). Returns the user.
   */
  async upsert(username: string, profile: UserProfile, now = new Date()): Promise<User> {
    const fingerprint = JSON.stringify(profile);
    const existing = this.get({ username });
    if (existing && this.known.get(username) === fingerprint) return existing;
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
    if (existing && changes.length === 0) {
      this.known.set(username, fingerprint);
      return existing;
    }
    const ops: string[] = [];
    if (!existing) {
      // Conditional, so two first requests of the same user racing each other create one record.
      ops.push(sparql`INSERT { GRAPH ${g} { ${u} a wsm:User ; wsm:id ${literal(id)} ; wsm:username ${literal(username)} ;
        wsm:createdAt ${dateTime(now)} ; wsm:updatedAt ${dateTime(now)} ; wsm:emailVerified ${boolean(false)} . } }
        WHERE { FILTER NOT EXISTS { GRAPH ${g} { ${u} a wsm:User } } }`);
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
    await this.store.update(PREFIXES + join(ops.map(raw), ' ;\n').__sparql);
    this.known.set(username, fingerprint);
    return this.get({ username })!;
  }
}
