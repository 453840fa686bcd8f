import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { CallToolResult, JSONRPCMessage, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { Request, Response } from 'express';
import { z } from 'zod';
import { AppError } from '../errors.js';
import type { WorkspaceAccess } from '../workspaces/service.js';
import type { SlashCommand, SlashCommandService } from '../slash/service.js';
import { argumentsJsonSchema } from '../slash/parameters.js';
import type { QuerySandbox } from '../sandbox/sandbox.js';
import { parseReadQuery } from '../sandbox/script.js';

/**
 * The Model Context Protocol endpoint of a workspace (docs/slash-commands.md, "MCP"),
 * with the official SDK over Streamable HTTP, stateless: every POST gets a
 * fresh server bound to the caller, so a tool call runs as the caller with
 * the caller's rights, and nothing is kept between requests.
 *
 * Tools: one per slash command of the workspace (any member may run any
 * command), named from its alias, described by its description and
 * interpretation, taking its declared parameters; a call answers the result
 * as JSON-LD text. Administrators of the workspace also get `sparql`, a
 * read-only query over every graph of the workspace (as the SPARQL endpoint).
 */

export const SPARQL_TOOL = 'sparql';

/** The SDK, loaded on the first MCP request: starting the service (and the CLI) does not pay for it. */
let sdkModules: Promise<{
  server: typeof import('@modelcontextprotocol/sdk/server/index.js');
  http: typeof import('@modelcontextprotocol/sdk/server/streamableHttp.js');
  types: typeof import('@modelcontextprotocol/sdk/types.js');
}> | undefined;
const sdk = () => (sdkModules ??= Promise.all([
  import('@modelcontextprotocol/sdk/server/index.js'),
  import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
  import('@modelcontextprotocol/sdk/types.js'),
]).then(([server, http, types]) => ({ server, http, types })));
const NAME_MAX = 64;

/** Tool names: letters, digits, "_" and "-" (what MCP clients accept everywhere); ":" of an alias becomes "_". */
export function toolNames(commands: SlashCommand[]): Map<string, SlashCommand> {
  const taken = new Set<string>([SPARQL_TOOL]);
  const byName = new Map<string, SlashCommand>();
  for (const command of [...commands].sort((a, b) => (a.alias < b.alias ? -1 : a.alias > b.alias ? 1 : 0))) {
    const base = command.alias.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, NAME_MAX - 4);
    let name = base;
    for (let i = 2; taken.has(name); i++) name = `${base}_${i}`;
    taken.add(name);
    byName.set(name, command);
  }
  return byName;
}

function describe(command: SlashCommand): string {
  const parts = [command.description ?? `Slash command /${command.alias}`];
  if (command.interpretation) parts.push(`Interpretation: ${command.interpretation}`);
  parts.push(`Runs the ${command.scriptType} script of /${command.alias} over the workspace's knowledge and answers the result graph as JSON-LD.`);
  return parts.join('\n\n');
}

type McpErrorClass = typeof import('@modelcontextprotocol/sdk/types.js').McpError;

/**
 * `tools/call` with its params checked here. Registered with the SDK's own
 * schema, a call whose params do not fit it (no name, arguments that are not
 * an object) failed that schema's parse before any handler ran and was
 * answered -32603 (internal error) with the schema's issues as the message;
 * now it is -32602 (invalid params) with a sentence.
 */
function toolsCallRequest(McpError: McpErrorClass, invalidParams: number) {
  const refuse = (message: string): never => { throw new McpError(invalidParams, message); };
  const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
  return z.object({
    method: z.literal('tools/call'),
    params: z.unknown().transform((params) => {
      if (!isObject(params)) return refuse('params must be an object naming the tool to call');
      if (typeof params.name !== 'string') return refuse('params.name must be a string: the name of a tool, as tools/list gives it');
      if (params.arguments !== undefined && !isObject(params.arguments)) return refuse('params.arguments must be an object of the tool\'s arguments');
      return params as { name: string; arguments?: Record<string, unknown> };
    }),
  }).passthrough();
}

const text = (value: string, isError = false): CallToolResult => ({ content: [{ type: 'text', text: value }], ...(isError ? { isError: true } : {}) });

export interface McpDeps {
  commands: SlashCommandService;
  sandbox: QuerySandbox;
  /** The largest request body read (bytes); a larger one is answered 413. */
  maxBodyBytes: number;
}

/** A server for one request of one caller in one workspace. */
async function buildServer(deps: McpDeps, access: WorkspaceAccess): Promise<Server> {
  const { server: { Server }, types: { ErrorCode, ListToolsRequestSchema, McpError } } = await sdk();
  const server = new Server({ name: 'workspace-service', version: '1.0.0' }, { capabilities: { tools: {} } });
  const tools = async () => toolNames(await deps.commands.listAll(access));

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const list: Tool[] = [];
    for (const [name, command] of await tools()) {
      list.push({
        name,
        title: `/${command.alias}`,
        description: describe(command),
        inputSchema: argumentsJsonSchema(command.parameters) as Tool['inputSchema'],
        annotations: { readOnlyHint: true, openWorldHint: false },
      });
    }
    if (access.isAdmin) {
      list.push({
        name: SPARQL_TOOL,
        title: 'SPARQL query (read-only)',
        description: 'Runs a read-only SPARQL query (SELECT, ASK, CONSTRUCT or DESCRIBE) over every graph of the workspace, its records included. '
          + 'SELECT and ASK answer SPARQL JSON results; CONSTRUCT and DESCRIBE answer JSON-LD. Updates are refused.',
        inputSchema: { type: 'object', properties: { query: { type: 'string', description: 'The SPARQL query' } }, required: ['query'], additionalProperties: false },
        annotations: { readOnlyHint: true, openWorldHint: false },
      });
    }
    return { tools: list };
  });

  server.setRequestHandler(toolsCallRequest(McpError, ErrorCode.InvalidParams), async (request) => {
    const { name } = request.params;
    const args = (request.params.arguments ?? {}) as Record<string, unknown>;
    try {
      if (name === SPARQL_TOOL && access.isAdmin) return await runSparql(deps.sandbox, access, args);
      const command = (await tools()).get(name);
      if (!command) throw new McpError(ErrorCode.InvalidParams, `Unknown tool "${name}"`);
      const execution = await deps.commands.execute(access, command, 'application/ld+json', args);
      return text(execution.body);
    } catch (err) {
      // What the caller got wrong (bad arguments, a time-out) is a tool error the model can read; anything else stays a protocol error.
      if (err instanceof AppError && err.code !== 'INTERNAL') return text(err.message, true);
      throw err;
    }
  });
  return server;
}

async function runSparql(sandbox: QuerySandbox, access: WorkspaceAccess, args: Record<string, unknown>): Promise<CallToolResult> {
  if (typeof args.query !== 'string') return text('query is required: a SPARQL query as a string', true);
  const parsed = parseReadQuery(args.query, 'query');
  const graph = parsed.form === 'CONSTRUCT' || parsed.form === 'DESCRIBE';
  const result = await sandbox.run(access.workspace.id, 'all', {
    // The worker applies the result limit exactly (sandbox/limits.ts).
    query: parsed.text,
    kind: graph ? 'graph' : 'bindings',
    format: graph ? 'application/ld+json' : 'application/sparql-results+json',
    prefixes: parsed.prefixes,
    union: !parsed.hasDataset,
    ...parsed.dataset,
  });
  return text(result.body);
}

/** "MCP error -32602: " at the start of an error's message. */
const MCP_PREFIX = /^MCP error -?\d+: /;

/**
 * An answer with the bare message of its error. The SDK sends an
 * `McpError`'s message, which its constructor prefixed with
 * "MCP error <code>: ", and a client's `McpError` prefixes it again
 * ("MCP error -32602: MCP error -32602: ...").
 */
function withBareMessage(message: JSONRPCMessage): JSONRPCMessage {
  if (!('error' in message) || typeof message.error?.message !== 'string' || !MCP_PREFIX.test(message.error.message)) return message;
  return { ...message, error: { ...message.error, message: message.error.message.replace(MCP_PREFIX, '') } };
}

/** Answers one MCP POST for the caller, and resolves once the answer is sent. The SDK reads the request's body. */
export async function handleMcpPost(deps: McpDeps, access: WorkspaceAccess, req: Request, res: Response): Promise<void> {
  const server = await buildServer(deps, access);
  const { http: { StreamableHTTPServerTransport } } = await sdk();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true, maxRequestBodySize: deps.maxBodyBytes });
  const send = transport.send.bind(transport);
  transport.send = (message, options) => send(withBareMessage(message), options);
  const finished = new Promise<void>((resolve) => { res.once('close', resolve); res.once('finish', resolve); });
  try {
    await server.connect(transport);
    await transport.handleRequest(req, res);
    if (!res.headersSent) await finished;
  } finally {
    await transport.close().catch(() => {});
    await server.close().catch(() => {});
  }
}
