import { z } from 'zod';
import { pageQuery } from '../http/paging.js';
import { userSchema } from '../users/schema.js';

/** Role and Agent share one shape (docs/api.md). */
const roleFields = {
  id: z.uuid(),
  uri: z.string().describe('Identifier of the role or agent in the matrix specification'),
  label: z.string(),
  description: z.string().nullable(),
  matrixId: z.uuid().nullable().describe('Matrix that defines it; null for the built-in administrator role'),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
};

export const roleSchema = z.object(roleFields).meta({ id: 'Role' });
export const agentSchema = z.object(roleFields).meta({ id: 'Agent' });

export const principalSchema = z.object({
  id: z.uuid(),
  workspaceId: z.uuid(),
  type: z.enum(['USER', 'AGENT']),
  actor: z.union([userSchema, agentSchema]).describe('The User (type USER) or the Agent (type AGENT) behind the principal'),
  createdAt: z.iso.datetime(),
}).meta({ id: 'Principal' });

/**
 * Path ids are plain strings: an id that is not a UUID names nothing, so it
 * answers 404 like any unknown id (the interface lists only 404 for them).
 */
const id = z.string().min(1).max(200);
const workspace = z.string().min(1).max(200);

export const workspaceParams = z.object({ workspace });
export const userParams = z.object({ workspace, userId: id });
export const roleParams = z.object({ workspace, roleId: id });
export const roleUserParams = z.object({ workspace, roleId: id, userId: id });
export const rolePrincipalParams = z.object({ workspace, roleId: id, principalId: id });
export const agentParams = z.object({ workspace, agentId: id });

export const roleListQuery = pageQuery.extend({
  assignee: z.uuid({ error: 'assignee must be a user id (UUID)' }).optional(),
  principal: z.uuid({ error: 'principal must be a principal id (UUID)' }).optional(),
});
