import { z } from 'zod';
import { userSchema } from '../users/schema.js';
import { parameterSchema, parametersSchema } from './parameters.js';

/** Limits of the text fields of a slash command. */
export const LIMITS = { description: 4_000, interpretation: 20_000, scriptContent: 100_000 } as const;

export const slashCommandSchema = z.object({
  id: z.uuid(),
  alias: z.string(),
  description: z.string().nullable(),
  interpretation: z.string().nullable(),
  scriptType: z.enum(['CONSTRUCT', 'DESCRIBE']),
  scriptContent: z.string(),
  parameters: z.array(parameterSchema).describe('Declared parameters: each names a variable of the script, bound from the arguments of an execution'),
  workspaceId: z.uuid(),
  owner: userSchema,
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
}).meta({ id: 'SlashCommand' });

const text = (name: string, max: number) =>
  z.string({ error: `${name} must be a string` }).max(max, `${name} must be at most ${max} characters`);

/** The alias and script rules are checked by the service, so their messages can say exactly what is wrong. */
const fields = {
  alias: z.string({ error: 'alias must be a string' }),
  description: text('description', LIMITS.description).nullable(),
  interpretation: text('interpretation', LIMITS.interpretation).nullable(),
  scriptType: z.string({ error: 'scriptType must be a string: CONSTRUCT or DESCRIBE' }),
  scriptContent: text('scriptContent', LIMITS.scriptContent),
};

export const createBody = z.strictObject({
  alias: fields.alias.optional(),
  description: fields.description.optional(),
  interpretation: fields.interpretation.optional(),
  scriptType: fields.scriptType.optional(),
  scriptContent: fields.scriptContent.optional(),
  parameters: parametersSchema.optional(),
});

export const updateBody = createBody;

export type SlashCommandBody = z.infer<typeof createBody>;

export const workspaceParams = z.object({ workspace: z.string().min(1).max(200) });
export const commandParams = z.object({ workspace: z.string().min(1).max(200), id: z.string().min(1).max(200) });
export const listQuery = z.object({
  scope: z.enum(['own', 'all'], { error: 'scope must be "own" (the default: the caller\'s commands) or "all" (every command of the workspace)' }).default('own'),
});

/** The body of an execution: values of the command's declared parameters, by name. */
export const executeBody = z.strictObject({
  arguments: z.record(z.string(), z.unknown(), { error: 'arguments must be an object: {"name": value}' }).optional(),
});

export const aliasParams = z.object({ workspace: z.string().min(1).max(200), alias: z.string().min(1).max(200) });

export const executionSchema = z.object({
  alias: z.string(),
  interpretation: z.string().nullable(),
  tripleCount: z.number().int(),
  truncated: z.boolean(),
  result: z.record(z.string(), z.unknown()).describe('The result graph as JSON-LD, compacted with the script\'s prefixes'),
}).meta({ id: 'SlashCommandExecution' });
