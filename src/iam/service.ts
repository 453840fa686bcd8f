import type { QuadStore, Binding } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { prefixes } from '../rdf/vocab.js';
import { sparql, fragmentOf, iri, join, literal, dateTime, raw, type SparqlFragment } from '../rdf/sparql.js';
import { stableId, UUID_PATTERN } from '../rdf/ids.js';
import { int, req, str, time } from '../rdf/bindings.js';
import { conflict, notFound } from '../errors.js';
import { NOT_APPLIED, untilApplied } from '../store/conditional.js';
import { offsetOf, page, type Page, type PageQuery } from '../http/paging.js';
import type { User, UserService } from '../users/service.js';
import { MemberOrder } from '../users/member-order.js';
import { ADMIN_ROLE_URI, type Workspace, type WorkspaceService } from '../workspaces/service.js';

/** The Role shape (docs/api.md); `matrixId` is null for the built-in administrator role. */
export interface Role {
  id: string;
  uri: string;
  label: string;
  description: string | null;
  matrixId: string | null;
  createdAt: string;
  updatedAt: string;
}

/** Agents have the Role shape (docs/api.md). */
export type Agent = Role;

/** The Principal shape: a membership of a user (USER) or the presence of an agent (AGENT). */
export interface Principal {
  id: string;
  workspaceId: string;
  type: 'USER' | 'AGENT';
  actor: User | Agent;
  createdAt: string;
}

type Kind = 'Role' | 'Agent';

/** A role or agent record with its IRI, and for an agent the id and creation time of its principal. */
interface RecordRow {
  record: Role;
  iri: string;
  principalId: string | null;
  principalCreatedAt: string | null;
}

/** A principal resolved for a write: who it is and what it is. */
interface ResolvedPrincipal {
  principal: Principal;
  iri: string;
  /** The agent's IRI (AGENT principals). */
  agentIri?: string;
}

/**
 * Identity and access (I1 to I14 in docs/api.md; docs/iam.md) over the
 * RDF model of docs/rdf-model.md:
 * - member users are the USER principals of the workspace's IAM graph;
 * - roles are the built-in administrator role (IAM graph) and the roles of the
 *   derived graphs of installed matrices; agents and their AGENT principals
 *   live in those derived graphs too, with `wsm:role` per `iam:hasRole`;
 * - role assignments (of users and of agents) are records in the IAM graph.
 *
 * This service only reads the derived graphs; the packages area writes them.
 * Every list joins assignments with the roles and principals that exist, so an
 * assignment whose role or agent vanished is skipped, not answered.
 */
export class IamService {
  constructor(
    private readonly store: QuadStore,
    private readonly graphs: Graphs,
    private readonly users: UserService,
    private readonly workspaces: WorkspaceService,
  ) {
    this.memberOrder = new MemberOrder(store, graphs);
  }

  private readonly memberOrder: MemberOrder;

  // ---------------------------------------------------------------- users

  /**
   * I5: one page of the member users, ordered by username (see MemberOrder:
   * the order is kept between writes to the membership). The page's records
   * are read by IRI in one query.
   */
  async listUsers(workspace: Workspace, query: PageQuery, username?: string): Promise<Page<User>> {
    if (username !== undefined) {
      // One member by name (docs/iam.md): a page of one, or of none when no member has that name.
      const id = this.users.idOf(username);
      const user = await this.workspaces.isMember(workspace.id, id) ? await this.users.get({ id }) : null;
      const found = user && user.username === username ? [user] : [];
      return page(query.page === 1 ? found : [], query, found.length);
    }
    const members = await this.memberOrder.members(workspace.id);
    const ids = members.slice(offsetOf(query), offsetOf(query) + query.pageSize);
    const users = await this.users.byIris(ids);
    const items = ids.map((u) => users.get(u)).filter((u): u is User => u !== undefined);
    return page(items, query, members.length);
  }

  private userByIri(userIri: string): Promise<User | null> {
    return this.users.byIri(userIri);
  }

  /** I6: a member user by id; 404 when the id names no member of this workspace. */
  async getMemberUser(workspace: Workspace, userId: string): Promise<User> {
    const id = userId.toLowerCase();
    const user = UUID_PATTERN.test(id) && await this.workspaces.isMember(workspace.id, id) ? await this.userByIri(this.users.userIri(id)) : null;
    if (!user) {
      throw notFound(`User "${userId}" is not a member of workspace "${workspace.slug}"`);
    }
    return user;
  }

  /** I7: the roles assigned to a member user. */
  async userRoles(workspace: Workspace, userId: string): Promise<Role[]> {
    const user = await this.getMemberUser(workspace, userId);
    const p = this.workspaces.principalIri(this.workspaces.userPrincipalId(workspace.id, user.id));
    return (await this.locate(workspace, 'Role', await this.assignedRoleIris(workspace, p))).map((r) => r.record);
  }

  // ----------------------------------------------------------- principals

  /** I8: the caller's own principal; 404 for a caller without one (a system admin who is not a member). */
  async principalOfUser(workspace: Workspace, user: User | null): Promise<Principal> {
    const found = user ? await this.userPrincipal(workspace, this.workspaces.principalIri(this.workspaces.userPrincipalId(workspace.id, user.id))) : null;
    if (!found) {
      throw notFound(`You are not a member of workspace "${workspace.slug}", so you have no principal in it (system administrators administer every workspace without one)`);
    }
    return found;
  }

  /** One USER principal of the workspace by IRI, with its User. */
  private async userPrincipal(workspace: Workspace, principalIri: string): Promise<Principal | null> {
    const rows = await this.store.select(sparql`${prefixes}SELECT ?principalId ?principalCreatedAt ?u WHERE { GRAPH ${iri(this.graphs.iam(workspace.id))} {
      ${iri(principalIri)} a wsm:Principal ; wsm:principalType "USER" ; wsm:actor ?u ; wsm:id ?principalId ; wsm:createdAt ?principalCreatedAt } } LIMIT 1`);
    const user = rows[0] ? await this.userByIri(req(rows[0], 'u')) : null;
    if (!rows[0] || !user) return null;
    return { id: req(rows[0], 'principalId'), workspaceId: workspace.id, type: 'USER', actor: user, createdAt: time(rows[0], 'principalCreatedAt') };
  }

  /** The USER principals holding a role by assignment, ordered by username. */
  private async userPrincipalsWithRole(workspace: Workspace, roleIri: string): Promise<Principal[]> {
    const rows = await this.store.select(sparql`${prefixes}SELECT ?principalId ?principalCreatedAt ?u WHERE {
      GRAPH ${iri(this.graphs.iam(workspace.id))} {
        ?asg wsm:role ${iri(roleIri)} ; wsm:principal ?p .
        ?p a wsm:Principal ; wsm:principalType "USER" ; wsm:actor ?u ; wsm:id ?principalId ; wsm:createdAt ?principalCreatedAt .
      } }`);
    // Each user is read by its IRI: cheaper than joining with every user record of the system graph.
    const out: Principal[] = [];
    for (const b of rows) {
      const user = await this.userByIri(req(b, 'u'));
      if (user) out.push({ id: req(b, 'principalId'), workspaceId: workspace.id, type: 'USER', actor: user, createdAt: time(b, 'principalCreatedAt') });
    }
    return out.sort((x, y) => ((x.actor as User).username < (y.actor as User).username ? -1 : 1));
  }

  private agentPrincipal(workspace: Workspace, row: RecordRow): Principal {
    return {
      id: row.principalId ?? this.agentPrincipalId(workspace, row.record.uri),
      workspaceId: workspace.id,
      type: 'AGENT',
      actor: row.record,
      createdAt: row.principalCreatedAt ?? row.record.createdAt,
    };
  }

  /** Id of an agent's principal, per docs/rdf-model.md (used when its record is missing). */
  agentPrincipalId(workspace: Workspace, agentUri: string): string {
    return stableId('principal', workspace.id, 'agent', agentUri);
  }

  /** A principal of this workspace by id (USER in the IAM graph or AGENT in a derived graph). */
  private async resolvePrincipal(workspace: Workspace, principalId: string): Promise<ResolvedPrincipal | null> {
    if (!UUID_PATTERN.test(principalId)) return null;
    const pIri = this.workspaces.principalIri(principalId.toLowerCase());
    const p = iri(pIri);
    const user = await this.userPrincipal(workspace, pIri);
    if (user) return { principal: user, iri: pIri };
    const found = await this.store.select(sparql`${prefixes}SELECT ?g ?r WHERE { ${await this.scope(workspace)} GRAPH ?g { ${p} a wsm:Principal ; wsm:principalType "AGENT" ; wsm:actor ?r } }`);
    const agent = found.length ? await this.hydrate(workspace, 'Agent', req(found[0]!, 'r'), minGraph(found)) : null;
    if (!agent) return null;
    return { principal: { ...this.agentPrincipal(workspace, agent), id: principalId.toLowerCase() }, iri: pIri, agentIri: agent.iri };
  }

  // ---------------------------------------------------------------- roles

  /** I9: one page of roles, optionally only those of a user (`assignee`) or of a principal (`principal`). */
  async listRoles(workspace: Workspace, query: PageQuery & { assignee?: string | undefined; principal?: string | undefined }): Promise<Page<Role>> {
    if (!query.assignee && !query.principal) return this.pageOf(workspace, 'Role', query);
    // A filtered list holds the roles of one principal: few, so it is built, sorted and sliced here.
    let iris: string[] | null = null;
    const narrow = (next: string[]) => { iris = iris === null ? next : iris.filter((x) => next.includes(x)); };
    if (query.assignee) {
      narrow(await this.assignedRoleIris(workspace, this.workspaces.principalIri(this.workspaces.userPrincipalId(workspace.id, query.assignee.toLowerCase()))));
    }
    if (query.principal) {
      const resolved = await this.resolvePrincipal(workspace, query.principal);
      narrow(resolved ? await this.roleIrisOfPrincipal(workspace, resolved) : []);
    }
    const all = (await this.locate(workspace, 'Role', iris ?? [])).map((r) => r.record);
    return page(all.slice(offsetOf(query), offsetOf(query) + query.pageSize), query, all.length);
  }

  /** I10: one role by id. */
  async getRole(workspace: Workspace, roleId: string): Promise<Role> {
    return (await this.findRecord(workspace, 'Role', roleId)).record;
  }

  /** I11: the principals holding a role: users by assignment, agents by specification or assignment. */
  async roleAssignees(workspace: Workspace, roleId: string): Promise<Principal[]> {
    const { iri: roleIri } = await this.findRecord(workspace, 'Role', roleId);
    const r = iri(roleIri);
    const users = await this.userPrincipalsWithRole(workspace, roleIri);
    if (roleIri === this.workspaces.roleIri(this.workspaces.adminRoleId(workspace.id)) && !users.some((u) => (u.actor as User).id === workspace.owner.id)) {
      // The owner holds the built-in role by ownership, assigned or not.
      const owner = await this.userPrincipal(workspace, this.ownerPrincipalIri(workspace));
      if (owner) users.push(owner);
      users.sort((x, y) => ((x.actor as User).username < (y.actor as User).username ? -1 : 1));
    }
    const scope = await this.scope(workspace);
    const bySpecification = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?a WHERE { ${scope} GRAPH ?g { ?a wsm:role ${r} ; a wsm:Agent } }`);
    const byAssignment = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?a WHERE {
      GRAPH ${iri(this.graphs.iam(workspace.id))} { ?asg wsm:role ${r} ; wsm:principal ?q }
      ${scope} GRAPH ?g { ?q wsm:principalType "AGENT" ; wsm:actor ?a } }`);
    const agentIris = [...new Set([...bySpecification, ...byAssignment].map((b) => req(b, 'a')))];
    const agents = await this.locate(workspace, 'Agent', agentIris, scope);
    const holding: Principal[] = [];
    for (const a of agents) if (await this.holdsRole(workspace, a, roleIri, scope)) holding.push(this.agentPrincipal(workspace, a));
    return [...users, ...holding];
  }

  /** Whether an agent (as located) holds a role, by its specification in scope or by an assignment to its principal. */
  private async holdsRole(workspace: Workspace, agent: RecordRow, roleIri: string, scope: SparqlFragment): Promise<boolean> {
    const principalIri = this.workspaces.principalIri(agent.principalId ?? this.agentPrincipalId(workspace, agent.record.uri));
    return (await this.roleIrisOfPrincipal(workspace, { principal: this.agentPrincipal(workspace, agent), iri: principalIri, agentIri: agent.iri }, scope)).includes(roleIri);
  }

  // --------------------------------------------------------------- agents

  /** I12: one page of agents. */
  listAgents(workspace: Workspace, query: PageQuery): Promise<Page<Agent>> {
    return this.pageOf(workspace, 'Agent', query);
  }

  /** I13: one agent by id. */
  async getAgent(workspace: Workspace, agentId: string): Promise<Agent> {
    return (await this.findRecord(workspace, 'Agent', agentId)).record;
  }

  /** I14: an agent's roles: those of its specification and those assigned to its principal. */
  async agentRoles(workspace: Workspace, agentId: string): Promise<Role[]> {
    const agent = await this.findRecord(workspace, 'Agent', agentId);
    const resolved: ResolvedPrincipal = {
      principal: this.agentPrincipal(workspace, agent),
      iri: this.workspaces.principalIri(agent.principalId ?? this.agentPrincipalId(workspace, agent.record.uri)),
      agentIri: agent.iri,
    };
    return (await this.locate(workspace, 'Role', await this.roleIrisOfPrincipal(workspace, resolved))).map((r) => r.record);
  }

  // ---------------------------------------------------------- assignments

  /** I1: assigns a role to a member user. */
  assignToUser(workspace: Workspace, roleId: string, userId: string, now = new Date()): Promise<string> {
    return this.assign(workspace, async () => {
      const role = await this.findRecord(workspace, 'Role', roleId);
      const user = await this.getMemberUser(workspace, userId);
      const principal = await this.resolvePrincipal(workspace, this.workspaces.userPrincipalId(workspace.id, user.id));
      if (!principal) throw notFound(`User "${userId}" is not a member of workspace "${workspace.slug}"`);
      return { role, principal };
    }, now);
  }

  /** I2: removes a role from a member user. */
  removeFromUser(workspace: Workspace, roleId: string, userId: string): Promise<string> {
    return this.unassign(workspace, async () => {
      const role = await this.findRecord(workspace, 'Role', roleId);
      const user = await this.getMemberUser(workspace, userId);
      const principal = await this.resolvePrincipal(workspace, this.workspaces.userPrincipalId(workspace.id, user.id));
      if (!principal) throw notFound(`User "${userId}" is not a member of workspace "${workspace.slug}"`);
      return { role, principal };
    });
  }

  /** I3: assigns a role to a principal (user or agent). */
  assignToPrincipal(workspace: Workspace, roleId: string, principalId: string, now = new Date()): Promise<string> {
    return this.assign(workspace, () => this.rolePrincipal(workspace, roleId, principalId), now);
  }

  /** I4: removes a role from a principal (user or agent). */
  removeFromPrincipal(workspace: Workspace, roleId: string, principalId: string): Promise<string> {
    return this.unassign(workspace, () => this.rolePrincipal(workspace, roleId, principalId));
  }

  private async rolePrincipal(workspace: Workspace, roleId: string, principalId: string): Promise<{ role: RecordRow; principal: ResolvedPrincipal }> {
    const role = await this.findRecord(workspace, 'Role', roleId);
    const principal = await this.resolvePrincipal(workspace, principalId);
    if (!principal) throw notFound(`Principal "${principalId}" not found in workspace "${workspace.slug}"`);
    return { role, principal };
  }

  private describe(p: ResolvedPrincipal): string {
    return p.principal.type === 'USER' ? `user "${(p.principal.actor as User).username}"` : `agent "${(p.principal.actor as Agent).label}"`;
  }

  /**
   * Checks, then a conditional write (docs/store.md, "Invariant
   * sites"): the assignment is written only while it does not exist and, for
   * a user, while the user is a member; when another request changed that in
   * between, the checks run again and answer as they would after it (409).
   */
  private assign(workspace: Workspace, resolve: () => Promise<{ role: RecordRow; principal: ResolvedPrincipal }>, now: Date): Promise<string> {
    return untilApplied(async () => {
      const { role, principal } = await resolve();
      return this.assignOnce(workspace, role, principal, now);
    }, () => conflict('The role\'s assignments changed while this request ran; try again'));
  }

  private async assignOnce(workspace: Workspace, role: RecordRow, p: ResolvedPrincipal, now: Date): Promise<string | typeof NOT_APPLIED> {
    const assignmentId = this.workspaces.assignmentId(workspace.id, role.record.id, p.principal.id);
    const a = iri(this.workspaces.assignmentIri(assignmentId));
    const iam = iri(this.graphs.iam(workspace.id));
    if (await this.store.ask(sparql`${prefixes}ASK { GRAPH ${iam} { ${a} a wsm:RoleAssignment } }`)) {
      throw conflict(`${capitalize(this.describe(p))} already has the role "${role.record.label}"`);
    }
    if (role.record.uri === ADMIN_ROLE_URI && p.principal.type === 'USER' && (p.principal.actor as User).id === workspace.owner.id) {
      throw conflict(`User "${(p.principal.actor as User).username}" already has the role "${role.record.label}" as the workspace owner`);
    }
    if (p.agentIri && await this.hasSpecificationRole(workspace, p.agentIri, role.iri)) {
      throw conflict(`Agent "${(p.principal.actor as Agent).label}" already has the role "${role.record.label}" from its matrix specification`);
    }
    const member = p.principal.type === 'USER' ? sparql`FILTER EXISTS { GRAPH ${iam} { ${iri(p.iri)} a wsm:Principal } }` : '';
    // VALUES anchors the group: Virtuoso ignores the FILTERs of a group that has no pattern (docs/remote-store.md).
    const condition = { ask: sparql`${prefixes}ASK { VALUES ?condition { true } FILTER NOT EXISTS { GRAPH ${iam} { ${a} a wsm:RoleAssignment } } ${raw(member)} }`, expect: true };
    const applied = await this.store.writeIf(condition, [{ kind: 'update', sparql: sparql`${prefixes}INSERT DATA { GRAPH ${iam} {
      ${a} a wsm:RoleAssignment ; wsm:id ${literal(assignmentId)} ; wsm:role ${iri(role.iri)} ;
        wsm:principal ${iri(p.iri)} ; wsm:createdAt ${dateTime(now)} . } }`, graphs: [this.graphs.iam(workspace.id)] }]);
    return applied ? `Role "${role.record.label}" assigned to ${this.describe(p)}` : NOT_APPLIED;
  }

  /**
   * Checks, then a conditional write: the assignment is deleted only while
   * it exists and, for the built-in administrator role, while another
   * administrator remains (the last administrator, docs/store.md).
   */
  private unassign(workspace: Workspace, resolve: () => Promise<{ role: RecordRow; principal: ResolvedPrincipal }>): Promise<string> {
    return untilApplied(async () => {
      const { role, principal } = await resolve();
      return this.unassignOnce(workspace, role, principal);
    }, () => conflict('The role\'s assignments changed while this request ran; try again'));
  }

  private async unassignOnce(workspace: Workspace, role: RecordRow, p: ResolvedPrincipal): Promise<string | typeof NOT_APPLIED> {
    const assignmentId = this.workspaces.assignmentId(workspace.id, role.record.id, p.principal.id);
    const a = iri(this.workspaces.assignmentIri(assignmentId));
    const iam = iri(this.graphs.iam(workspace.id));
    let keeps = '';
    if (p.principal.type === 'USER' && role.record.uri === ADMIN_ROLE_URI) {
      const userId = (p.principal.actor as User).id;
      const remaining = (await this.workspaces.adminUserIds(workspace)).filter((id) => id !== userId);
      if (remaining.length === 0) throw conflict('This is the last administrator of the workspace; make another member an administrator first');
      if (workspace.owner.id === userId) throw conflict('The workspace owner is always an administrator; the administrator role cannot be removed from the owner');
      keeps = this.workspaces.keepsAnAdministrator(workspace, userId);
    }
    if (!await this.store.ask(sparql`${prefixes}ASK { GRAPH ${iam} { ${a} a wsm:RoleAssignment } }`)) {
      if (p.agentIri && await this.hasSpecificationRole(workspace, p.agentIri, role.iri)) {
        throw notFound(`Agent "${(p.principal.actor as Agent).label}" holds the role "${role.record.label}" by its matrix specification, not by an assignment; it cannot be removed through the API`);
      }
      throw notFound(`${capitalize(this.describe(p))} has no assignment of the role "${role.record.label}"`);
    }
    const condition = { ask: sparql`${prefixes}ASK { GRAPH ${iam} { ${a} a wsm:RoleAssignment } ${raw(keeps)} }`, expect: true };
    const applied = await this.store.writeIf(condition, [{ kind: 'update', sparql: sparql`${prefixes}DELETE WHERE { GRAPH ${iam} { ${a} ?p ?o } }`, graphs: [this.graphs.iam(workspace.id)] }]);
    return applied ? `Role "${role.record.label}" removed from ${this.describe(p)}` : NOT_APPLIED;
  }

  // ------------------------------------------------------------ internals

  /**
   * IRIs of the roles assigned (in the IAM graph) to a principal, whether the
   * roles still exist or not; the workspace owner, while a member, also holds
   * the built-in administrator role by ownership (docs/iam.md).
   */
  private async assignedRoleIris(workspace: Workspace, principalIri: string): Promise<string[]> {
    const rows = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?r WHERE {
      GRAPH ${iri(this.graphs.iam(workspace.id))} { ?asg a wsm:RoleAssignment ; wsm:role ?r ; wsm:principal ${iri(principalIri)} } }`);
    const held = rows.map((b) => req(b, 'r'));
    if (principalIri === this.ownerPrincipalIri(workspace) && await this.workspaces.isMember(workspace.id, workspace.owner.id)) {
      held.push(this.workspaces.roleIri(this.workspaces.adminRoleId(workspace.id)));
    }
    return [...new Set(held)];
  }

  private ownerPrincipalIri(workspace: Workspace): string {
    return this.workspaces.principalIri(this.workspaces.userPrincipalId(workspace.id, workspace.owner.id));
  }

  /** IRIs of the roles of a principal: assigned, and for an agent also those of its specification (`scope`: the workspace's, when the caller read it already). */
  private async roleIrisOfPrincipal(workspace: Workspace, p: ResolvedPrincipal, scope?: SparqlFragment): Promise<string[]> {
    const assigned = await this.assignedRoleIris(workspace, p.iri);
    if (!p.agentIri) return assigned;
    const rows = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?r WHERE { ${scope ?? await this.scope(workspace)} GRAPH ?g { ${iri(p.agentIri)} wsm:role ?r } }`);
    const specified = rows.map((b) => req(b, 'r'));
    return [...new Set([...specified, ...assigned])];
  }

  private async hasSpecificationRole(workspace: Workspace, agentIri: string, roleIri: string): Promise<boolean> {
    return this.store.ask(sparql`${prefixes}ASK { ${await this.scope(workspace)} GRAPH ?g { ${iri(agentIri)} wsm:role ${iri(roleIri)} } }`);
  }

  /**
   * Whether a graph is this workspace's IAM graph or the derived graph of one
   * of its matrices: records are read only from those, never from a
   * specification or extension graph, whose Turtle comes from packages.
   */
  private inScope(workspace: Workspace, graph: string): boolean {
    if (graph === this.graphs.iam(workspace.id)) return true;
    const matrices = `${this.graphs.workspacePrefix(workspace.id)}matrices/`;
    return graph.startsWith(matrices) && graph.endsWith('/derived') && !graph.slice(matrices.length, -'/derived'.length).includes('/');
  }

  /**
   * The graphs `inScope` admits, as a VALUES block binding `?g`: the IAM
   * graph and the derived graph of each matrix the packages graph records.
   * A read joined with it names its graphs, so the cluster store with
   * residency loads this workspace alone for it (a `GRAPH ?g` over every
   * graph, filtered after, loaded every workspace), and the other stores
   * look in this workspace's graphs only.
   */
  private async scope(workspace: Workspace): Promise<SparqlFragment> {
    const rows = await this.store.select(sparql`${prefixes}SELECT DISTINCT ?mg WHERE { GRAPH ${iri(this.graphs.packages(workspace.id))} { ?m a wsm:Matrix ; wsm:graph ?mg } }`);
    const graphs = [this.graphs.iam(workspace.id), ...rows.map((b) => `${req(b, 'mg')}/derived`).filter((g) => this.inScope(workspace, g))];
    return fragmentOf(sparql`VALUES ?g { ${join(graphs.map((g) => iri(g)))} }`);
  }

  /**
   * One page of all roles or agents of the workspace, one per IRI (a role
   * defined in two graphs is read from the first), built-in role first, then
   * by label: paged and counted by the store, then each record read.
   */
  private async pageOf(workspace: Workspace, kind: Kind, query: PageQuery): Promise<Page<Role>> {
    const ws = iri(this.workspaces.workspaceIri(workspace.id));
    const pattern = sparql`${await this.scope(workspace)} GRAPH ?g { ?r a ${raw(`wsm:${kind}`)} ; wsm:workspace ${ws} . OPTIONAL { ?r wsm:label ?label } OPTIONAL { ?r wsm:uri ?uri } }`;
    const total = int((await this.store.select(sparql`${prefixes} SELECT (COUNT(DISTINCT ?r) AS ?n) WHERE { ${fragmentOf(pattern)} }`))[0] ?? {}, 'n');
    // A page past the last is empty without asking (Virtuoso refuses an OFFSET past 32 bits).
    const rows = offsetOf(query) >= total ? [] : await this.store.select(sparql`${prefixes} SELECT ?r (MIN(STR(?g)) AS ?gs) (MIN(IF(?g = ${iri(this.graphs.iam(workspace.id))}, 0, 1)) AS ?builtin)
      (MIN(LCASE(COALESCE(?label, STR(?uri), ""))) AS ?sort) WHERE { ${fragmentOf(pattern)} }
      GROUP BY ?r ORDER BY ?builtin ?sort ?r LIMIT ${raw(String(query.pageSize))} OFFSET ${raw(String(offsetOf(query)))}`);
    const items: RecordRow[] = [];
    for (const b of rows) {
      const r = await this.hydrate(workspace, kind, req(b, 'r'), req(b, 'gs'));
      if (r) items.push(r);
    }
    return page(items.map((r) => r.record), query, total);
  }

  /**
   * Reads the records of roles or agents known by IRI, from the graphs of this
   * workspace that hold them; IRIs naming nothing (a vanished role) are
   * skipped. Sorted built-in first, then by label.
   */
  private async locate(workspace: Workspace, kind: Kind, iris: string[], known?: SparqlFragment): Promise<RecordRow[]> {
    const out: RecordRow[] = [];
    const scope = known ?? (iris.length ? await this.scope(workspace) : raw(''));
    for (const recordIri of new Set(iris)) {
      const rows = await this.store.select(sparql`${prefixes}SELECT ?g WHERE { ${scope} GRAPH ?g { ${iri(recordIri)} a ${raw(`wsm:${kind}`)} ; wsm:workspace ${iri(this.workspaces.workspaceIri(workspace.id))} } }`);
      const row = rows.length ? await this.hydrate(workspace, kind, recordIri, minGraph(rows)) : null;
      if (row) out.push(row);
    }
    const key = (r: RecordRow) => [r.record.matrixId === null ? 0 : 1, r.record.label.toLowerCase(), r.record.id] as const;
    return out.sort((x, y) => {
      const [a, b] = [key(x), key(y)];
      return a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : a[2] < b[2] ? -1 : a[2] > b[2] ? 1 : 0);
    });
  }

  /** Reads one role or agent record from one graph (null when it is not there). */
  private async hydrate(workspace: Workspace, kind: Kind, recordIri: string, graph: string): Promise<RecordRow | null> {
    const r = iri(recordIri);
    const principal = kind === 'Agent'
      ? sparql`OPTIONAL { ?q a wsm:Principal ; wsm:principalType "AGENT" ; wsm:actor ${r} ; wsm:id ?principalId ; wsm:createdAt ?principalCreatedAt }`
      : '';
    const rows = await this.store.select(sparql`${prefixes}SELECT * WHERE { GRAPH ${iri(graph)} {
      ${r} a ${raw(`wsm:${kind}`)} ; wsm:id ?id ; wsm:uri ?uri ; wsm:createdAt ?createdAt .
      OPTIONAL { ${r} wsm:updatedAt ?updatedAt } OPTIONAL { ${r} wsm:label ?label } OPTIONAL { ${r} wsm:description ?description } OPTIONAL { ${r} wsm:matrix ?m }
      ${raw(principal)} } } LIMIT 1`);
    return rows[0] ? this.recordRow(recordIri, rows[0]) : null;
  }

  private recordRow(recordIri: string, b: Binding): RecordRow {
    const matrixPrefix = this.graphs.resource('matrix', '');
    const m = str(b, 'm');
    const uri = req(b, 'uri');
    return {
      iri: recordIri,
      record: {
        id: req(b, 'id'),
        uri,
        label: str(b, 'label') ?? uri,
        description: str(b, 'description'),
        matrixId: m && m.startsWith(matrixPrefix) ? m.slice(matrixPrefix.length) : null,
        createdAt: time(b, 'createdAt'),
        updatedAt: time(b, b.updatedAt ? 'updatedAt' : 'createdAt'),
      },
      principalId: str(b, 'principalId'),
      principalCreatedAt: b.principalCreatedAt ? time(b, 'principalCreatedAt') : null,
    };
  }

  private async findRecord(workspace: Workspace, kind: Kind, id: string): Promise<RecordRow> {
    const found = UUID_PATTERN.test(id) ? (await this.locate(workspace, kind, [this.graphs.resource(kind.toLowerCase(), id.toLowerCase())]))[0] : undefined;
    if (!found) throw notFound(`${kind} "${id}" not found in workspace "${workspace.slug}"`);
    return found;
  }
}

/** The least graph name of some `?g` bindings (the graph a record is read from when several hold it). */
const minGraph = (rows: Binding[]): string => rows.map((b) => req(b, 'g')).sort()[0]!;

const capitalize = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1);
