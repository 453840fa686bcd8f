import { z } from 'zod';
import { defineRoute, refusal, type RouteDef } from '../http/api.js';
import { pageQuery, pageSchema, zeroPageQuery } from '../http/paging.js';
import type { WorkspaceService } from '../workspaces/service.js';
import type { PackageService } from './service.js';
import type { LifecycleCommand } from './commands.js';
import { StatusPresenter } from '../http/status-case.js';
import { badRequest } from '../errors.js';
import type { WorkspaceAccess } from '../workspaces/service.js';
import type { RequestBindings } from './lifecycle.js';
import type { SealedFromClient } from '../secrets/service.js';
import { uploadBindings } from '../secrets/schema.js';
import { streamEvents, wantsEventStream } from './event-stream.js';
import { CommandFeeds, StreamSlots } from './event-feeds.js';
import { tooManyRequests } from '../errors.js';

/** Retry-After of a stream refused at the per-user limit: streams end when their commands finish. */
const STREAM_RETRY_SECONDS = 5;
import {
  autoUpdateBody, commandParams, commandSchema, eventSchema, installBody, installationSchema, packageParams,
  registryParams, reportSchema, uploadQuery, workspaceParams,
} from './schema.js';

/** The bindings of an install request, as the lifecycle takes them. */
function requestBindings(access: WorkspaceAccess, username: string, body: { variableBindings?: Array<{ uri: string; value: string }> | undefined; secretBindings?: Array<SealedFromClient & { uri: string }> | undefined }): RequestBindings {
  return { access, username, variables: body.variableBindings ?? [], secrets: body.secretBindings ?? [] };
}

/** The multipart `bindings` field of an upload: JSON `{variableBindings, secretBindings}`; a 400 saying what is wrong otherwise. */
function parseBindingsField(field: unknown): z.output<typeof uploadBindings> {
  if (field === undefined || field === '') return {};
  if (typeof field !== 'string') throw badRequest('The multipart field "bindings" must be given once, as JSON text');
  let json: unknown;
  try {
    json = JSON.parse(field);
  } catch {
    throw badRequest('The multipart field "bindings" is not JSON; send {"variableBindings": [...], "secretBindings": [...]}');
  }
  const parsed = uploadBindings.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw badRequest(`Invalid bindings ${issue.path.join('.')}: ${issue.message}`.replace('bindings :', 'bindings:'));
  }
  return parsed.data;
}

/** Package endpoints P1 to P10 (docs/api.md; docs/packages.md). */
export function packageRoutes(
  workspaces: WorkspaceService, packages: PackageService, options: {
    maxUploadBytes: number; statuses?: StatusPresenter;
    /** P10 as Server-Sent Events: the store's write announcements, and the streams one user may hold at once. */
    streams?: { onWrite: (listener: (graphs: ReadonlySet<string>) => void) => () => void; maxPerUser: number };
  },
): RouteDef[] {
  const tag = 'Packages';
  const present = options.statuses ?? new StatusPresenter('lower');
  const feeds = options.streams && new CommandFeeds(options.streams.onWrite);
  const slots = options.streams && new StreamSlots(options.streams.maxPerUser);
  const streamsFull = () => tooManyRequests(`You already have ${slots!.max} event streams open, as many as one user may; close one or try again later`, STREAM_RETRY_SECONDS);
  // A user at the cap is refused right after authentication, before the membership check and the handler, with
  // one answer built here: thousands of streams opened at once are each answered for a few microseconds of work.
  const streamsFullAnswer = slots && refusal(streamsFull());
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
        const bindings = requestBindings(access!, auth.username, body);
        return accepted(params.workspace, await packages.installFromRegistry(workspace, params.publisher, params.name, body, undefined, { bindings }));
      },
    }),
    defineRoute({
      method: 'post', path: '/api/v1/packages/{workspace}/install', tag,
      summary: 'P2. Install a package by uploading its .tgz (administrators)',
      description: 'The archive is checked at the request (400 before any command exists); Turtle and SHACL problems fail the command. '
        + 'forceUpdate=true moves matrices installed by another package to this one.',
      access: 'admin',
      params: workspaceParams, query: uploadQuery,
      multipart: {
        file: 'file', required: true, maxBytes: options.maxUploadBytes, fields: ['bindings'],
        description: 'The package archive (.tgz) with manifest.json at its root; optional field bindings: JSON {variableBindings, secretBindings}',
      },
      responses: {
        202: { description: 'Command accepted; Location points at it', data: commandSchema },
        400: { description: 'Invalid package archive or manifest, or incompatible engine range' }, 403: { description: 'Not an administrator' },
        404: { description: 'Workspace not found' }, 413: { description: 'File too large' },
      },
      handler: async ({ params, query, file, body, auth, access }) => {
        const bindings = requestBindings(access!, auth.username, parseBindingsField((body as Record<string, unknown> | undefined)?.bindings));
        return accepted(params.workspace, await packages.installUpload(access!.workspace, file!.buffer, query.forceUpdate ?? false, bindings));
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
      admit: (req, auth) => (slots && slots.full(auth.username) && wantsEventStream(req) ? streamsFullAnswer! : null),
      responses: {
        200: { description: 'Events', data: z.array(eventSchema), mediaTypes: ['text/event-stream'] },
        404: { description: 'Workspace or command not found' },
        429: { description: 'As a stream: the caller already holds as many event streams as one user may (WSM_MAX_EVENT_STREAMS); Retry-After says when to try again' },
      },
      handler: async ({ params, req, res, auth, access }) => {
        const { workspace } = access!;
        if (wantsEventStream(req) && feeds && slots) {
          const release = slots.take(auth.username);
          if (!release) {
            // The slots filled while this request was checked (admit let it through): the same answer.
            res.setHeader('Connection', 'close');
            throw streamsFull();
          }
          try {
            // Read once before answering, so a missing command is still a plain 404.
            const { id } = await packages.getCommand(workspace, params.commandId);
            const feed = feeds.feed(`${workspace.id} ${id}`, { read: () => packages.progress(workspace, id), graphs: packages.commandGraphs(workspace.id, id) });
            await streamEvents(req, res, feed, (status) => present.status(status));
          } finally {
            release();
          }
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
