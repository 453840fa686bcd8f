import { z } from 'zod';
import { declarationsSchema } from '../secrets/schema.js';
import { defineRoute, type RouteDef } from '../http/api.js';
import type { HostedRegistry } from './hosted.js';

/**
 * The registry API the service hosts (docs/packages.md, "The hosted registry"). Reads of
 * packages, versions, declarations, archives and resolve are anonymous; the
 * rest needs a token. Paged lists are 0-indexed (`page`, `size` at most 100)
 * and wrapped: `{items, page, size, totalItems, totalPages}`.
 */
const tag = 'Registry';
const slugParam = z.string().min(1).max(200);
const packageParams = z.object({ publisher: slugParam, name: slugParam });
const publishParams = z.object({ slug: slugParam, name: slugParam });
const versionParams = z.object({ publisher: slugParam, name: slugParam, version: z.string().min(1).max(300) });
const ownedVersionParams = z.object({ slug: slugParam, name: slugParam, version: z.string().min(1).max(300) });

const int32 = (name: string) => z.coerce.number({ error: `${name} must be an integer` }).int(`${name} must be an integer`);
const zeroPage = {
  page: int32('page').min(0, 'page is 0-indexed and must be at least 0').max(2147483647).default(0),
  size: int32('size').min(1, 'size must be between 1 and 100').max(100, 'size must be between 1 and 100').default(20),
};
const rangeQuery = z.string().min(1).max(100).optional().describe('An engine range such as ">=1.0 <2.0"; keeps the versions whose range overlaps it');

const publisherSchema = z.object({ id: z.uuid(), slug: z.string(), name: z.string(), createdAt: z.iso.datetime() }).meta({ id: 'Publisher' });
const dependencySchema = z.object({ publisher: z.string(), name: z.string(), versionRange: z.string() });
const versionSchema = z.object({
  id: z.uuid(), publisher: z.object({ slug: z.string() }), name: z.string(), version: z.string(), engineVersion: z.string(),
  description: z.string().nullable(), publishedAt: z.iso.datetime(), publishedBy: z.string().nullable(), yanked: z.boolean(),
  yankReason: z.string().nullable(), dependencies: z.array(dependencySchema), matrices: z.array(z.object({ name: z.string(), uri: z.string() })),
  checksum: z.string().describe('sha256:<hex> of the archive'), size: z.number().int(),
}).meta({ id: 'RegistryPackageVersion' });
const packageSchema = z.object({
  publisher: z.object({ slug: z.string() }), name: z.string(), description: z.string().nullable(), versions: z.array(versionSchema),
}).meta({ id: 'RegistryPackage' });
const pageOf = <T extends z.ZodType>(item: T) => z.object({ items: z.array(item), page: z.number().int(), size: z.number().int(), totalItems: z.number().int(), totalPages: z.number().int() });

const publisherBody = z.strictObject({
  slug: z.string({ error: 'slug is required' }).min(1).max(64),
  name: z.string().min(1).max(200).optional(),
  owners: z.array(z.string().min(1).max(200), { error: 'owners must be an array of usernames' }).max(100).optional(),
});
const yankBody = z.strictObject({
  reason: z.string({ error: 'reason is required: say why the version is yanked' }).min(1, 'reason is empty').max(2000),
  force: z.boolean({ error: 'force must be true or false' }).optional(),
});
const dryRunQuery = z.strictObject({ dryRun: z.enum(['true', 'false'], { error: 'dryRun must be true or false' }).transform((v) => v === 'true').optional() });

export function registryRoutes(registry: HostedRegistry, options: { maxUploadBytes: number }): RouteDef[] {
  return [
    defineRoute({
      method: 'post', path: '/api/v1/registry/publishers', tag, access: 'system-admin',
      summary: 'Create a publisher (system administrators)',
      body: publisherBody,
      responses: {
        201: { description: 'The publisher', data: publisherSchema }, 400: { description: 'Bad slug or body' },
        403: { description: 'Not a system administrator' }, 409: { description: 'The slug is taken' },
      },
      handler: async ({ body, auth }) => {
        const { owners: _owners, ...p } = await registry.createPublisher(auth, body);
        return { status: 201, data: p };
      },
    }),
    defineRoute({
      method: 'get', path: '/api/v1/registry/publishers/me', tag,
      summary: 'The publisher the caller owns (the first by slug)',
      responses: { 200: { description: 'The publisher', data: publisherSchema }, 404: { description: 'The caller owns no publisher' } },
      handler: async ({ auth }) => {
        const { owners: _owners, ...p } = await registry.myPublisher(auth);
        return { data: p };
      },
    }),
    defineRoute({
      method: 'get', path: '/api/v1/registry/publishers/me/packages', tag,
      summary: "The caller's packages (of every publisher it owns), paged (0-indexed page, size 1..100)",
      query: z.object(zeroPage),
      responses: { 200: { description: 'One page', data: pageOf(packageSchema) }, 400: { description: 'Bad page or size' } },
      handler: async ({ query, auth }) => ({ data: await registry.myPackages(auth, query.page, query.size) }),
    }),
    defineRoute({
      method: 'post', path: '/api/v1/registry/publishers/{slug}/packages/{name}/versions', tag,
      summary: 'Publish a version (owners of the publisher)',
      description: 'The archive is checked as an upload install checks it (safety, manifest, engine range, Turtle, SHACL) and its manifest name must be {name}: '
        + 'a failure is 422 with the validation report in error.details.report. dryRun=true checks and stores nothing (200, data null). '
        + 'The same version again answers 200 when the bytes are the same, 409 when they differ.',
      params: publishParams, query: dryRunQuery,
      multipart: { file: 'file', required: true, maxBytes: options.maxUploadBytes, description: 'The package archive (.tgz)' },
      responses: {
        200: { description: 'Dry run passed (data null), or this version was already published with these bytes', data: versionSchema.nullable() },
        201: { description: 'Published', data: versionSchema },
        400: { description: 'No file, bad name or query' }, 403: { description: 'Not an owner of the publisher' },
        404: { description: 'Publisher not found' }, 409: { description: 'This version is published with other bytes' },
        413: { description: 'File too large' }, 422: { description: 'The archive fails its checks; error.details.report says why' },
      },
      handler: async ({ params, query, file, auth }) => {
        const out = await registry.publish(auth, params.slug, params.name, file!.buffer, { dryRun: query.dryRun ?? false });
        return { status: out.created ? 201 : 200, data: out.record };
      },
    }),
    defineRoute({
      method: 'post', path: '/api/v1/registry/publishers/{slug}/packages/{name}/versions/{version}/yank', tag,
      summary: 'Yank a version (owners): never chosen as the newest, still installable by name',
      params: ownedVersionParams, body: yankBody,
      responses: {
        200: { description: 'The version', data: versionSchema }, 400: { description: 'Bad body' }, 403: { description: 'Not an owner' },
        404: { description: 'Publisher, package or version not found' }, 409: { description: 'The last version not yanked, without force' },
      },
      handler: async ({ params, body, auth }) => ({ data: await registry.yank(auth, params.slug, params.name, params.version, body) }),
    }),
    defineRoute({
      method: 'post', path: '/api/v1/registry/publishers/{slug}/packages/{name}/versions/{version}/unyank', tag,
      summary: 'Unyank a version (owners)',
      params: ownedVersionParams,
      responses: {
        200: { description: 'The version', data: versionSchema }, 403: { description: 'Not an owner' },
        404: { description: 'Publisher, package or version not found' },
      },
      handler: async ({ params, auth }) => ({ data: await registry.unyank(auth, params.slug, params.name, params.version) }),
    }),
    defineRoute({
      method: 'get', path: '/api/v1/registry/resolve', tag, auth: 'none',
      summary: 'The package whose published matrices include a matrix URI (anonymous)',
      query: z.object({ uri: z.string({ error: 'uri is required: a matrix URI' }).min(1).max(2000), engineVersion: rangeQuery }),
      responses: {
        200: { description: 'The package and its versions (filtered by engineVersion)', data: z.object({ publisher: z.object({ slug: z.string() }), name: z.string(), versions: z.array(versionSchema) }) },
        400: { description: 'Bad uri or engineVersion' }, 404: { description: 'No package provides this matrix' },
      },
      handler: async ({ query }) => ({ data: await registry.resolve(query.uri, query.engineVersion) }),
    }),
    defineRoute({
      method: 'get', path: '/api/v1/registry/packages/{publisher}/{name}', tag, auth: 'none',
      summary: 'A package and its versions, newest first (anonymous)',
      params: packageParams,
      responses: { 200: { description: 'The package', data: packageSchema }, 404: { description: 'Publisher or package not found' } },
      handler: async ({ params }) => ({ data: await registry.packageView(params.publisher, params.name) }),
    }),
    defineRoute({
      method: 'get', path: '/api/v1/registry/packages/{publisher}/{name}/versions', tag, auth: 'none',
      summary: 'Versions of a package, newest first, paged (0-indexed page, size 1..100), optionally filtered by engine range (anonymous)',
      params: packageParams, query: z.object({ ...zeroPage, engineVersion: rangeQuery }),
      responses: { 200: { description: 'One page', data: pageOf(versionSchema) }, 400: { description: 'Bad page, size or engineVersion' }, 404: { description: 'Publisher or package not found' } },
      handler: async ({ params, query }) => ({ data: await registry.versionsPage(params.publisher, params.name, query) }),
    }),
    defineRoute({
      method: 'get', path: '/api/v1/registry/packages/{publisher}/{name}/{version}/declarations', tag, auth: 'none',
      summary: 'Variables (build:Variable) and managed secrets (secrets:ManagedSecret) the version\'s matrices declare (anonymous)',
      params: versionParams,
      responses: {
        200: { description: 'Declarations, by URI', data: declarationsSchema },
        404: { description: 'Publisher, package or version not found' },
      },
      handler: async ({ params }) => ({ data: await registry.declarations(params.publisher, params.name, params.version) }),
    }),
    defineRoute({
      method: 'get', path: '/api/v1/registry/packages/{publisher}/{name}/{version}/archive', tag, auth: 'none',
      summary: 'The archive of a version, with X-Archive-Checksum: sha256:<hex> (anonymous)',
      params: versionParams,
      responses: {
        200: { description: 'The .tgz bytes', mediaTypes: ['application/gzip'] },
        404: { description: 'Publisher, package or version not found' },
      },
      handler: async ({ params }) => {
        const { bytes, checksum } = await registry.archive(params.publisher, params.name, params.version);
        return {
          headers: {
            'X-Archive-Checksum': checksum,
            'Content-Disposition': `attachment; filename="${params.name}-${params.version.replace(/[^0-9A-Za-z.+-]/g, '_')}.tgz"`,
          },
          raw: { contentType: 'application/gzip', body: bytes },
        };
      },
    }),
  ];
}
