import { updateOp, type QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { WSM, prefixes } from '../rdf/vocab.js';
import { sparql, sequence, fragmentOf, iri, literal, dateTime, raw, type Sparql } from '../rdf/sparql.js';
import { cachedStableId, newId, UUID_PATTERN } from '../rdf/ids.js';
import { req, str, time } from '../rdf/bindings.js';
import { badRequest, conflict, forbidden, notFound } from '../errors.js';
import { NOT_APPLIED, untilApplied } from '../store/conditional.js';
import type { AuthContext } from '../auth/context.js';
import type { User, UserProfile, UserService } from '../users/service.js';
import { GraphCache } from '../store/graph-cache.js';
import { indexBuiltOp, indexMemberOp, unindexMemberOp } from './workspace-index.js';

export interface Workspace {
  id: string;
  slug: string;
  name: string;
  engineVersion: string;
  owner: { id: string; username: string };
  createdAt: string;
  updatedAt: string;
}

/** What the caller may do in one workspace (docs/iam.md, "Access"). */
export interface WorkspaceAccess {
  workspace: Workspace;
  /** The caller's user record (null for a system admin who never called before). */
  user: User | null;
  isMember: boolean;
  isAdmin: boolean;
  /** The caller's principal id when a member. */
  principalId: string | null;
}

export const SLUG_PATTERN = /^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$/;
const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$/;

/** IRI of the built-in administrator role, a term of the service vocabulary. */
export const ADMIN_ROLE_URI = WSM.WorkspaceAdministrator;

/**
 * Workspaces, memberships and the built-in administrator role. A membership
 * of a user is its USER principal in the workspace's IAM graph; holding the
 * built-in role (or owning the workspace) makes a member an administrator.
 */
export class WorkspaceService {
  /** Workspaces by {workspace} segment (every request resolves one): they are records of the system graph. */
  private readonly found: GraphCache<Workspace | null>;
  /** Membership and administrator checks: they read the workspace's IAM graph only. */
  private readonly checks: GraphCache<boolean>;

  constructor(
    private readonly store: QuadStore,
    private readonly graphs: Graphs,
    private readonly users: UserService,
    private readonly defaultEngineVersion: string,
  ) {
    this.found = new GraphCache(store, 10_000);
    this.checks = new GraphCache(store, 10_000);
  }

  workspaceIri(id: string): string { return this.graphs.resource('workspace', id); }
  adminRoleId(workspaceId: string): string { return cachedStableId('role', workspaceId, ADMIN_ROLE_URI); }
  roleIri(roleId: string): string { return this.graphs.resource('role', roleId); }
  userPrincipalId(workspaceId: string, userId: string): string { return cachedStableId('principal', workspaceId, 'user', userId); }
  principalIri(principalId: string): string { return this.graphs.resource('principal', principalId); }
  assignmentId(workspaceId: string, roleId: string, principalId: string): string { return cachedStableId('assignment', workspaceId, roleId, principalId); }
  assignmentIri(id: string): string { return this.graphs.resource('assignment', id); }

  /** Workspace records; `first` is a pattern binding ?w evaluated before the record pattern (a selective one). */
  private async query(where: string, extra = '', first = ''): Promise<Workspace[]> {
    const rows = await this.store.select(sparql`${prefixes}
      SELECT ?id ?slug ?name ?engineVersion ?ownerId ?ownerUsername ?createdAt ?updatedAt WHERE {
        ${raw(first)}
        GRAPH ${iri(this.graphs.system)} {
          ?w a wsm:Workspace ; wsm:id ?id ; wsm:slug ?slug ; wsm:engineVersion ?engineVersion ;
             wsm:owner ?owner ; wsm:createdAt ?createdAt ; wsm:updatedAt ?updatedAt .
          OPTIONAL { ?w wsm:name ?name }
          ?owner wsm:id ?ownerId ; wsm:username ?ownerUsername .
          ${raw(where)}
        }
      } ${raw(extra)}`);
    return rows.map((b) => ({
      id: req(b, 'id'),
      slug: req(b, 'slug'),
      name: str(b, 'name') ?? req(b, 'slug'),
      engineVersion: req(b, 'engineVersion'),
      owner: { id: req(b, 'ownerId'), username: req(b, 'ownerUsername') },
      createdAt: time(b, 'createdAt'),
      updatedAt: time(b, 'updatedAt'),
    }));
  }

  /** Finds a workspace by slug or id (every {workspace} segment takes both). */
  find(segment: string): Promise<Workspace | null> {
    return this.found.get(segment, [this.graphs.system], () => this.lookup(segment));
  }

  private async lookup(segment: string): Promise<Workspace | null> {
    const key = UUID_PATTERN.test(segment) ? sparql`?w wsm:id ${literal(segment.toLowerCase())} .` : sparql`?w wsm:slug ${literal(segment)} .`;
    return (await this.query(key, 'LIMIT 1'))[0] ?? null;
  }

  /** The workspaces the caller is a member of; all of them for a system admin. */
  list(auth: AuthContext): Promise<Workspace[]> {
    if (auth.systemAdmin) return this.query('', 'ORDER BY ?slug');
    const userIri = iri(this.users.userIri(this.users.idOf(auth.username)));
    // The caller's principals first (a lookup by actor in the index of workspaces, which mirrors each workspace's
    // members: no workspace's graphs are read), as a subquery: joined the other way round, every principal is read.
    return this.query('', 'ORDER BY ?slug', sparql`{ SELECT DISTINCT ?w WHERE { GRAPH ${iri(this.graphs.index)} { ?p wsm:actor ${userIri} ; wsm:workspace ?w }
      GRAPH ${iri(this.graphs.system)} { ?w wsm:id ?wid } } }`);
  }

  /** Creates a workspace owned by `ownerUsername`, with its built-in role and the owner as administrator. */
  async create(input: { slug: string; name?: string; engineVersion?: string; owner: string }, now = new Date()): Promise<Workspace> {
    if (!SLUG_PATTERN.test(input.slug)) {
      throw badRequest('slug must be 1 to 64 lower-case letters, digits or hyphens, starting and ending with a letter or digit');
    }
    const engineVersion = input.engineVersion ?? this.defaultEngineVersion;
    if (!SEMVER.test(engineVersion)) throw badRequest(`engineVersion must be a full semver version like 1.0.0, not "${engineVersion}"`);
    if (await this.find(input.slug)) throw conflict(`A workspace with slug "${input.slug}" already exists`);
    const owner = await this.users.upsert(input.owner, {}, now);
    const id = newId();
    const ws = iri(this.workspaceIri(id));
    const roleId = this.adminRoleId(id);
    const principalId = this.userPrincipalId(id, owner.id);
    const assignmentId = this.assignmentId(id, roleId, principalId);
    const sys = iri(this.graphs.system);
    const iam = iri(this.graphs.iam(id));
    const slug = literal(input.slug);
    const t = dateTime(now);
    // A conditional write: applied only while no workspace has the slug, checked on the state it applies to
    // (across service instances on a remote engine too); the store says whether it applied.
    const free = { ask: sparql`${prefixes}ASK { GRAPH ${sys} { ?other wsm:slug ${slug} } }`, expect: false };
    const applied = await this.store.writeIf(free, [{ kind: 'update', sparql: sparql`${prefixes}
      INSERT DATA { GRAPH ${sys} { ${ws} a wsm:Workspace ; wsm:id ${literal(id)} ; wsm:slug ${slug} ; wsm:name ${literal(input.name ?? input.slug)} ;
                 wsm:engineVersion ${literal(engineVersion)} ; wsm:owner ${iri(this.users.userIri(owner.id))} ;
                 wsm:createdAt ${t} ; wsm:updatedAt ${t} . }
               GRAPH ${iam} {
                 ${iri(this.roleIri(roleId))} a wsm:Role ; wsm:id ${literal(roleId)} ; wsm:uri ${iri(ADMIN_ROLE_URI)} ;
                   wsm:label ${literal('Workspace administrator')} ;
                   wsm:description ${literal('Built-in role: administers the workspace (packages, roles, members, extensions).')} ;
                   wsm:workspace ${ws} ; wsm:createdAt ${t} ; wsm:updatedAt ${t} .
                 ${iri(this.principalIri(principalId))} a wsm:Principal ; wsm:id ${literal(principalId)} ; wsm:principalType "USER" ;
                   wsm:actor ${iri(this.users.userIri(owner.id))} ; wsm:workspace ${ws} ; wsm:createdAt ${t} .
                 ${iri(this.assignmentIri(assignmentId))} a wsm:RoleAssignment ; wsm:id ${literal(assignmentId)} ;
                   wsm:role ${iri(this.roleIri(roleId))} ; wsm:principal ${iri(this.principalIri(principalId))} ; wsm:createdAt ${t} .
               } } ;
      ${fragmentOf(indexMemberOp(this.graphs, id, this.principalIri(principalId), this.users.userIri(owner.id)))} ;
      ${fragmentOf(indexBuiltOp(this.graphs))}`, graphs: [this.graphs.system, this.graphs.iam(id), this.graphs.index] }]);
    if (!applied) throw conflict(`A workspace with slug "${input.slug}" already exists`);
    const created = await this.find(id);
    if (!created) throw new Error(`workspace ${id} was written but cannot be read back`);
    return created;
  }

  isMember(workspaceId: string, userId: string): Promise<boolean> {
    return this.checks.get(`member ${workspaceId} ${userId}`, [this.graphs.iam(workspaceId)], () => this.askMember(workspaceId, userId));
  }

  private async askMember(workspaceId: string, userId: string): Promise<boolean> {
    const p = iri(this.principalIri(this.userPrincipalId(workspaceId, userId)));
    return await this.store.ask(sparql`${prefixes} ASK { GRAPH ${iri(this.graphs.iam(workspaceId))} { ${p} a wsm:Principal } }`);
  }

  /** Member ids of the workspace's administrators (owner or holder of the built-in role). */
  async adminUserIds(workspace: Workspace): Promise<string[]> {
    const iam = iri(this.graphs.iam(workspace.id));
    const role = iri(this.roleIri(this.adminRoleId(workspace.id)));
    const ownerIri = iri(this.users.userIri(workspace.owner.id));
    const rows = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?userId WHERE {
      GRAPH ${iam} { ?p a wsm:Principal ; wsm:principalType "USER" ; wsm:actor ?u .
        OPTIONAL { ?a wsm:role ${role} ; wsm:principal ?p } }
      FILTER (BOUND(?a) || ?u = ${ownerIri})
      GRAPH ${iri(this.graphs.system)} { ?u wsm:id ?userId } }`);
    return rows.map((b) => req(b, 'userId'));
  }

  /** Same answer as `adminUserIds(workspace).includes(userId)`, without listing every member. */
  isAdmin(workspace: Workspace, userId: string): Promise<boolean> {
    // The owner is part of the key: the answer depends on it and on the IAM graph only.
    return this.checks.get(`admin ${workspace.id} ${workspace.owner.id} ${userId}`, [this.graphs.iam(workspace.id)], () => this.askAdmin(workspace, userId));
  }

  private async askAdmin(workspace: Workspace, userId: string): Promise<boolean> {
    if (!await this.isMember(workspace.id, userId)) return false;
    if (workspace.owner.id === userId) return true;
    const a = iri(this.assignmentIri(this.assignmentId(workspace.id, this.adminRoleId(workspace.id), this.userPrincipalId(workspace.id, userId))));
    return await this.store.ask(sparql`${prefixes}ASK { GRAPH ${iri(this.graphs.iam(workspace.id))} { ${a} a wsm:RoleAssignment } }`);
  }

  /**
   * Resolves the {workspace} segment for a caller. A caller who is not a
   * member (and not a system admin) gets 404, as if it did not exist.
   */
  async access(auth: AuthContext, segment: string): Promise<WorkspaceAccess> {
    const workspace = await this.find(segment);
    const user = await this.users.get({ username: auth.username });
    const isMember = !!(workspace && user && await this.isMember(workspace.id, user.id));
    if (!workspace || (!isMember && !auth.systemAdmin)) throw notFound(`Workspace "${segment}" not found`);
    const isAdmin = auth.systemAdmin || (isMember && await this.isAdmin(workspace, user!.id));
    return { workspace, user, isMember, isAdmin, principalId: isMember ? this.userPrincipalId(workspace.id, user!.id) : null };
  }

  requireMember(auth: AuthContext, segment: string): Promise<WorkspaceAccess> {
    return this.access(auth, segment);
  }

  async requireAdmin(auth: AuthContext, segment: string): Promise<WorkspaceAccess> {
    const access = await this.access(auth, segment);
    if (!access.isAdmin) throw forbidden('Only administrators of this workspace may do this');
    return access;
  }

  /**
   * A SPARQL group pattern that matches (once) while taking the
   * administrator status from `userId` leaves the workspace at least one
   * administrator: the user is not one (neither the owner nor a holder of
   * the built-in role), or another member is. The condition of every write
   * that could remove the last administrator (docs/store.md).
   */
  keepsAnAdministrator(workspace: Workspace, userId: string): Sparql {
    const iam = iri(this.graphs.iam(workspace.id));
    const sys = iri(this.graphs.system);
    const role = iri(this.roleIri(this.adminRoleId(workspace.id)));
    const owner = iri(this.users.userIri(workspace.owner.id));
    const user = iri(this.users.userIri(userId));
    const p = iri(this.principalIri(this.userPrincipalId(workspace.id, userId)));
    const another = sparql`EXISTS {
        { GRAPH ${iam} { ?p a wsm:Principal ; wsm:principalType "USER" ; wsm:actor ?u . ?a wsm:role ${role} ; wsm:principal ?p }
          FILTER (?u != ${user}) GRAPH ${sys} { ?u wsm:id ?uid } }
        UNION
        { GRAPH ${iam} { ?p a wsm:Principal ; wsm:principalType "USER" ; wsm:actor ${owner} }
          FILTER (${owner} != ${user}) GRAPH ${sys} { ${owner} wsm:id ?uid } } }`;
    if (workspace.owner.id === userId) return sparql`FILTER (${fragmentOf(another)})`;
    return sparql`FILTER (NOT EXISTS { GRAPH ${iam} { ${p} a wsm:Principal . ?a wsm:role ${role} ; wsm:principal ${p} } } || ${fragmentOf(another)})`;
  }

  /**
   * Adds or updates a member (creating the user record if needed); `admin`
   * grants or revokes the built-in role. Revoking is a conditional write
   * that keeps an administrator (docs/store.md, "Invariant sites").
   */
  putMember(workspace: Workspace, username: string, input: UserProfile & { admin?: boolean }, caller: AuthContext, now = new Date()): Promise<User> {
    return untilApplied(() => this.putMemberOnce(workspace, username, input, caller, now),
      () => conflict('The workspace\'s administrators changed while this request ran; try again'));
  }

  private async putMemberOnce(workspace: Workspace, username: string, input: UserProfile & { admin?: boolean }, caller: AuthContext, now: Date): Promise<User | typeof NOT_APPLIED> {
    const { admin, ...profile } = input;
    // An existing user's profile is global (every workspace sees it): only that user (from their token) or a
    // system administrator changes it. A workspace administrator may add the user, and set the profile of a
    // user the service does not know yet (issue 12, acceptance 6; docs/decisions.md).
    const existing = await this.users.get({ username });
    if (existing && !caller.systemAdmin && caller.username !== username) {
      const changed = (Object.keys(profile) as Array<keyof UserProfile>)
        .filter((field) => profile[field] !== undefined && profile[field] !== existing[field]);
      if (changed.length) {
        throw forbidden(`Only ${username} or a system administrator may change ${username}'s profile (${changed.join(', ')}); `
          + 'leave those fields out to add or update the membership');
      }
    }
    const user = await this.users.upsert(username, profile, now);
    const principalId = this.userPrincipalId(workspace.id, user.id);
    const roleId = this.adminRoleId(workspace.id);
    const iam = iri(this.graphs.iam(workspace.id));
    const p = iri(this.principalIri(principalId));
    const a = iri(this.assignmentIri(this.assignmentId(workspace.id, roleId, principalId)));
    // Each insert is conditional on what it adds not being there yet: two racing adds of one member write it once.
    const ops: Sparql[] = [sparql`INSERT { GRAPH ${iam} { ${p} a wsm:Principal ; wsm:id ${literal(principalId)} ; wsm:principalType "USER" ;
        wsm:actor ${iri(this.users.userIri(user.id))} ; wsm:workspace ${iri(this.workspaceIri(workspace.id))} ; wsm:createdAt ${dateTime(now)} . } }
      WHERE { VALUES ?condition { true } FILTER NOT EXISTS { GRAPH ${iam} { ${p} a wsm:Principal } } }`];
    // The index of workspaces (src/workspaces/workspace-index.ts), as an op of its own reading nothing: an instance not
    // holding the workspace applies it without loading the workspace.
    const indexed = updateOp(sparql`${prefixes}${fragmentOf(indexMemberOp(this.graphs, workspace.id, this.principalIri(principalId), this.users.userIri(user.id)))}`, [this.graphs.index]);
    if (admin === true) {
      ops.push(sparql`INSERT { GRAPH ${iam} { ${a} a wsm:RoleAssignment ; wsm:id ${literal(this.assignmentId(workspace.id, roleId, principalId))} ;
        wsm:role ${iri(this.roleIri(roleId))} ; wsm:principal ${p} ; wsm:createdAt ${dateTime(now)} . } }
        WHERE { VALUES ?condition { true } FILTER NOT EXISTS { GRAPH ${iam} { ${a} a wsm:RoleAssignment } } }`);
    } else if (admin === false) {
      const remaining = (await this.adminUserIds(workspace)).filter((id) => id !== user.id);
      if (remaining.length === 0) throw conflict('This is the last administrator of the workspace; make another member an administrator first');
      if (workspace.owner.id === user.id) throw conflict('The workspace owner is always an administrator');
      ops.push(sparql`DELETE WHERE { GRAPH ${iam} { ${a} ?p ?o } }`);
      // VALUES anchors the group: Virtuoso ignores the FILTERs of a group that has no pattern (docs/remote-store.md).
      const keeps = { ask: sparql`${prefixes}ASK { VALUES ?condition { true } ${fragmentOf(this.keepsAnAdministrator(workspace, user.id))} }`, expect: true };
      if (!await this.store.writeIf(keeps, [{ kind: 'update', sparql: sparql`${prefixes}${sequence(ops)}`, graphs: [this.graphs.iam(workspace.id)] }, indexed])) return NOT_APPLIED;
      return user;
    }
    if (await this.isMember(workspace.id, user.id) && admin !== true) return user;
    await this.store.write([updateOp(sparql`${prefixes}${sequence(ops)}`, [this.graphs.iam(workspace.id)]), indexed]);
    return user;
  }

  /**
   * Removes a member with its role assignments: a conditional write, applied
   * only while the user is a member and an administrator remains after it.
   */
  removeMember(workspace: Workspace, username: string, bySystemAdmin: boolean): Promise<void> {
    return untilApplied(() => this.removeMemberOnce(workspace, username, bySystemAdmin),
      () => conflict('The workspace\'s members changed while this request ran; try again'));
  }

  private async removeMemberOnce(workspace: Workspace, username: string, bySystemAdmin: boolean): Promise<void | typeof NOT_APPLIED> {
    const user = await this.users.get({ username });
    if (!user || !await this.isMember(workspace.id, user.id)) throw notFound(`User "${username}" is not a member of this workspace`);
    const admins = await this.adminUserIds(workspace);
    if (admins.includes(user.id) && admins.length === 1) {
      throw conflict('This is the last administrator of the workspace; make another member an administrator first');
    }
    // Ownership is not transferable (docs/decisions.md): removed by a fellow administrator, the owner could not get back
    // in. A system administrator may (and may add the owner back).
    if (workspace.owner.id === user.id && !bySystemAdmin) {
      throw conflict('The workspace owner can only be removed from the workspace by a system administrator; ownership is not transferable');
    }
    const iam = iri(this.graphs.iam(workspace.id));
    const principal = this.principalIri(this.userPrincipalId(workspace.id, user.id));
    const p = iri(principal);
    const condition = { ask: sparql`${prefixes}ASK { GRAPH ${iam} { ${p} a wsm:Principal } ${fragmentOf(this.keepsAnAdministrator(workspace, user.id))} }`, expect: true };
    // The index of workspaces' entry goes in an op of its own, reading the index only (see putMemberOnce).
    const unindexed = updateOp(sparql`${prefixes}${fragmentOf(unindexMemberOp(this.graphs, principal))}`, [this.graphs.index]);
    const applied = await this.store.writeIf(condition, [{ kind: 'update', sparql: sparql`${prefixes}
      DELETE WHERE { GRAPH ${iam} { ?a wsm:principal ${p} ; ?ap ?ao } } ;
      DELETE WHERE { GRAPH ${iam} { ${p} ?pp ?po } }`, graphs: [this.graphs.iam(workspace.id)] }, unindexed]);
    return applied ? undefined : NOT_APPLIED;
  }

}
