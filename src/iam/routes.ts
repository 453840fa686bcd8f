import { z } from 'zod';
import { defineRoute, type RouteDef } from '../http/api.js';
import { pageQuery, pageSchema } from '../http/paging.js';
import { userSchema } from '../users/schema.js';
import type { WorkspaceService } from '../workspaces/service.js';
import type { IamService } from './service.js';
import {
  agentParams, agentSchema, principalSchema, roleListQuery, roleParams, rolePrincipalParams, roleSchema,
  roleUserParams, userParams, workspaceParams,
} from './schema.js';

const notMember = 'Workspace not found, or the caller is not a member';
const adminOnly = 'The caller is a member but not an administrator';

/**
 * Identity and access endpoints, I1 to I14 (docs/api.md). Members (and
 * system admins) read; administrators alone assign and remove roles
 * (docs/iam.md).
 */
export function iamRoutes(workspaces: WorkspaceService, iam: IamService): RouteDef[] {
  const tag = 'Identity and access';
  const base = '/api/v1/iam/{workspace}';
  return [
    // I1
    defineRoute({
      method: 'post', path: `${base}/roles/{roleId}/assignees/{userId}`, tag, access: 'admin',
      summary: 'Assign a role to a member user (administrators)',
      params: roleUserParams,
      responses: {
        200: { description: 'Assigned; data says what happened', data: z.string() },
        403: { description: adminOnly }, 404: { description: 'Role or user not found' }, 409: { description: 'The user already has the role' },
      },
      handler: async ({ params, auth, access }) => {
        const { workspace } = access!;
        return { data: await iam.assignToUser(workspace, params.roleId, params.userId) };
      },
    }),
    // I2
    defineRoute({
      method: 'delete', path: `${base}/roles/{roleId}/assignees/{userId}`, tag, access: 'admin',
      summary: 'Remove a role from a member user (administrators)',
      params: roleUserParams,
      responses: {
        200: { description: 'Removed; data says what happened', data: z.string() },
        403: { description: adminOnly }, 404: { description: 'Role, user or assignment not found' },
        409: { description: 'Would remove the last administrator, or the owner\'s administrator role' },
      },
      handler: async ({ params, auth, access }) => {
        const { workspace } = access!;
        return { data: await iam.removeFromUser(workspace, params.roleId, params.userId) };
      },
    }),
    // I3
    defineRoute({
      method: 'post', path: `${base}/roles/{roleId}/assignees/principals/{principalId}`, tag, access: 'admin',
      summary: 'Assign a role to a principal, of a user or of an agent (administrators)',
      params: rolePrincipalParams,
      responses: {
        200: { description: 'Assigned; data says what happened', data: z.string() },
        403: { description: adminOnly }, 404: { description: 'Role or principal not found' },
        409: { description: 'The principal already has the role (by assignment, or for an agent by its specification)' },
      },
      handler: async ({ params, auth, access }) => {
        const { workspace } = access!;
        return { data: await iam.assignToPrincipal(workspace, params.roleId, params.principalId) };
      },
    }),
    // I4
    defineRoute({
      method: 'delete', path: `${base}/roles/{roleId}/assignees/principals/{principalId}`, tag, access: 'admin',
      summary: 'Remove a role from a principal (administrators)',
      description: "An agent's roles from its matrix specification are not assignments: removing one answers 404.",
      params: rolePrincipalParams,
      responses: {
        200: { description: 'Removed; data says what happened', data: z.string() },
        403: { description: adminOnly }, 404: { description: 'Role, principal or assignment not found' },
        409: { description: 'Would remove the last administrator, or the owner\'s administrator role' },
      },
      handler: async ({ params, auth, access }) => {
        const { workspace } = access!;
        return { data: await iam.removeFromPrincipal(workspace, params.roleId, params.principalId) };
      },
    }),
    // I5
    defineRoute({
      method: 'get', path: `${base}/users`, tag, access: 'member',
      summary: 'List the member users, one page at a time (ordered by username); username= finds one member by name',
      params: workspaceParams,
      query: pageQuery.extend({ username: z.string().min(1, 'username must not be empty').max(256, 'username must be at most 256 characters').optional() }),
      responses: { 200: { description: 'A page of users', data: pageSchema(userSchema) }, 400: { description: 'Bad page or pageSize' }, 404: { description: notMember } },
      handler: async ({ params, query, auth, access }) => {
        const { workspace } = access!;
        return { data: await iam.listUsers(workspace, query, query.username) };
      },
    }),
    // I8 (declared before I6 so `me` is never read as a user id)
    defineRoute({
      method: 'get', path: `${base}/users/me/principal`, tag, access: 'member',
      summary: 'The principal of the authenticated user',
      params: workspaceParams,
      responses: { 200: { description: 'The caller\'s principal', data: principalSchema }, 404: { description: 'Workspace not found, or the caller is not a member' } },
      handler: async ({ params, auth, access }) => {
        return { data: await iam.principalOfUser(access!.workspace, access!.isMember ? access!.user : null) };
      },
    }),
    // I6
    defineRoute({
      method: 'get', path: `${base}/users/{userId}`, tag, access: 'member',
      summary: 'One member user',
      params: userParams,
      responses: { 200: { description: 'The user', data: userSchema }, 404: { description: 'User not in the workspace' } },
      handler: async ({ params, auth, access }) => {
        const { workspace } = access!;
        return { data: await iam.getMemberUser(workspace, params.userId) };
      },
    }),
    // I7
    defineRoute({
      method: 'get', path: `${base}/users/{userId}/roles`, tag, access: 'member',
      summary: 'The roles assigned to a member user',
      params: userParams,
      responses: { 200: { description: 'Roles', data: z.array(roleSchema) }, 404: { description: 'User not in the workspace' } },
      handler: async ({ params, auth, access }) => {
        const { workspace } = access!;
        return { data: await iam.userRoles(workspace, params.userId) };
      },
    }),
    // I9
    defineRoute({
      method: 'get', path: `${base}/roles`, tag, access: 'member',
      summary: 'List roles: the built-in administrator role and the roles of installed matrices',
      description: '`assignee` keeps the roles assigned to that user; `principal` the roles of that principal (for an agent, also those of its specification).',
      params: workspaceParams,
      query: roleListQuery,
      responses: { 200: { description: 'A page of roles', data: pageSchema(roleSchema) }, 400: { description: 'Bad paging value or filter' }, 404: { description: notMember } },
      handler: async ({ params, query, auth, access }) => {
        const { workspace } = access!;
        return { data: await iam.listRoles(workspace, query) };
      },
    }),
    // I10
    defineRoute({
      method: 'get', path: `${base}/roles/{roleId}`, tag, access: 'member',
      summary: 'One role',
      params: roleParams,
      responses: { 200: { description: 'The role', data: roleSchema }, 404: { description: 'Role not found' } },
      handler: async ({ params, auth, access }) => {
        const { workspace } = access!;
        return { data: await iam.getRole(workspace, params.roleId) };
      },
    }),
    // I11
    defineRoute({
      method: 'get', path: `${base}/roles/{roleId}/assignees`, tag, access: 'member',
      summary: 'The principals holding a role: users by assignment, agents by specification or assignment',
      params: roleParams,
      responses: { 200: { description: 'Principals', data: z.array(principalSchema) }, 404: { description: 'Role not found' } },
      handler: async ({ params, auth, access }) => {
        const { workspace } = access!;
        return { data: await iam.roleAssignees(workspace, params.roleId) };
      },
    }),
    // I12
    defineRoute({
      method: 'get', path: `${base}/agents`, tag, access: 'member',
      summary: 'List the agents defined by the installed matrices',
      params: workspaceParams,
      query: pageQuery,
      responses: { 200: { description: 'A page of agents', data: pageSchema(agentSchema) }, 400: { description: 'Bad page or pageSize' }, 404: { description: notMember } },
      handler: async ({ params, query, auth, access }) => {
        const { workspace } = access!;
        return { data: await iam.listAgents(workspace, query) };
      },
    }),
    // I13
    defineRoute({
      method: 'get', path: `${base}/agents/{agentId}`, tag, access: 'member',
      summary: 'One agent',
      params: agentParams,
      responses: { 200: { description: 'The agent', data: agentSchema }, 404: { description: 'Agent not found' } },
      handler: async ({ params, auth, access }) => {
        const { workspace } = access!;
        return { data: await iam.getAgent(workspace, params.agentId) };
      },
    }),
    // I14
    defineRoute({
      method: 'get', path: `${base}/agents/{agentId}/roles`, tag, access: 'member',
      summary: "An agent's roles: those of its matrix specification and those assigned to it",
      params: agentParams,
      responses: { 200: { description: 'Roles', data: z.array(roleSchema) }, 404: { description: 'Agent not found' } },
      handler: async ({ params, auth, access }) => {
        const { workspace } = access!;
        return { data: await iam.agentRoles(workspace, params.agentId) };
      },
    }),
  ];
}
