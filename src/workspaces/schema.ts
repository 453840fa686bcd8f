import { z } from 'zod';

export const workspaceSchema = z.object({
  id: z.uuid(),
  slug: z.string(),
  name: z.string(),
  engineVersion: z.string(),
  owner: z.object({ id: z.uuid(), username: z.string() }),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
}).meta({ id: 'Workspace' });

export const workspaceParams = z.object({ workspace: z.string().min(1).max(200) });

export const createWorkspaceBody = z.strictObject({
  slug: z.string({ error: 'slug is required' }).max(64, 'slug must be at most 64 characters'),
  name: z.string().min(1).max(200).optional(),
  engineVersion: z.string().max(50).optional(),
  owner: z.string().min(1).max(256).optional(),
});

export const memberParams = z.object({ workspace: z.string().min(1).max(200), username: z.string().min(1).max(256) });

const profileField = z.string().max(512).optional();
export const putMemberBody = z.strictObject({
  email: profileField,
  firstName: profileField,
  lastName: profileField,
  website: profileField,
  admin: z.boolean().optional(),
});
