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

/** A user name as a token names one: 1 to 256 characters, no control character, no lone surrogate. */
const username = z.string().min(1).max(256)
  .refine((v) => !/[\u0000-\u001f]/.test(v), 'must not contain control characters')
  .refine((v) => !/[\uD800-\uDFFF]/u.test(v), 'must not contain a lone surrogate (not a Unicode character)');

export const workspaceParams = z.object({ workspace: z.string().min(1).max(200) });

export const createWorkspaceBody = z.strictObject({
  slug: z.string({ error: 'slug is required' }).max(64, 'slug must be at most 64 characters'),
  name: z.string().min(1).max(200).optional(),
  engineVersion: z.string().max(50).optional(),
  owner: username.optional(),
});

export const memberParams = z.object({ workspace: z.string().min(1).max(200), username });

const profileField = z.string().max(512).optional();
export const putMemberBody = z.strictObject({
  email: profileField,
  firstName: profileField,
  lastName: profileField,
  website: profileField,
  admin: z.boolean().optional(),
});
