import { createGzip } from 'node:zlib';
import type { Request, Response } from 'express';
import express from 'express';
import { z } from 'zod';
import { defineRoute, type RouteDef } from '../http/api.js';
import { badRequest, notAcceptable, payloadTooLarge, unsupportedMediaType } from '../errors.js';
import { SLUG_PATTERN } from './service.js';
import { workspaceParams, workspaceSchema } from './schema.js';
import { EXPORT_TYPES, type WorkspaceTransfer } from './transfer.js';
import type { ImportFormat } from './import-check.js';

const IMPORT_TYPES: Record<string, ImportFormat> = { 'application/n-quads': 'N-Quads', 'application/trig': 'TriG' };

/** The body as bytes, gzip or deflate undone (`Content-Encoding`), at most `limit` bytes. */
function readBody(req: Request, res: Response, limit: number): Promise<Buffer> {
  const parse = express.raw({ type: () => true, limit });
  return new Promise((resolve, reject) => {
    parse(req, res, (err?: unknown) => {
      if (err) {
        const e = err as { type?: string; status?: number; message?: string };
        if (e.type === 'entity.too.large') reject(payloadTooLarge(`An import body may hold at most ${limit} bytes (WSM_MAX_IMPORT_BYTES)`));
        else if (e.status && e.status < 500) reject(badRequest(`The body could not be read: ${e.message ?? 'bad encoding'}`));
        else reject(err as Error);
        return;
      }
      resolve(Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0));
    });
  });
}

/** Export and import of one workspace (docs/backup.md). */
export function transferRoutes(transfer: WorkspaceTransfer, options: { maxImportBytes: number }): RouteDef[] {
  const tag = 'Workspaces';
  return [
    defineRoute({
      method: 'post', path: '/api/v1/workspaces/import', tag, access: 'system-admin',
      summary: 'Make a workspace of an export (system admin): N-Quads or TriG, gzip allowed as Content-Encoding',
      query: z.object({ slug: z.string().regex(SLUG_PATTERN, 'slug must be 1 to 64 lower-case letters, digits or hyphens, starting and ending with a letter or digit').optional() }),
      responses: {
        201: { description: 'Imported', data: workspaceSchema },
        400: { description: 'The body does not parse, or holds something an export never holds (another graph, a reserved record)' },
        403: { description: 'Not a system admin' },
        409: { description: 'The slug or the workspace id exists' },
        413: { description: 'Body larger than WSM_MAX_IMPORT_BYTES' },
        415: { description: 'Not application/n-quads or application/trig' },
      },
      handler: async ({ req, res, query }) => {
        const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
        const format = IMPORT_TYPES[type];
        if (!format) throw unsupportedMediaType(`An import takes application/n-quads or application/trig, not ${type || 'a body without Content-Type'}`);
        const body = await readBody(req, res, options.maxImportBytes);
        if (body.length === 0) throw badRequest('The body is empty: send an export of a workspace');
        const ws = await transfer.importWorkspace(body, format, query.slug);
        return { status: 201, data: ws, headers: { Location: `/api/v1/workspaces/${ws.id}` } };
      },
    }),
    defineRoute({
      method: 'get', path: '/api/v1/workspaces/{workspace}/export', tag, access: 'admin',
      summary: 'Everything of one workspace as N-Quads or TriG (administrators), gzip when accepted',
      params: workspaceParams,
      responses: {
        200: { description: 'The workspace as an RDF dataset', mediaTypes: [...EXPORT_TYPES] },
        403: { description: 'Not an administrator' },
        404: { description: 'Workspace not found' },
        406: { description: 'Neither N-Quads nor TriG is acceptable' },
      },
      handler: async ({ req, res, access }) => {
        const type = req.accepts([...EXPORT_TYPES]);
        if (!type) throw notAcceptable(`Cannot answer in ${JSON.stringify(req.headers.accept ?? '')}; an export is ${EXPORT_TYPES.join(' or ')}`);
        const workspace = access!.workspace;
        const gzip = req.acceptsEncodings(['gzip', 'identity']) === 'gzip';
        res.status(200);
        res.setHeader('Content-Type', `${type}; charset=utf-8`);
        res.setHeader('Content-Disposition', `attachment; filename="${workspace.slug}.${type === 'application/trig' ? 'trig' : 'nq'}${gzip ? '.gz' : ''}"`);
        res.setHeader('Vary', 'Accept, Accept-Encoding');
        if (gzip) res.setHeader('Content-Encoding', 'gzip');
        const out = gzip ? createGzip() : res;
        if (gzip) out.pipe(res);
        try {
          await transfer.exportTo(workspace, type as (typeof EXPORT_TYPES)[number], out);
          out.end();
        } catch (err) {
          // The status line is sent: a failure can only cut the answer short, which the client sees as an incomplete body.
          res.destroy(err as Error);
        }
        return {};
      },
    }),
  ];
}
