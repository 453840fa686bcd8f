import { z } from 'zod';
import { defineRoute, type RouteDef } from '../http/api.js';
import { handleMcpPost, type McpDeps } from './server.js';

const workspaceParams = z.object({ workspace: z.string().min(1).max(200) });

/** `POST /mcp/{workspace}` (docs/slash-commands.md, "MCP"); GET and DELETE answer 405: the endpoint is stateless. */
export function mcpRoutes(deps: McpDeps): RouteDef[] {
  const tag = 'MCP';
  const notAllowed = defineRoute({
    method: 'get', path: '/mcp/{workspace}', tag, access: 'member',
    summary: 'Not offered: the MCP endpoint is stateless (no server-sent stream, no session to end); 405',
    params: workspaceParams,
    responses: { 405: { description: 'Use POST' } },
    handler: async ({ res }) => {
      res.status(405).setHeader('Allow', 'POST');
      res.json({ success: false, error: { code: 'METHOD_NOT_ALLOWED', message: 'This MCP endpoint is stateless: send JSON-RPC messages by POST' } });
      return {};
    },
  });
  return [
    defineRoute({
      method: 'post', path: '/mcp/{workspace}', tag, access: 'member',
      summary: "Model Context Protocol (Streamable HTTP): the workspace's slash commands as tools (members); a read-only sparql tool for administrators",
      description: 'JSON-RPC 2.0 messages of MCP; tools/list and tools/call act as the caller (bearer token or X-Api-Key). '
        + 'A tool call answers the command\'s result as JSON-LD text.',
      params: workspaceParams,
      body: z.unknown(),
      responses: {
        200: { description: 'The JSON-RPC answer' },
        202: { description: 'A notification or response was accepted' },
        400: { description: 'Not a JSON-RPC message of MCP' },
        404: { description: 'Workspace not found, or the caller is no member' },
        406: { description: 'The client accepts neither application/json nor text/event-stream' },
      },
      handler: async ({ access, req, res, body }) => {
        await handleMcpPost(deps, access!, req, res, body);
        return {};
      },
    }),
    notAllowed,
    { ...notAllowed, method: 'delete' },
  ];
}
