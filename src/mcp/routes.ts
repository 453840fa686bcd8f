import { z } from 'zod';
import { defineRoute, type RouteDef } from '../http/api.js';
import { handleMcpPost, type McpDeps } from './server.js';

const workspaceParams = z.object({ workspace: z.string().min(1).max(200) });

/**
 * `POST /mcp/{workspace}` (docs/slash-commands.md, "MCP"). The endpoint is
 * stateless (no server-sent stream, no session to end): GET and DELETE get
 * the API's 405 with `Allow: POST`, which MCP clients expect from such a server.
 */
export function mcpRoutes(deps: McpDeps): RouteDef[] {
  const tag = 'MCP';
  return [
    defineRoute({
      method: 'post', path: '/mcp/{workspace}', tag, access: 'member',
      summary: "Model Context Protocol (Streamable HTTP): the workspace's slash commands as tools (members); a read-only sparql tool for administrators",
      description: 'JSON-RPC 2.0 messages of MCP; tools/list and tools/call act as the caller (bearer token or X-Api-Key). '
        + 'A tool call answers the command\'s result as JSON-LD text.',
      params: workspaceParams,
      // The SDK reads the body itself: a malformed one is answered JSON-RPC's parse error (-32700).
      streamBody: { mediaTypes: ['application/json'] },
      responses: {
        200: { description: 'The JSON-RPC answer' },
        202: { description: 'A notification or response was accepted' },
        400: { description: 'Not JSON (JSON-RPC error -32700, parse error) or not a JSON-RPC message of MCP' },
        413: { description: 'The body is larger than the service accepts (JSON-RPC error)' },
        415: { description: 'The body is not application/json (JSON-RPC error)' },
        404: { description: 'Workspace not found, or the caller is no member' },
        406: { description: 'The client accepts neither application/json nor text/event-stream' },
      },
      handler: async ({ access, req, res }) => {
        await handleMcpPost(deps, access!, req, res);
        return {};
      },
    }),
  ];
}
