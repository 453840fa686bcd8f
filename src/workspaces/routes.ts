import { z } from 'zod';
import { defineRoute, type RouteDef } from '../http/api.js';
import { userSchema } from '../users/schema.js';
import type { WorkspaceService } from './service.js';
import { createWorkspaceBody, memberParams, putMemberBody, workspaceParams, workspaceSchema } from './schema.js';

/** Workspace and membership endpoints (docs/api.md, "Workspaces"; docs/iam.md). */
export function workspaceRoutes(workspaces: WorkspaceService): RouteDef[] {
  const tag = 'Workspaces';
  return [
    defineRoute({
      method: 'post', path: '/api/v1/workspaces', tag, access: 'system-admin',
      summary: 'Create a workspace (system admin)',
      body: createWorkspaceBody,
      responses: { 201: { description: 'Created', data: workspaceSchema }, 400: { description: 'Bad slug or engine version' }, 403: { description: 'Not a system admin' }, 409: { description: 'Slug taken' } },
      handler: async ({ body, auth }) => {
        const ws = await workspaces.create({ ...body, owner: body.owner ?? auth.username });
        return { status: 201, data: ws, headers: { Location: `/api/v1/workspaces/${ws.id}` } };
      },
    }),
    defineRoute({
      method: 'get', path: '/api/v1/workspaces', tag,
      summary: "The caller's workspaces (all of them for a system admin)",
      responses: { 200: { description: 'Workspaces', data: z.array(workspaceSchema) } },
      handler: async ({ auth }) => ({ data: await workspaces.list(auth) }),
    }),
    defineRoute({
      method: 'get', path: '/api/v1/workspaces/{workspace}', tag, access: 'member',
      summary: 'One workspace, by slug or id',
      params: workspaceParams,
      responses: { 200: { description: 'The workspace', data: workspaceSchema }, 404: { description: 'Not found or not a member' } },
      handler: async ({ params, auth, access }) => ({ data: access!.workspace }),
    }),
    defineRoute({
      method: 'put', path: '/api/v1/workspaces/{workspace}/members/{username}', tag, access: 'admin',
      summary: 'Add or update a member (administrators); creates the user record if needed',
      params: memberParams,
      body: putMemberBody,
      responses: { 200: { description: 'The member', data: userSchema }, 403: { description: 'Not an administrator, or the body would change the profile of an existing user other than the caller (only that user or a system administrator may)' }, 404: { description: 'Workspace not found' }, 409: { description: 'Would remove the last administrator' } },
      handler: async ({ params, body, auth, access }) => {
        const { workspace } = access!;
        return { data: await workspaces.putMember(workspace, params.username, body, auth) };
      },
    }),
    defineRoute({
      method: 'delete', path: '/api/v1/workspaces/{workspace}/members/{username}', tag, access: 'admin',
      summary: 'Remove a member and its role assignments (administrators)',
      params: memberParams,
      responses: { 200: { description: 'Removed', data: z.string() }, 403: { description: 'Not an administrator' }, 404: { description: 'Not a member' }, 409: { description: 'Last administrator, or the owner (only a system administrator may remove the owner)' } },
      handler: async ({ params, auth, access }) => {
        const { workspace } = access!;
        await workspaces.removeMember(workspace, params.username, auth.systemAdmin);
        return { data: `User "${params.username}" is no longer a member of workspace "${workspace.slug}"` };
      },
    }),
  ];
}
