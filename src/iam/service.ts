import type { QuadStore, Binding } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { PREFIXES } from '../rdf/vocab.js';
import { sparql, iri, literal, dateTime, raw, type SparqlFragment } from '../rdf/sparql.js';
import { stableId, UUID_PATTERN } from '../rdf/ids.js';
import { int, req, str, time } from '../rdf/bindings.js';
import { conflict, notFound } from '../errors.js';
import { offsetOf, page, type Page, type PageQuery } from '../http/paging.js';
import { userFromBinding, userPattern, type User, type UserService } from '../users/service.js';
import { ADMIN_ROLE_URI, type Workspace, type WorkspaceService } from '../workspaces/service.js';

/** The Role shape of INTERFACE.md; `matrixId` is null for the built-in administrator role. */
export interface Role {
  id: string;
  uri: string;
  label: string;
  description: string | null;
  matrixId: string | null;
  createdAt: string;
  updatedAt: string;
}

/** Agents have the Role shape (INTERFACE.md "Role and Agent"). */
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

/** A role or agent record with the graph it was read from, and for agents their principal. */
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

const NONE = raw('FILTER (false)');

/**
 * Identity and access (INTERFACE.md I1 to I14, DESIGN.md section 3) over the
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
  ) {}

  // ---------------------------------------------------------------- users

  /** I5: one page of the member users, ordered by username. */
  listUsers(workspace: Workspace, query: PageQuery): Page<User> {
    const iam = iri(this.graphs.iam(workspace.id));
    const sys = iri(this.graphs.system);
    const members = sparql`GRAPH ${iam} { ?p a wsm:Principal ; wsm:principalType "USER" ; wsm:actor ?u }
      GRAPH ${sys} { ?u a wsm:User ; wsm:username ?username }`;
    const total = int(this.store.select(`${PREFIXES} SELECT (COUNT(DISTINCT ?u) AS ?n) WHERE { ${members} }`)[0] ?? {}, 'n');
    const rows = this.store.select(`${PREFIXES} SELECT * WHERE {
      { SELECT DISTINCT ?u ?username WHERE { ${members} } ORDER BY ?username LIMIT ${query.pageSize} OFFSET ${offsetOf(query)} }
      GRAPH ${sys.__sparql} { ${userPattern(raw('?u'))} }
    } ORDER BY ?username`);
    return page(rows.map(userFromBinding), query, total);
  }

  /** I6: a member user by id; 404 when the id names no member of this workspace. */
  getMemberUser(workspace: Workspace, userId: string): User {
    const user = UUID_PATTERN.test(userId) ? this.users.get({ id: userId.toLowerCase() }) : null;
    if (!user || !this.workspaces.isMember(workspace.id, user.id)) {
      throw notFound(`User "${userId}" is not a member of workspace "${workspace.slug}"`);
    }
    return user;
  }

  /** I7: the roles assigned to a member user. */
  userRoles(workspace: Workspace, userId: string): Role[] {
    const user = this.getMemberUser(workspace, userId);
    const p = iri(this.workspaces.principalIri(this.workspaces.userPrincipalId(workspace.id, user.id)));
    return this.records(workspace, 'Role', this.assignedTo(workspace, p)).map((r) => r.record);
  }

  // ----------------------------------------------------------- principals

  /** I8: the caller's own principal; 404 for a caller without one (a system admin who is not a member). */
  principalOfUser(workspace: Workspace, user: User | null): Principal {
    const found = user ? this.userPrincipals(workspace, sparql`VALUES ?p { ${iri(this.workspaces.principalIri(this.workspaces.userPrincipalId(workspace.id, user.id)))} }`)[0] : undefined;
    if (!found) {
      throw notFound(`You are not a member of workspace "${workspace.slug}", so you have no principal in it (system administrators administer every workspace without one)`);
    }
    return found;
  }

  /** USER principals matching a pattern over `?p` inside the IAM graph, ordered by username. */
  private userPrincipals(workspace: Workspace, constraint: string): Principal[] {
    const rows = this.store.select(PREFIXES + sparql`SELECT * WHERE {
      GRAPH ${iri(this.graphs.iam(workspace.id))} {
        ${raw(constraint)}
        ?p a wsm:Principal ; wsm:principalType "USER" ; wsm:actor ?u ; wsm:id ?principalId ; wsm:createdAt ?principalCreatedAt .
      }
      GRAPH ${iri(this.graphs.system)} { ?u a wsm:User . ${raw(userPattern(raw('?u')))} }
    } ORDER BY ?username`);
    return rows.map((b) => ({
      id: req(b, 'principalId'),
      workspaceId: workspace.id,
      type: 'USER' as const,
      actor: userFromBinding(b),
      createdAt: time(b, 'principalCreatedAt'),
    }));
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
  private resolvePrincipal(workspace: Workspace, principalId: string): ResolvedPrincipal | null {
    if (!UUID_PATTERN.test(principalId)) return null;
    const pIri = this.workspaces.principalIri(principalId.toLowerCase());
    const p = iri(pIri);
    const user = this.userPrincipals(workspace, sparql`VALUES ?p { ${p} }`)[0];
    if (user) return { principal: user, iri: pIri };
    const agent = this.records(workspace, 'Agent', sparql`GRAPH ?g { ${p} a wsm:Principal ; wsm:principalType "AGENT" ; wsm:actor ?r }`)[0];
    if (!agent) return null;
    return { principal: { ...this.agentPrincipal(workspace, agent), id: principalId.toLowerCase() }, iri: pIri, agentIri: agent.iri };
  }

  // ---------------------------------------------------------------- roles

  /** I9: one page of roles, optionally only those of a user (`assignee`) or of a principal (`principal`). */
  listRoles(workspace: Workspace, query: PageQuery & { assignee?: string | undefined; principal?: string | undefined }): Page<Role> {
    const constraints: string[] = [];
    if (query.assignee) {
      const p = iri(this.workspaces.principalIri(this.workspaces.userPrincipalId(workspace.id, query.assignee.toLowerCase())));
      constraints.push(this.assignedTo(workspace, p));
    }
    if (query.principal) {
      const resolved = this.resolvePrincipal(workspace, query.principal);
      constraints.push(resolved ? this.rolesOfPrincipal(workspace, resolved) : NONE.__sparql);
    }
    const constraint = constraints.join('\n');
    const total = this.count(workspace, 'Role', constraint);
    const items = this.records(workspace, 'Role', constraint, query).map((r) => r.record);
    return page(items, query, total);
  }

  /** I10: one role by id. */
  getRole(workspace: Workspace, roleId: string): Role {
    return this.findRecord(workspace, 'Role', roleId).record;
  }

  /** I11: the principals holding a role: users by assignment, agents by specification or assignment. */
  roleAssignees(workspace: Workspace, roleId: string): Principal[] {
    const { iri: roleIri } = this.findRecord(workspace, 'Role', roleId);
    const r = iri(roleIri);
    const iam = iri(this.graphs.iam(workspace.id));
    const users = this.userPrincipals(workspace, sparql`?asg a wsm:RoleAssignment ; wsm:role ${r} ; wsm:principal ?p .`);
    const agents = this.records(workspace, 'Agent', sparql`
      { GRAPH ?g { ?r wsm:role ${r} } }
      UNION
      { GRAPH ${iam} { ?asg a wsm:RoleAssignment ; wsm:role ${r} ; wsm:principal ?q0 } GRAPH ?g { ?q0 a wsm:Principal ; wsm:actor ?r } }`);
    return [...users, ...agents.map((a) => this.agentPrincipal(workspace, a))];
  }

  // --------------------------------------------------------------- agents

  /** I12: one page of agents. */
  listAgents(workspace: Workspace, query: PageQuery): Page<Agent> {
    const total = this.count(workspace, 'Agent', '');
    return page(this.records(workspace, 'Agent', '', query).map((r) => r.record), query, total);
  }

  /** I13: one agent by id. */
  getAgent(workspace: Workspace, agentId: string): Agent {
    return this.findRecord(workspace, 'Agent', agentId).record;
  }

  /** I14: an agent's roles: those of its specification and those assigned to its principal. */
  agentRoles(workspace: Workspace, agentId: string): Role[] {
    const agent = this.findRecord(workspace, 'Agent', agentId);
    const resolved: ResolvedPrincipal = {
      principal: this.agentPrincipal(workspace, agent),
      iri: this.workspaces.principalIri(agent.principalId ?? this.agentPrincipalId(workspace, agent.record.uri)),
      agentIri: agent.iri,
    };
    return this.records(workspace, 'Role', this.rolesOfPrincipal(workspace, resolved)).map((r) => r.record);
  }

  // ---------------------------------------------------------- assignments

  /** I1: assigns a role to a member user. */
  async assignToUser(workspace: Workspace, roleId: string, userId: string, now = new Date()): Promise<string> {
    const role = this.findRecord(workspace, 'Role', roleId);
    const user = this.getMemberUser(workspace, userId);
    const principal = this.resolvePrincipal(workspace, this.workspaces.userPrincipalId(workspace.id, user.id));
    if (!principal) throw notFound(`User "${userId}" is not a member of workspace "${workspace.slug}"`);
    return this.assign(workspace, role, principal, now);
  }

  /** I2: removes a role from a member user. */
  async removeFromUser(workspace: Workspace, roleId: string, userId: string): Promise<string> {
    const role = this.findRecord(workspace, 'Role', roleId);
    const user = this.getMemberUser(workspace, userId);
    const principal = this.resolvePrincipal(workspace, this.workspaces.userPrincipalId(workspace.id, user.id));
    if (!principal) throw notFound(`User "${userId}" is not a member of workspace "${workspace.slug}"`);
    return this.unassign(workspace, role, principal);
  }

  /** I3: assigns a role to a principal (user or agent). */
  async assignToPrincipal(workspace: Workspace, roleId: string, principalId: string, now = new Date()): Promise<string> {
    const role = this.findRecord(workspace, 'Role', roleId);
    const principal = this.resolvePrincipal(workspace, principalId);
    if (!principal) throw notFound(`Principal "${principalId}" not found in workspace "${workspace.slug}"`);
    return this.assign(workspace, role, principal, now);
  }

  /** I4: removes a role from a principal (user or agent). */
  async removeFromPrincipal(workspace: Workspace, roleId: string, principalId: string): Promise<string> {
    const role = this.findRecord(workspace, 'Role', roleId);
    const principal = this.resolvePrincipal(workspace, principalId);
    if (!principal) throw notFound(`Principal "${principalId}" not found in workspace "${workspace.slug}"`);
    return this.unassign(workspace, role, principal);
  }

  private describe(p: ResolvedPrincipal): string {
    return p.principal.type === 'USER' ? `user "${(p.principal.actor as User).username}"` : `agent "${(p.principal.actor as Agent).label}"`;
  }

  /** Checks and write happen in one tick (no await between them), so concurrent requests cannot interleave. */
  private async assign(workspace: Workspace, role: RecordRow, p: ResolvedPrincipal, now: Date): Promise<string> {
    const assignmentId = this.workspaces.assignmentId(workspace.id, role.record.id, p.principal.id);
    const a = iri(this.workspaces.assignmentIri(assignmentId));
    const iam = iri(this.graphs.iam(workspace.id));
    if (this.store.ask(PREFIXES + sparql`ASK { GRAPH ${iam} { ${a} a wsm:RoleAssignment } }`)) {
      throw conflict(`${capitalize(this.describe(p))} already has the role "${role.record.label}"`);
    }
    if (p.agentIri && this.hasSpecificationRole(workspace, p.agentIri, role.iri)) {
      throw conflict(`Agent "${(p.principal.actor as Agent).label}" already has the role "${role.record.label}" from its matrix specification`);
    }
    await this.store.update(PREFIXES + sparql`INSERT DATA { GRAPH ${iam} {
      ${a} a wsm:RoleAssignment ; wsm:id ${literal(assignmentId)} ; wsm:role ${iri(role.iri)} ;
        wsm:principal ${iri(p.iri)} ; wsm:createdAt ${dateTime(now)} . } }`);
    return `Role "${role.record.label}" assigned to ${this.describe(p)}`;
  }

  private async unassign(workspace: Workspace, role: RecordRow, p: ResolvedPrincipal): Promise<string> {
    const assignmentId = this.workspaces.assignmentId(workspace.id, role.record.id, p.principal.id);
    const a = iri(this.workspaces.assignmentIri(assignmentId));
    const iam = iri(this.graphs.iam(workspace.id));
    if (!this.store.ask(PREFIXES + sparql`ASK { GRAPH ${iam} { ${a} a wsm:RoleAssignment } }`)) {
      if (p.agentIri && this.hasSpecificationRole(workspace, p.agentIri, role.iri)) {
        throw notFound(`Agent "${(p.principal.actor as Agent).label}" holds the role "${role.record.label}" by its matrix specification, not by an assignment; it cannot be removed through the API`);
      }
      throw notFound(`${capitalize(this.describe(p))} has no assignment of the role "${role.record.label}"`);
    }
    if (p.principal.type === 'USER' && role.record.uri === ADMIN_ROLE_URI) {
      const userId = (p.principal.actor as User).id;
      const remaining = this.workspaces.adminUserIds(workspace).filter((id) => id !== userId);
      if (remaining.length === 0) throw conflict('This is the last administrator of the workspace; make another member an administrator first');
      if (workspace.owner.id === userId) throw conflict('The workspace owner is always an administrator; the administrator role cannot be removed from the owner');
    }
    await this.store.update(PREFIXES + sparql`DELETE WHERE { GRAPH ${iam} { ${a} ?p ?o } }`);
    return `Role "${role.record.label}" removed from ${this.describe(p)}`;
  }

  private hasSpecificationRole(workspace: Workspace, agentIri: string, roleIri: string): boolean {
    return this.store.ask(PREFIXES + sparql`ASK { GRAPH ?g { ${iri(agentIri)} wsm:role ${iri(roleIri)} } ${this.scope(workspace, raw('?g'))} }`);
  }

  // ------------------------------------------------------------ internals

  /** Pattern: roles `?r` assigned (in the IAM graph) to the principal `p`. */
  private assignedTo(workspace: Workspace, p: SparqlFragment): string {
    return sparql`GRAPH ${iri(this.graphs.iam(workspace.id))} { ?asg a wsm:RoleAssignment ; wsm:role ?r ; wsm:principal ${p} }`;
  }

  /** Pattern: roles `?r` of a principal: assigned, and for an agent also from its specification. */
  private rolesOfPrincipal(workspace: Workspace, p: ResolvedPrincipal): string {
    const assigned = this.assignedTo(workspace, iri(p.iri));
    if (!p.agentIri) return assigned;
    return sparql`{ ${raw(assigned)} } UNION { GRAPH ?sg { ${iri(p.agentIri)} wsm:role ?r } ${this.scope(workspace, raw('?sg'))} }`;
  }

  /**
   * FILTER keeping a graph variable to this workspace's IAM graph and the
   * derived graphs of its matrices (never a specification or extension graph,
   * whose Turtle comes from packages).
   */
  private scope(workspace: Workspace, g: SparqlFragment): SparqlFragment {
    const matrices = literal(`${this.graphs.workspacePrefix(workspace.id)}matrices/`);
    return raw(sparql`FILTER (${g} = ${iri(this.graphs.iam(workspace.id))} || (STRSTARTS(STR(${g}), ${matrices}) && STRENDS(STR(${g}), "/derived")))`);
  }

  /** The record pattern of a role or agent `?r` with id `?id` in graph `?g` of this workspace. */
  private recordPattern(workspace: Workspace, kind: Kind, constraint: string): string {
    return sparql`GRAPH ?g { ?r a ${raw(`wsm:${kind}`)} ; wsm:id ?id ; wsm:workspace ${iri(this.workspaces.workspaceIri(workspace.id))} }
      ${this.scope(workspace, raw('?g'))}
      ${raw(constraint)}`;
  }

  private count(workspace: Workspace, kind: Kind, constraint: string): number {
    const rows = this.store.select(`${PREFIXES} SELECT (COUNT(DISTINCT ?id) AS ?n) WHERE { ${this.recordPattern(workspace, kind, constraint)} }`);
    return int(rows[0] ?? {}, 'n');
  }

  /**
   * Roles or agents matching a constraint over `?r` (and `?g`), one per id
   * (a role defined in two graphs is read from the first of them), ordered
   * built-in first, then by label; one page of them when `paging` is given.
   */
  private records(workspace: Workspace, kind: Kind, constraint: string, paging?: PageQuery): RecordRow[] {
    const principal = kind === 'Agent'
      ? 'OPTIONAL { ?q a wsm:Principal ; wsm:principalType "AGENT" ; wsm:actor ?r2 ; wsm:id ?principalId ; wsm:createdAt ?principalCreatedAt }'
      : '';
    const slice = paging ? `LIMIT ${paging.pageSize} OFFSET ${offsetOf(paging)}` : '';
    const rows = this.store.select(`${PREFIXES} SELECT ?r2 ?id ?uri ?label ?description ?m ?createdAt ?updatedAt ?principalId ?principalCreatedAt WHERE {
      { SELECT ?id (MIN(STR(?g)) AS ?gs) WHERE { ${this.recordPattern(workspace, kind, constraint)} } GROUP BY ?id }
      BIND (IRI(?gs) AS ?g2)
      GRAPH ?g2 {
        ?r2 a wsm:${kind} ; wsm:id ?id ; wsm:uri ?uri ; wsm:createdAt ?createdAt ; wsm:updatedAt ?updatedAt .
        OPTIONAL { ?r2 wsm:label ?label } OPTIONAL { ?r2 wsm:description ?description } OPTIONAL { ?r2 wsm:matrix ?m }
        ${principal}
      }
    } ORDER BY (IF(BOUND(?m), 1, 0)) LCASE(COALESCE(?label, STR(?uri))) ?id ${slice}`);
    const seen = new Set<string>();
    const out: RecordRow[] = [];
    for (const b of rows) {
      const row = this.recordRow(b);
      if (seen.has(row.record.id)) continue;
      seen.add(row.record.id);
      out.push(row);
    }
    return out;
  }

  private recordRow(b: Binding): RecordRow {
    const matrixPrefix = this.graphs.resource('matrix', '');
    const m = str(b, 'm');
    const uri = req(b, 'uri');
    return {
      iri: req(b, 'r2'),
      record: {
        id: req(b, 'id'),
        uri,
        label: str(b, 'label') ?? uri,
        description: str(b, 'description'),
        matrixId: m && m.startsWith(matrixPrefix) ? m.slice(matrixPrefix.length) : null,
        createdAt: time(b, 'createdAt'),
        updatedAt: time(b, 'updatedAt'),
      },
      principalId: str(b, 'principalId'),
      principalCreatedAt: b.principalCreatedAt ? time(b, 'principalCreatedAt') : null,
    };
  }

  private findRecord(workspace: Workspace, kind: Kind, id: string): RecordRow {
    const found = UUID_PATTERN.test(id)
      ? this.records(workspace, kind, sparql`VALUES ?r { ${iri(this.graphs.resource(kind.toLowerCase(), id.toLowerCase()))} }`)[0]
      : undefined;
    if (!found) throw notFound(`${kind} "${id}" not found in workspace "${workspace.slug}"`);
    return found;
  }
}

const capitalize = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1);
