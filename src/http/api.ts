import express, { type Request, type RequestHandler, type Response, type NextFunction, type Router } from 'express';
import type { IncomingMessage } from 'node:http';
import etag from 'etag';
import FindMyWay from 'find-my-way';
import multer from 'multer';
import { z } from 'zod';
import { AppError, badRequest, unsupportedMediaType } from '../errors.js';
import { errorBody, STATUS_OF } from './errors.js';
import type { AuthContext } from '../auth/context.js';
import type { WorkspaceAccess } from '../workspaces/service.js';

/**
 * The access a route needs, checked by middleware after authentication and
 * before any body is read (issue 12, acceptance 9): `member` and `admin`
 * resolve the `{workspace}` path parameter (404 for a non-member, 403 for a
 * member who is not an administrator), `system-admin` needs the system
 * administrator role (403). The handler receives the resolved access.
 */
export type Access = 'member' | 'admin' | 'system-admin';

/**
 * Routes are declared as data: method, path, zod schemas of every input and
 * output, and a handler. `ApiRegistry` mounts them on Express with
 * validation middleware (a bad input is a 400 before the handler runs) and
 * generates the OpenAPI 3.1 document from the same schemas.
 */
export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

export interface ResponseSpec {
  description: string;
  /** Schema of `data` inside the success envelope. */
  data?: z.ZodType;
  /** Other media types this response can take (content negotiation). */
  mediaTypes?: string[];
}

export interface MultipartSpec {
  /** Name of the file field. */
  file: string;
  required: boolean;
  maxBytes: number;
  /** Text fields accepted beside the file. */
  fields?: string[];
  description?: string;
}

export interface HandlerContext<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  file: Express.Multer.File | undefined;
  /** Set on every route but /health. */
  auth: AuthContext;
  /** The caller's access to `{workspace}`, resolved before the body was read (routes declaring `member` or `admin`). */
  access: WorkspaceAccess | undefined;
  req: Request;
  res: Response;
}

export interface Reply {
  status?: number;
  /** Wrapped in the success envelope. Never a promise (await it: the type refuses a thenable). */
  data?: string | number | boolean | null | (object & { then?: never });
  headers?: Record<string, string>;
  /** A non-JSON body (content negotiation); sent as is. */
  raw?: { contentType: string; body: string | Buffer };
}

export interface RouteDef<P extends z.ZodType = z.ZodType, Q extends z.ZodType = z.ZodType, B extends z.ZodType = z.ZodType> {
  method: Method;
  /** OpenAPI-style path: `/api/v1/packages/{workspace}`. */
  path: string;
  summary: string;
  description?: string;
  tag: string;
  /** The OpenAPI operationId; by default made of the method and the path (`postPackagesWorkspaceInstall`). */
  operationId?: string;
  /** The access the route needs, checked before the body is read. */
  access?: Access;
  params?: P;
  query?: Q;
  /** JSON request body. */
  body?: B;
  /** Accepts a body of these non-JSON media types instead (read as text into `body`). */
  textBody?: { mediaTypes: string[]; maxBytes: number };
  /**
   * A body of these media types that the handler reads from the request
   * itself (nothing here reads it): MCP's SDK reads its own, and answers
   * its own errors (a malformed body is JSON-RPC's parse error, not the
   * error envelope).
   */
  streamBody?: { mediaTypes: string[] };
  multipart?: MultipartSpec;
  /** `none`: anonymous, no token read (the registry's reads); `auth` is then undefined. Default: a token is required. */
  auth?: 'none';
  /**
   * Checked right after authentication, before the access check, any body
   * and the handler: a refusal that depends on the caller alone (a per-user
   * limit), answered at once with `Connection: close`. It must cost next to
   * nothing, as it answers floods: build the `Refusal` once (`refusal`).
   * Null lets the request go on.
   */
  admit?: (req: Request, auth: AuthContext) => Refusal | null;
  responses: Record<number, ResponseSpec>;
  handler: (ctx: HandlerContext<z.output<P>, z.output<Q>, z.output<B>>) => Promise<Reply>;
}

/** Helps TypeScript infer the handler's input types from the schemas. */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- zod's type of an object schema without keys
export function defineRoute<P extends z.ZodType = z.ZodObject<{}>, Q extends z.ZodType = z.ZodObject<{}>, B extends z.ZodType = z.ZodUnknown>(
  def: RouteDef<P, Q, B>,
): RouteDef {
  return def as unknown as RouteDef;
}

function describeIssue(where: string, error: z.ZodError): string {
  const issue = error.issues[0]!;
  const field = issue.path.length ? issue.path.join('.') : '';
  const name = field ? `${where} ${field}` : where;
  return `Invalid ${name}: ${issue.message}`;
}

function parseInput<T extends z.ZodType>(schema: T | undefined, value: unknown, where: string): unknown {
  if (!schema) return value;
  const result = schema.safeParse(value);
  if (!result.success) throw badRequest(describeIssue(where, result.error));
  return result.data;
}

/** `post /api/v1/packages/{workspace}/install` -> `postPackagesWorkspaceInstall`: unique as method and path are. */
export function operationIdOf(method: Method, path: string): string {
  const words = path.replace(/^\/api\/v1\//, '').split(/[^A-Za-z0-9]+/).filter(Boolean);
  return method + words.map((w) => w[0]!.toUpperCase() + w.slice(1)).join('');
}

const expressPath = (path: string) => path.replace(/\{([A-Za-z0-9_]+)\}/g, ':$1');

/**
 * Two routes of one method where a path could match both, and Express (first
 * declared wins) would pick a different one than a radix tree (read left to
 * right, a static segment beats a parameter): no two static segments
 * disagree, and at the first place where one route has a parameter and the
 * other a static segment, the earlier route has the parameter. Null when
 * there is none.
 */
export function firstMatchDiffers(routes: readonly RouteDef[]): [RouteDef, RouteDef] | null {
  const segments = (path: string) => path.split('/').map((s) => (s.startsWith('{') ? null : s.toLowerCase()));
  for (const [i, earlier] of routes.entries()) {
    const a = segments(earlier.path);
    for (const later of routes.slice(i + 1)) {
      if (later.method !== earlier.method) continue;
      const b = segments(later.path);
      if (a.length !== b.length) continue;
      if (a.some((s, k) => s !== null && b[k] !== null && s !== b[k])) continue;
      const first = a.findIndex((s, k) => (s === null) !== (b[k] === null));
      if (first !== -1 && a[first] === null) return [earlier, later];
    }
  }
  return null;
}

/**
 * Answers `value` as JSON the way Express's `res.json` does with the app's
 * settings (no replacer or spaces, a weak ETag of the body, 304 when the
 * request's validators match it, no body for HEAD, 204 or 304), without its
 * steps that cost a cached read a few percent of its time: the body is not
 * copied into a Buffer to be hashed, and it goes to the socket in one write
 * with the headers.
 */
export function sendJson(req: Request, res: Response, value: unknown): void {
  const body = JSON.stringify(value);
  if (!res.hasHeader('Content-Type')) res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  if (!res.hasHeader('ETag')) res.setHeader('ETag', etag(body, { weak: true }));
  // `req.fresh` (GET or HEAD, a 2xx or 304, validators that match) is only asked when the request sends validators.
  if ((req.headers['if-none-match'] !== undefined || req.headers['if-modified-since'] !== undefined) && req.fresh) res.statusCode = 304;
  const status = res.statusCode;
  if (status === 204 || status === 304) {
    res.removeHeader('Content-Type');
    res.removeHeader('Content-Length');
    res.end();
  } else if (req.method === 'HEAD') {
    res.end();
  } else {
    res.end(body);
  }
}

/** An error answer serialized once, sent as is by a route's `admit`. */
export interface Refusal {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | number>>;
  readonly body: Buffer;
}

/**
 * `err` as the error handler answers it (its status, the error envelope,
 * Retry-After), built once, plus `Connection: close`: the client cannot send
 * its next request on the connection it was refused on, and the service
 * holds no idle connection for it.
 */
export function refusal(err: AppError): Refusal {
  const body = Buffer.from(JSON.stringify(errorBody(err)));
  return {
    status: STATUS_OF[err.code],
    headers: {
      'Content-Type': 'application/json; charset=utf-8', 'Content-Length': body.length, Connection: 'close',
      ...(err.retryAfterSeconds === undefined ? {} : { 'Retry-After': String(err.retryAfterSeconds) }),
    },
    body,
  };
}

/** What every route that needs credentials answers without valid ones. */
const UNAUTHORIZED: ResponseSpec = { description: 'No valid bearer token or API key' };

function hasBody(req: Request): boolean {
  const length = req.headers['content-length'];
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
}

/** A request's route, found in the radix tree. */
export interface FoundRoute {
  chain: RequestHandler[];
  /** The route's Express pattern (`/api/v1/packages/:workspace`). */
  pattern: string;
  params: Record<string, string>;
}

/** What `ApiRegistry.mount` answers: the lookup of a request's route and the run of it. */
export interface Dispatcher {
  /** The route of a request, or null when it is for the Express router (no route, any `%`, an empty segment). */
  find(req: IncomingMessage): FoundRoute | null;
  /** Runs a found route's middleware and handler; `next(err)` on a failure, `next()` if none answered. */
  run(found: FoundRoute, req: Request, res: Response, next: NextFunction): void;
  /** The methods of the routes of a request's path (HEAD with GET), for a 405's `Allow`; none when no route has the path. */
  allowed(req: IncomingMessage): string[];
}

export class ApiRegistry {
  readonly routes: RouteDef[] = [];

  add(...routes: RouteDef[]): void {
    this.routes.push(...routes);
  }

  /**
   * Mounts every route on a router, in declaration order, and returns a
   * dispatcher that finds the route of a request in a radix tree
   * (find-my-way) instead of trying the router's layers one by one, and runs
   * the same middleware chain (the app puts it in front of Express:
   * `createApp`). Paths it
   * would not read exactly as Express does (any `%`, an empty segment) and
   * paths of no route go on to the Express router, which answers them as
   * before. `mount` refuses a declaration order where Express (the first
   * declared match) and the tree (the most specific one) could pick
   * different routes: see `firstMatchDiffers`.
   */
  mount(router: Router, options: {
    jsonLimit: number;
    authenticate: (req: Request) => Promise<AuthContext>;
    /** Checks a route's declared access; throws the 403/404. */
    authorize: (auth: AuthContext, access: Access, workspaceSegment: string | undefined) => Promise<WorkspaceAccess | undefined>;
  }): Dispatcher {
    const clash = firstMatchDiffers(this.routes);
    if (clash) throw new Error(`route ${clash[1].method.toUpperCase()} ${clash[1].path} is shadowed by ${clash[0].path}, declared before it: declare the more specific route first`);
    // As Express matches by default: case-insensitive, a trailing slash allowed; no length limit on a parameter.
    const tree = FindMyWay({ caseSensitive: false, ignoreTrailingSlash: true, maxParamLength: 64 * 1024 });
    const json = express.json({ limit: options.jsonLimit, type: ['application/json', 'application/*+json'] });
    for (const route of this.routes) {
      const middlewares: Array<(req: Request, res: Response, next: NextFunction) => void> = [];
      if (route.auth !== 'none') middlewares.push((req, _res, next) => {
        options.authenticate(req).then((auth) => {
          (req as Request & { auth?: AuthContext }).auth = auth;
          next();
        }, next);
      });
      if (route.admit && route.auth !== 'none') {
        const admit = route.admit;
        middlewares.push((req, res, next) => {
          const refused = admit(req, (req as Request & { auth: AuthContext }).auth);
          if (!refused) return next();
          res.writeHead(refused.status, refused.headers);
          res.end(refused.body);
        });
      }
      if (route.access) {
        const needed = route.access;
        middlewares.push((req, _res, next) => {
          const auth = (req as Request & { auth: AuthContext }).auth;
          options.authorize(auth, needed, (req.params as Record<string, string | undefined>).workspace).then((access) => {
            (req as Request & { access?: WorkspaceAccess }).access = access;
            next();
          }, next);
        });
      }
      if (route.body) {
        middlewares.push((req, res, next) => {
          if (hasBody(req) && !req.is(['application/json', 'application/*+json'])) {
            next(unsupportedMediaType(`This endpoint takes application/json, not ${req.headers['content-type'] ?? 'a body without Content-Type'}`));
            return;
          }
          json(req, res, next);
        });
      }
      if (route.textBody) {
        const text = express.text({ type: () => true, limit: route.textBody.maxBytes });
        middlewares.push((req, res, next) => (hasBody(req) ? text(req, res, next) : next()));
      }
      if (route.multipart) {
        const spec = route.multipart;
        const upload = multer({
          storage: multer.memoryStorage(),
          limits: { fileSize: spec.maxBytes, files: 1, fields: 10, fieldSize: 64 * 1024, parts: 12, fieldNameSize: 100, headerPairs: 100 },
        }).single(spec.file);
        middlewares.push((req, res, next) => {
          if (!req.is('multipart/form-data')) {
            if (!spec.required && !hasBody(req)) return next();
            return next(unsupportedMediaType(`This endpoint takes multipart/form-data with a "${spec.file}" file part`));
          }
          upload(req, res, (err?: unknown) => {
            if (err && (err as { code?: string }).code === 'LIMIT_UNEXPECTED_FILE') {
              return next(badRequest(`Unexpected file field "${(err as { field?: string }).field}"; send the file as "${spec.file}"`));
            }
            next(err);
          });
        });
      }
      const handler = async (req: Request, res: Response): Promise<void> => {
        const params = parseInput(route.params, req.params, 'path parameter');
        // Express parses the query string on each read of `req.query`; a URL without one has an empty query.
        const query = parseInput(route.query, req.url.includes('?') ? { ...(req.query as object) } : {}, 'query parameter');
        let body: unknown = route.textBody ? (typeof req.body === 'string' ? req.body : undefined) : req.body;
        if (route.body) body = parseInput(route.body, body === undefined ? {} : body, 'request body');
        if (route.multipart?.required && !req.file) throw badRequest(`A multipart "${route.multipart.file}" file part is required`);
        const reply = await route.handler({
          params, query, body, file: req.file, auth: (req as Request & { auth: AuthContext }).auth,
          access: (req as Request & { access?: WorkspaceAccess }).access, req, res,
        } as HandlerContext<unknown, unknown, unknown>);
        if (res.headersSent) return;
        if (reply.headers) for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value);
        res.status(reply.status ?? 200);
        if (reply.raw) {
          res.type(reply.raw.contentType).send(reply.raw.body);
        } else {
          sendJson(req, res, { success: true, data: reply.data ?? null });
        }
      };
      const chain = [...middlewares, (req: Request, res: Response, next: NextFunction) => {
        handler(req, res).catch(next);
      }];
      const pattern = expressPath(route.path);
      router[route.method](pattern, ...chain);
      tree.on(route.method.toUpperCase() as 'GET', pattern, () => {}, { chain, pattern });
    }
    const pathOf = (req: IncomingMessage): string => {
      const url = req.url ?? '/';
      const end = url.indexOf('?');
      return end === -1 ? url : url.slice(0, end);
    };
    const methods = [...new Set(this.routes.map((r) => r.method.toUpperCase()))].sort();
    const allowed = (req: IncomingMessage): string[] => {
      const path = pathOf(req);
      if (path.includes('%')) return [];
      const found = methods.filter((m) => {
        const hit = tree.find(m as 'GET', path);
        return hit !== null && Object.values(hit.params as Record<string, string>).every((v) => v !== '');
      });
      return found.includes('GET') ? [...found, 'HEAD'].sort() : found;
    };
    const find = (req: IncomingMessage): FoundRoute | null => {
      const path = pathOf(req);
      if (path.includes('%')) return null;
      const found = tree.find((req.method === 'HEAD' ? 'GET' : req.method) as 'GET', path);
      if (!found) return null;
      const params = found.params as Record<string, string>;
      for (const name in params) if (!params[name]) return null;
      const { chain, pattern } = found.store as { chain: RequestHandler[]; pattern: string };
      return { chain, pattern, params };
    };
    const run = (found: FoundRoute, req: Request, res: Response, next: NextFunction): void => {
      req.params = found.params;
      // What Express sets on a matched route; the request metrics label by it.
      (req as Request & { route: { path: string } }).route = { path: found.pattern };
      let at = 0;
      const step = (err?: unknown): void => {
        if (err) return next(err);
        const handle = found.chain[at++];
        if (!handle) return next();
        try {
          void handle(req, res, step);
        } catch (thrown) {
          next(thrown);
        }
      };
      step();
    };
    return { find, run, allowed };
  }

  /** The OpenAPI 3.1 document of every mounted route. */
  openapi(info: { title: string; version: string; license?: { name: string; identifier: string } }): Record<string, unknown> {
    const paths: Record<string, Record<string, unknown>> = {};
    const components: Record<string, unknown> = {};
    // zod puts named schemas (`.meta({ id })`) in a local `$defs`, referenced as `#/$defs/X`; in an OpenAPI
    // document those must live in components/schemas, so they are hoisted and every reference rewritten.
    const hoist = (node: unknown): unknown => {
      if (Array.isArray(node)) return node.map(hoist);
      if (node === null || typeof node !== 'object') return node;
      const out: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(node as Record<string, unknown>)) {
        if (key === '$schema') continue;
        if (key === '$defs' && value && typeof value === 'object') {
          for (const [name, def] of Object.entries(value as Record<string, unknown>)) components[name] ??= hoist(def);
          continue;
        }
        out[key] = key === '$ref' && typeof value === 'string' && value.startsWith('#/$defs/')
          ? `#/components/schemas/${value.slice('#/$defs/'.length)}`
          : hoist(value);
      }
      return out;
    };
    const toSchema = (schema: z.ZodType, io: 'input' | 'output') =>
      hoist(z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' }));
    const errorSchema = {
      type: 'object',
      properties: {
        success: { const: false },
        // `details` holds fields that vary by error: any JSON object (not an object without fields, which is how a generated client reads `{type: object}`).
        error: { type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' }, details: { type: 'object', additionalProperties: true } }, required: ['code', 'message'] },
      },
      required: ['success', 'error'],
    };
    for (const route of this.routes) {
      const parameters: unknown[] = [];
      const addParams = (schema: z.ZodType | undefined, where: 'path' | 'query') => {
        if (!schema) return;
        const json = toSchema(schema, 'input') as { properties?: Record<string, unknown>; required?: string[] };
        for (const [name, prop] of Object.entries(json.properties ?? {})) {
          parameters.push({ name, in: where, required: where === 'path' || (json.required ?? []).includes(name), schema: prop });
        }
      };
      addParams(route.params, 'path');
      addParams(route.query, 'query');
      const anonymous = route.tag === 'Health' || route.auth === 'none';
      const operation: Record<string, unknown> = {
        operationId: route.operationId ?? operationIdOf(route.method, route.path),
        summary: route.summary,
        ...(route.description ? { description: route.description } : {}),
        tags: [route.tag],
        parameters,
        // Either credential: a bearer token or an API key (a bearer token wins when both are sent).
        security: anonymous ? [] : [{ bearerAuth: [] }, { apiKeyAuth: [] }],
        responses: Object.fromEntries(
          Object.entries(anonymous || route.responses[401] ? route.responses : { ...route.responses, 401: UNAUTHORIZED }).map(([status, spec]) => {
            const code = Number(status);
            const content: Record<string, unknown> = {};
            // A success answered only in other media types (an export, an archive, SPARQL results) has no JSON envelope.
            const onlyOtherTypes = !spec.data && (spec.mediaTypes?.length ?? 0) > 0;
            if (code >= 300) {
              content['application/json'] = { schema: errorSchema };
            } else if (!onlyOtherTypes) {
              content['application/json'] = {
                schema: { type: 'object', properties: { success: { const: true }, data: spec.data ? toSchema(spec.data, 'output') : {} }, required: ['success', 'data'] },
              };
            }
            // Parsed as JSON by clients (a JSON-LD document is an object); the other types are text.
            for (const media of spec.mediaTypes ?? []) content[media] = { schema: media.endsWith('+json') ? { type: 'object', additionalProperties: true } : { type: 'string' } };
            return [status, { description: spec.description, content }];
          }),
        ),
      };
      if (route.body) {
        // Required when an empty object does not do (a field must be given), so a typed client cannot leave it out.
        operation.requestBody = { required: !route.body.safeParse({}).success, content: { 'application/json': { schema: toSchema(route.body, 'input') } } };
      } else if (route.multipart) {
        const properties: Record<string, unknown> = { [route.multipart.file]: { type: 'string', format: 'binary', description: route.multipart.description } };
        for (const field of route.multipart.fields ?? []) properties[field] = { type: 'string' };
        operation.requestBody = {
          required: route.multipart.required,
          content: { 'multipart/form-data': { schema: { type: 'object', properties, required: route.multipart.required ? [route.multipart.file] : [] } } },
        };
      } else if (route.textBody) {
        operation.requestBody = { required: false, content: Object.fromEntries(route.textBody.mediaTypes.map((m) => [m, { schema: { type: 'string' } }])) };
      } else if (route.streamBody) {
        operation.requestBody = { required: true, content: Object.fromEntries(route.streamBody.mediaTypes.map((m) => [m, { schema: {} }])) };
      }
      paths[route.path] ??= {};
      paths[route.path]![route.method] = operation;
    }
    return {
      openapi: '3.1.0',
      info,
      servers: [{ url: '/' }],
      components: {
        schemas: components,
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
          apiKeyAuth: { type: 'apiKey', in: 'header', name: 'X-Api-Key', description: 'An API key (POST /api/v1/users/me/keys), instead of a bearer token' },
        },
      },
      paths,
    };
  }
}

/** Wraps a value in AppError if it is not one (for code paths that catch). */
export const asAppError = (err: unknown): AppError | undefined => (err instanceof AppError ? err : undefined);
