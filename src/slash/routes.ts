import { z } from 'zod';
import { defineRoute, type Reply, type RouteDef } from '../http/api.js';
import { AppError } from '../errors.js';
import type { WorkspaceService } from '../workspaces/service.js';
import type { UserService } from '../users/service.js';
import type { AuthContext } from '../auth/context.js';
import type { WorkspaceAccess } from '../workspaces/service.js';
import { negotiate } from '../sandbox/negotiate.js';
import type { SlashCommandService, SlashCommand, Execution } from './service.js';
import { aliasParams, commandParams, createBody, executeBody, executionSchema, listQuery, slashCommandSchema, updateBody, workspaceParams } from './schema.js';

const EXECUTION_TYPES = ['application/json', 'text/turtle', 'application/n-triples', 'application/ld+json'] as const;

/** The answer of an execution in the negotiated media type. */
function executionReply(execution: Execution, mediaType: (typeof EXECUTION_TYPES)[number]): Reply {
  const headers = {
    Vary: 'Accept',
    'X-Triple-Count': String(execution.count),
    'X-Result-Truncated': String(execution.truncated),
  };
  if (mediaType !== 'application/json') {
    return { headers, raw: { contentType: mediaType, body: execution.body } };
  }
  // The envelope, with the worker's JSON-LD text spliced in rather than parsed and re-serialized here.
  const head = JSON.stringify({
    success: true,
    data: {
      alias: execution.command.alias,
      interpretation: execution.command.interpretation,
      tripleCount: execution.count,
      truncated: execution.truncated,
    },
  });
  return { headers, raw: { contentType: 'application/json', body: `${head.slice(0, -2)},"result":${execution.body}}}` } };
}

/** Slash commands C1 to C5 and their execution (docs/api.md; docs/slash-commands.md). */
export function slashCommandRoutes(commands: SlashCommandService, workspaces: WorkspaceService, users: UserService): RouteDef[] {
  const tag = 'Slash commands';
  const caller = async (auth: AuthContext) => {
    const user = await users.get({ username: auth.username });
    if (!user) throw new AppError('INTERNAL', 'The caller has no user record');
    return user;
  };
  const executeResponses = {
    200: { description: 'The result: the JSON envelope (default), or RDF by content negotiation', data: executionSchema, mediaTypes: ['text/turtle', 'application/n-triples', 'application/ld+json'] },
    400: { description: 'The script failed' },
    404: { description: 'Command not found' },
    406: { description: 'Unsupported Accept' },
    503: { description: 'QUERY_TIMEOUT: the time limit passed; QUERY_MEMORY_LIMIT: the query needed more memory than the sandbox may use' },
  };
  const execute = async (access: WorkspaceAccess, command: SlashCommand, accept: (typeof EXECUTION_TYPES)[number], args: Record<string, unknown> = {}) => {
    const execution = await commands.execute(access, command, accept === 'application/json' ? 'envelope' : accept, args);
    return executionReply(execution, accept);
  };
  return [
    defineRoute({
      method: 'get', path: '/api/v1/commands/{workspace}', tag, access: 'member',
      summary: "C4: the caller's own slash commands in the workspace; with scope=all every command of the workspace",
      description: 'scope=all (any member) lists every slash command of the workspace, each with its owner, so an agent can discover what it may run.',
      params: workspaceParams, query: listQuery,
      responses: { 200: { description: 'Commands (bare array, by alias)', data: z.array(slashCommandSchema) }, 400: { description: 'Bad scope' }, 404: { description: 'Workspace not found' } },
      handler: async ({ query, auth, access }) => {
        if (query.scope === 'all') return { data: await commands.listAll(access!) };
        return { data: await commands.listOwn(access!, access!.user ?? await caller(auth)) };
      },
    }),
    defineRoute({
      method: 'get', path: '/api/v1/commands/{workspace}/alias/{alias}', tag, access: 'member',
      summary: 'One slash command by its alias (any member)',
      params: aliasParams,
      responses: { 200: { description: 'The command', data: slashCommandSchema }, 404: { description: 'Workspace or command not found' } },
      handler: async ({ params, access }) => ({ data: await commands.byAlias(access!, params.alias) }),
    }),
    defineRoute({
      method: 'post', path: '/api/v1/commands/{workspace}', tag, access: 'member',
      summary: 'C5: create a slash command (owned by the caller)',
      description: 'alias (without a leading slash), scriptType (CONSTRUCT or DESCRIBE) and scriptContent are required. Success is 200, not 201.',
      params: workspaceParams,
      body: createBody,
      responses: { 200: { description: 'Created', data: slashCommandSchema }, 400: { description: 'Invalid data' }, 404: { description: 'Workspace not found' }, 409: { description: 'Alias already exists' } },
      handler: async ({ params, body, auth, access }) => {
        return { data: await commands.create(access!, access!.user ?? await caller(auth), body) };
      },
    }),
    defineRoute({
      method: 'get', path: '/api/v1/commands/{workspace}/{id}', tag, access: 'member',
      summary: 'C1: one slash command',
      params: commandParams,
      responses: { 200: { description: 'The command', data: slashCommandSchema }, 404: { description: 'Not found' } },
      handler: async ({ params, access }) => ({ data: await commands.get(access!, params.id) }),
    }),
    defineRoute({
      method: 'put', path: '/api/v1/commands/{workspace}/{id}', tag, access: 'member',
      summary: 'C2: update any subset of the fields (owner or administrator)',
      params: commandParams,
      body: updateBody,
      responses: { 200: { description: 'Updated', data: slashCommandSchema }, 400: { description: 'Invalid data' }, 403: { description: 'Neither owner nor administrator' }, 404: { description: 'Not found' }, 409: { description: 'Alias already exists' } },
      handler: async ({ params, body, auth, access }) => ({ data: await commands.update(access!, params.id, body) }),
    }),
    defineRoute({
      method: 'delete', path: '/api/v1/commands/{workspace}/{id}', tag, access: 'member',
      summary: 'C3: delete (owner or administrator)',
      params: commandParams,
      responses: { 200: { description: 'Deleted', data: z.string() }, 403: { description: 'Neither owner nor administrator' }, 404: { description: 'Not found' } },
      handler: async ({ params, auth, access }) => {
        const deleted = await commands.delete(access!, params.id);
        return { data: `Slash command "${deleted.alias}" deleted` };
      },
    }),
    defineRoute({
      method: 'post', path: '/api/v1/commands/{workspace}/{id}/execute', tag, access: 'member',
      summary: "Run a slash command over the workspace's knowledge (any member)",
      params: commandParams, body: executeBody,
      responses: executeResponses,
      handler: async ({ params, body, req, access }) => {
        const accept = negotiate(req, EXECUTION_TYPES);
        return execute(access!, await commands.get(access!, params.id), accept, body.arguments);
      },
    }),
    defineRoute({
      method: 'post', path: '/api/v1/commands/{workspace}/alias/{alias}/execute', tag, access: 'member',
      summary: 'Run a slash command given by its alias (any member)',
      params: aliasParams, body: executeBody,
      responses: executeResponses,
      handler: async ({ params, body, req, access }) => {
        const accept = negotiate(req, EXECUTION_TYPES);
        return execute(access!, await commands.byAlias(access!, params.alias), accept, body.arguments);
      },
    }),
  ];
}
