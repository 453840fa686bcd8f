import { z } from 'zod';
import { defineRoute, type RouteDef } from '../http/api.js';
import { pageQuery, pageSchema, zeroPageQuery } from '../http/paging.js';
import type { WorkspaceService } from '../workspaces/service.js';
import type { PackageService } from './service.js';
import type { LifecycleCommand } from './commands.js';
import { StatusPresenter } from '../http/status-case.js';
import { streamEvents, wantsEventStream } from './event-stream.js';
import {
  autoUpdateBody, commandParams, commandSchema, eventSchema, installBody, installationSchema, packageParams,
  registryParams, reportSchema, uploadQuery, workspaceParams,
} from './schema.js';

/** Package endpoints P1 to P10 (docs/api.md; docs/packages.md). */
export function packageRoutes(
  workspaces: WorkspaceService, packages: PackageService, options: { maxUploadBytes: number; statuses?: StatusPresenter; subscribe?: (listener: () => void) => () => void },
): RouteDef[] {
  const tag = 'Packages';
  const present = options.statuses ?? new StatusPresenter('lower');
  const accepted = (slug: string, command: LifecycleCommand) => ({
    status: 202,
    data: present.command(command),
    headers: { Location: `/api/v1/packages/${encodeURIComponent(slug)}/commands/${command.id}` },
  });
  return [
    // Literal segments first: "install", "registry" and "commands" are not package names.
    defineRoute({
      method: 'post', path: '/api/v1/packages/{workspace}/registry/{publisher}/{name}/install', tag, access: 'admin',
      summary: 'P1. Install (or reinstall at a version) a package from the registry (administrators)',
      params: registryParams, body: installBody,
      responses: {
        202: { description: 'Install command accepted; Location points at it', data: commandSchema },
        400: { description: 'Engine version incompatible (ENGINE_INCOMPATIBLE) or bad body' }, 403: { description: 'Not an administrator' },
        404: { description: 'Workspace, publisher, package or version not found' }, 409: { description: 'Package has an active operation' },
      },
      handler: async ({ params, body, auth, access }) => {
        const { workspace } = access!;
        return accepted(params.workspace, await packages.installFromRegistry(workspace, params.publisher, params.name, body));
      },
    }),
    defineRoute({
      method: 'post', path: '/api/v1/packages/{workspace}/install', tag,
      summary: 'P2. Install a package by uploading its .tgz (administrators)',
      description: 'The archive is checked at the request (400 before any command exists); Turtle and SHACL problems fail the command. '
        + 'forceUpdate=true moves matrices installed by another package to this one.',
      access: 'admin',
      params: workspaceParams, query: uploadQuery,
      multipart: { file: 'file', required: true, maxBytes: options.maxUploadBytes, description: 'The package archive (.tgz) with manifest.json at its root' },
      responses: {
        202: { description: 'Command accepted; Location points at it', data: commandSchema },
        400: { description: 'Invalid package archive or manifest, or incompatible engine range' }, 403: { description: 'Not an administrator' },
        404: { description: 'Workspace not found' }, 413: { description: 'File too large' },
      },
      handler: async ({ params, query, file, access }) => {
        return accepted(params.workspace, await packages.installUpload(access!.workspace, file!.buffer, query.forceUpdate ?? false));
      },
    }),
    defineRoute({
      method: 'get', path: '/api/v1/packages/{workspace}/commands/{commandId}', tag, access: 'member',
      summary: 'P8. One lifecycle command',
      params: commandParams,
      responses: { 200: { description: 'The command', data: commandSchema }, 404: { description: 'Workspace or command not found' } },
      handler: async ({ params, access }) => ({ data: present.command(await packages.getCommand(access!.workspace, params.commandId)) }),
    }),
    defineRoute({
      method: 'get', path: '/api/v1/packages/{workspace}/commands/{commandId}/validation-report', tag, access: 'member',
      summary: 'P9. Validation report of a command: JSON, or Turtle with Accept: text/turtle',
      params: commandParams,
      responses: {
        200: { description: 'The report', data: reportSchema, mediaTypes: ['text/turtle'] },
        404: { description: 'Workspace or command not found, or the command never reached validation' },
      },
      handler: async ({ params, auth, req, access }) => {
        const { workspace } = access!;
        if (req.accepts(['application/json', 'text/turtle']) === 'text/turtle') {
          return { raw: { contentType: 'text/turtle; charset=utf-8', body: await packages.reportAsTurtle(workspace, params.commandId) } };
        }
        return { data: await packages.report(workspace, params.commandId) };
      },
    }),
    defineRoute({
      method: 'get', path: '/api/v1/packages/{workspace}/commands/{commandId}/events', tag, access: 'member',
      summary: 'P10. Events of a command, oldest first; with Accept: text/event-stream, live as Server-Sent Events',
      description: 'As SSE each event is one message (id: the event id, event: event, data: the event as JSON); Last-Event-ID resumes after '
        + 'that event. Once the command has finished, a last message (event: end, data: {commandId, status}) and the stream ends.',
      params: commandParams,
      responses: {
        200: { description: 'Events', data: z.array(eventSchema), mediaTypes: ['text/event-stream'] },
        404: { description: 'Workspace or command not found' },
      },
      handler: async ({ params, req, res, access }) => {
        const { workspace } = access!;
        if (wantsEventStream(req) && options.subscribe) {
          await streamEvents(req, res, {
            command: async () => packages.getCommand(workspace, params.commandId),
            events: async () => packages.events(workspace, params.commandId),
            subscribe: options.subscribe,
            presentStatus: (status) => present.status(status),
          });
          return {};
        }
        return { data: await packages.events(workspace, params.commandId) };
      },
    }),
    defineRoute({
      method: 'get', path: '/api/v1/packages/{workspace}', tag, access: 'member',
      summary: 'P4. Installed packages, paged (1-indexed page, pageSize 1..100)',
      params: workspaceParams, query: pageQuery,
      responses: { 200: { description: 'One page', data: pageSchema(installationSchema) }, 400: { description: 'Bad page or pageSize' }, 404: { description: 'Workspace not found' } },
      handler: async ({ params, query, access }) => {
        const page = await packages.list(access!.workspace, query);
        return { data: { ...page, items: page.items.map((i) => present.installation(i)) } };
      },
    }),
    defineRoute({
      method: 'get', path: '/api/v1/packages/{workspace}/{packageName}', tag, access: 'member',
      summary: 'P5. One installed package',
      params: packageParams,
      responses: { 200: { description: 'The installation', data: installationSchema }, 404: { description: 'Workspace or package not found' } },
      handler: async ({ params, access }) => ({ data: present.installation(await packages.get(access!.workspace, params.packageName)) }),
    }),
    defineRoute({
      method: 'patch', path: '/api/v1/packages/{workspace}/{packageName}/auto-update', tag, access: 'admin',
      summary: 'P3. Turn auto-update of a registry package on or off (administrators)',
      params: packageParams, body: autoUpdateBody,
      responses: {
        200: { description: 'The installation', data: installationSchema }, 400: { description: 'Package not from the registry, or bad body' },
        403: { description: 'Not an administrator' }, 404: { description: 'Workspace or package not found' },
      },
      handler: async ({ params, body, auth, access }) => {
        const { workspace } = access!;
        return { data: present.installation(await packages.setAutoUpdate(workspace, params.packageName, body.autoUpdate)) };
      },
    }),
    defineRoute({
      method: 'delete', path: '/api/v1/packages/{workspace}/{packageName}', tag, access: 'admin',
      summary: 'P6. Uninstall a package (administrators)',
      params: packageParams,
      responses: {
        202: { description: 'Uninstall command accepted; Location points at it', data: commandSchema }, 403: { description: 'Not an administrator' },
        404: { description: 'Workspace or package not found' }, 409: { description: 'Package has an active operation' },
      },
      handler: async ({ params, auth, access }) => {
        const { workspace } = access!;
        return accepted(params.workspace, await packages.uninstall(workspace, params.packageName));
      },
    }),
    defineRoute({
      method: 'get', path: '/api/v1/packages/{workspace}/{packageName}/commands', tag, access: 'member',
      summary: 'P7. Commands of a package, newest first (0-indexed page, size 1..100)',
      params: packageParams, query: zeroPageQuery,
      responses: { 200: { description: 'Commands', data: z.array(commandSchema) }, 400: { description: 'Bad page or size' }, 404: { description: 'Workspace or package not found' } },
      handler: async ({ params, query, auth, access }) => ({
        data: present.commands(await packages.listCommands(access!.workspace, params.packageName, query.page, query.size)),
      }),
    }),
  ];
}
