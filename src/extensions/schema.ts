import { z } from 'zod';

/** The Extension shape (docs/api.md), plus the nested references the ecosystem's client reads. */
export const extensionSchema = z.object({
  id: z.uuid(),
  label: z.string(),
  targetMatrixUri: z.string(),
  active: z.boolean(),
  ownerId: z.uuid(),
  ownerUsername: z.string(),
  /** Turtle text: present for one extension (X1, X2, X5), null in the list (X4). */
  content: z.string().nullable(),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
  /** The REDEPLOY command of the last change (null when no command was queued). */
  lastCommandId: z.uuid().nullable(),
  targetMatrix: z.object({ uri: z.string() }),
  owner: z.object({ id: z.uuid(), username: z.string() }),
}).meta({ id: 'Extension' });

export type Extension = z.infer<typeof extensionSchema>;

export const workspaceParams = z.object({ workspace: z.string().min(1).max(200) });
export const extensionParams = z.object({
  workspace: z.string().min(1).max(200),
  id: z.string().min(1).max(200),
});

/**
 * Query of X5 and X2. Both fields may come as multipart form fields instead
 * (the ecosystem's client sends them there), so they are optional here and
 * the handler merges query and form before checking.
 */
export const extensionQuery = z.object({
  targetMatrix: z.string().optional(),
  label: z.string().optional(),
});

export const LABEL_MAX = 200;
