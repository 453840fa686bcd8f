import { z } from 'zod';
import { defineRoute, type MultipartSpec, type RouteDef } from '../http/api.js';
import { badRequest } from '../errors.js';
import type { WorkspaceService } from '../workspaces/service.js';
import type { ExtensionService } from './service.js';
import { extensionParams, extensionQuery, extensionSchema, workspaceParams } from './schema.js';

/**
 * A field given as query parameter or as multipart form field (the
 * ecosystem's client sends them in the form: docs/extensions.md). Both at once
 * must agree.
 */
function field(name: string, query: string | undefined, form: unknown): string | undefined {
  const fromForm = (form as Record<string, unknown> | undefined)?.[name];
  if (fromForm !== undefined && typeof fromForm !== 'string') throw badRequest(`Give the form field ${name} once`);
  if (query !== undefined && fromForm !== undefined && query !== fromForm) {
    throw badRequest(`${name} was given both as query parameter and form field, with different values`);
  }
  return query ?? fromForm;
}

/** Matrix extension endpoints X1-X5: administrators only (403 for members, 404 for non-members). */
export function extensionRoutes(workspaces: WorkspaceService, extensions: ExtensionService): RouteDef[] {
  const tag = 'Extensions';
  const multipart = (description: string): MultipartSpec => ({
    file: 'file', required: false, maxBytes: extensions.maxContentBytes, fields: ['targetMatrix', 'label'], description,
  });
  const common = {
    401: { description: 'No or bad token' },
    403: { description: 'Not an administrator of the workspace' },
  };
  return [
    defineRoute({
      method: 'get', path: '/api/v1/extensions/{workspace}', tag, access: 'admin',
      summary: "List the workspace's extensions (X4)",
      params: workspaceParams,
      responses: { 200: { description: 'Extensions, oldest first (content is null here; X1 gives it)', data: z.array(extensionSchema) }, ...common, 404: { description: 'Workspace not found' } },
      handler: async ({ params, auth, access }) => {
        const { workspace } = access!;
        return { data: await extensions.list(workspace) };
      },
    }),
    defineRoute({
      method: 'post', path: '/api/v1/extensions/{workspace}', tag,
      summary: 'Create an extension of an installed matrix (X5); queues its partial re-deployment',
      description: 'targetMatrix (required) and label (optional) come as query parameters or multipart form fields; ' +
        'the file part is the Turtle. Answers at once with active: false; the REDEPLOY command (lastCommandId) makes it active.',
      params: workspaceParams,
      query: extensionQuery,
      access: 'admin',
      multipart: multipart('Turtle of the extension (required)'),
      responses: {
        200: { description: 'The extension, inactive until its REDEPLOY completes', data: extensionSchema },
        400: { description: 'Missing targetMatrix or file, bad label, Turtle syntax error (line and column), RDF/XML' },
        ...common,
        404: { description: 'Workspace or target matrix not found' },
        413: { description: 'File too large' },
        415: { description: 'Not multipart, or a file declared as another RDF syntax' },
      },
      handler: async ({ query, body, file, auth, access }) => {
        const created = await extensions.create(access!.workspace, {
          username: auth.username,
          targetMatrix: field('targetMatrix', query.targetMatrix, body),
          label: field('label', query.label, body),
          file,
        });
        return { data: created };
      },
    }),
    defineRoute({
      method: 'get', path: '/api/v1/extensions/{workspace}/{id}', tag, access: 'admin',
      summary: 'One extension with its Turtle content (X1)',
      params: extensionParams,
      responses: { 200: { description: 'The extension', data: extensionSchema }, ...common, 404: { description: 'Workspace or extension not found' } },
      handler: async ({ params, auth, access }) => {
        const { workspace } = access!;
        return { data: await extensions.get(workspace, params.id) };
      },
    }),
    defineRoute({
      method: 'put', path: '/api/v1/extensions/{workspace}/{id}', tag,
      summary: 'Replace the label and/or the Turtle of an extension (X2); re-deploys its target',
      description: 'label as query parameter or form field, an optional Turtle file part. The extension becomes inactive until its REDEPLOY completes.',
      params: extensionParams,
      query: extensionQuery,
      access: 'admin',
      multipart: multipart('New Turtle of the extension (optional)'),
      responses: {
        200: { description: 'The extension, inactive until its REDEPLOY completes', data: extensionSchema },
        400: { description: 'Bad label, Turtle syntax error (line and column), RDF/XML' },
        ...common,
        404: { description: 'Workspace or extension not found' },
        413: { description: 'File too large' },
        415: { description: 'Not multipart, or a file declared as another RDF syntax' },
      },
      handler: async ({ params, query, body, file, access }) => {
        return {
          data: await extensions.update(access!.workspace, params.id, {
            targetMatrix: field('targetMatrix', query.targetMatrix, body),
            label: field('label', query.label, body),
            file,
          }),
        };
      },
    }),
    defineRoute({
      method: 'delete', path: '/api/v1/extensions/{workspace}/{id}', tag, access: 'admin',
      summary: 'Delete an extension (X3); re-deploys its target without it',
      params: extensionParams,
      responses: { 200: { description: 'Deleted', data: z.string() }, ...common, 404: { description: 'Workspace or extension not found' } },
      handler: async ({ params, auth, access }) => {
        const { workspace } = access!;
        const { extension, commandId } = await extensions.remove(workspace, params.id);
        return {
          data: commandId
            ? `Extension "${extension.label}" deleted; command ${commandId} re-deploys matrix <${extension.targetMatrixUri}>`
            : `Extension "${extension.label}" deleted`,
        };
      },
    }),
  ];
}
