import { z } from 'zod';
import type { Request } from 'express';
import { defineRoute, type RouteDef } from '../http/api.js';
import { badRequest, unsupportedMediaType } from '../errors.js';
import { isValidIri } from '../rdf/sparql.js';
import type { WorkspaceAccess, WorkspaceService } from '../workspaces/service.js';
import type { QuerySandbox, QueryRequest } from './sandbox.js';
import type { ResultFormat } from './protocol.js';
import { negotiate } from './negotiate.js';
import type { QueryParser } from '../sparql-parse/parser.js';

/**
 * The administrators' read-only SPARQL 1.1 Protocol endpoint
 * (https://www.w3.org/TR/sparql11-protocol/ section 2.1, query operation):
 * query via GET, via POST form-urlencoded, or via POST
 * application/sparql-query; the dataset may be given with
 * `default-graph-uri` / `named-graph-uri`. It sees every graph of the
 * workspace (its records included) and nothing of other workspaces, in the
 * same sandbox and with the same limits as slash commands.
 */

/** Accept media type -> the format answered, per query form. */
const BINDINGS_TYPES: Record<string, ResultFormat> = {
  'application/sparql-results+json': 'application/sparql-results+json',
  'application/sparql-results+xml': 'application/sparql-results+xml',
  'text/csv': 'text/csv',
  'text/tab-separated-values': 'text/tab-separated-values',
  'application/json': 'application/sparql-results+json',
  'application/xml': 'application/sparql-results+xml',
  'text/xml': 'application/sparql-results+xml',
};
const BOOLEAN_TYPES: Record<string, ResultFormat> = {
  'application/sparql-results+json': 'application/sparql-results+json',
  'application/sparql-results+xml': 'application/sparql-results+xml',
  'application/json': 'application/sparql-results+json',
  'application/xml': 'application/sparql-results+xml',
  'text/xml': 'application/sparql-results+xml',
};
const GRAPH_TYPES: Record<string, ResultFormat> = {
  'text/turtle': 'text/turtle',
  'application/n-triples': 'application/n-triples',
  'application/ld+json': 'application/ld+json',
  // Written only, for clients that ask for it first (SPARQLWrapper, rdflib's SPARQLStore); reading RDF/XML is offered nowhere.
  'application/rdf+xml': 'application/rdf+xml',
  // N-Triples is plain text; some clients only say text/plain.
  'text/plain': 'application/n-triples',
};

const QUERY_BODY_TYPES = ['application/sparql-query', 'application/x-www-form-urlencoded', 'application/sparql-update'];

const manyStrings = z.union([z.string(), z.array(z.string())]).optional();
const protocolQuery = z.object({
  query: manyStrings,
  update: manyStrings,
  'default-graph-uri': manyStrings,
  'named-graph-uri': manyStrings,
});
type ProtocolParams = z.infer<typeof protocolQuery>;

const list = (value: string | string[] | undefined): string[] => (value === undefined ? [] : Array.isArray(value) ? value : [value]);

/** The protocol's parameters from the URL and, for a form POST, the body. */
function protocolRequest(req: Request, urlParams: ProtocolParams, body: string | undefined): { query: string; defaultGraphs: string[]; namedGraphs: string[] } {
  const params = {
    query: list(urlParams.query),
    update: list(urlParams.update),
    defaultGraphs: list(urlParams['default-graph-uri']),
    namedGraphs: list(urlParams['named-graph-uri']),
  };
  if (req.method === 'POST') {
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (type === 'application/sparql-update') throw badRequest('This endpoint is read-only: SPARQL updates are refused');
    if (type === 'application/x-www-form-urlencoded') {
      const form = new URLSearchParams(body ?? '');
      params.query.push(...form.getAll('query'));
      params.update.push(...form.getAll('update'));
      params.defaultGraphs.push(...form.getAll('default-graph-uri'));
      params.namedGraphs.push(...form.getAll('named-graph-uri'));
    } else if (type === 'application/sparql-query') {
      if (params.query.length) throw badRequest('Give the query either in the body or as the query parameter, not both');
      params.query.push(body ?? '');
    } else {
      throw unsupportedMediaType(`POST a query as application/sparql-query or application/x-www-form-urlencoded, not ${type || 'a body without Content-Type'}`);
    }
  }
  if (params.update.length) throw badRequest('This endpoint is read-only: SPARQL updates are refused');
  if (params.query.length === 0) throw badRequest('Missing the query parameter: give a SPARQL query');
  if (params.query.length > 1) throw badRequest('Give exactly one query');
  for (const g of [...params.defaultGraphs, ...params.namedGraphs]) {
    if (!isValidIri(g)) throw badRequest(`Not an absolute IRI: ${JSON.stringify(g)} (default-graph-uri / named-graph-uri)`);
  }
  return { query: params.query[0]!, defaultGraphs: params.defaultGraphs, namedGraphs: params.namedGraphs };
}

export function sparqlRoutes(sandbox: QuerySandbox, workspaces: WorkspaceService, maxBodyBytes: number, parser: QueryParser): RouteDef[] {
  const tag = 'SPARQL';
  const responses = {
    200: {
      description: 'SPARQL results (SELECT, ASK) or RDF (CONSTRUCT, DESCRIBE), by content negotiation',
      mediaTypes: [...new Set([...Object.keys(BINDINGS_TYPES), ...Object.keys(GRAPH_TYPES)])],
    },
    400: { description: 'Not a valid read query, an update, or a query the engine refused' },
    403: { description: 'Not an administrator of the workspace' },
    404: { description: 'Workspace not found' },
    406: { description: 'Unsupported Accept' },
    415: { description: 'Unsupported request body type' },
    503: { description: 'QUERY_TIMEOUT: the time limit passed; QUERY_MEMORY_LIMIT: the query needed more memory than the sandbox may use' },
  };
  const handle = async ({ query, body, access: granted, req }: { query: ProtocolParams; body: unknown; access: WorkspaceAccess | undefined; req: Request }) => {
    const access = granted!;
    const request = protocolRequest(req, query, typeof body === 'string' ? body : undefined);
    const parsed = await parser.parseQuery(request.query, 'query', sandbox.maxResults + 1);
    const offered = parsed.form === 'SELECT' ? BINDINGS_TYPES : parsed.form === 'ASK' ? BOOLEAN_TYPES : GRAPH_TYPES;
    const mediaType = negotiate(req, Object.keys(offered));
    const format = offered[mediaType]!;
    const run: QueryRequest = {
      // The worker applies the result limit exactly (limits.ts).
      query: parsed.text,
      kind: parsed.form === 'SELECT' || parsed.form === 'ASK' ? 'bindings' : 'graph',
      format,
      prefixes: parsed.prefixes,
      union: !parsed.hasDataset,
      // The protocol's dataset replaces the query's (FROM / FROM NAMED), as the protocol says.
      ...(request.defaultGraphs.length || request.namedGraphs.length
        ? { defaultGraphs: request.defaultGraphs, namedGraphs: request.namedGraphs }
        : parsed.dataset),
    };
    const result = await sandbox.run(access.workspace.id, 'all', run);
    const headers: Record<string, string> = { Vary: 'Accept' };
    if (parsed.form !== 'ASK') {
      headers['X-Result-Count'] = String(result.count);
      headers['X-Result-Truncated'] = String(result.truncated);
    }
    return { headers, raw: { contentType: format === 'application/n-triples' && mediaType === 'text/plain' ? 'text/plain' : format, body: result.body } };
  };
  const workspaceParams = z.object({ workspace: z.string().min(1).max(200) });
  return [
    defineRoute({
      method: 'get', path: '/api/v1/sparql/{workspace}', tag, access: 'admin',
      summary: "SPARQL 1.1 Protocol query over the workspace's graphs (administrators; read-only)",
      params: workspaceParams,
      query: protocolQuery,
      responses,
      handler: async (ctx) => handle(ctx),
    }),
    defineRoute({
      method: 'post', path: '/api/v1/sparql/{workspace}', tag, access: 'admin',
      summary: 'SPARQL 1.1 Protocol query by POST (application/sparql-query or form-urlencoded; administrators; read-only)',
      params: workspaceParams,
      query: protocolQuery,
      textBody: { mediaTypes: QUERY_BODY_TYPES, maxBytes: maxBodyBytes },
      responses,
      handler: async (ctx) => handle(ctx),
    }),
  ];
}
