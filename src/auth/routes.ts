import { z } from 'zod';
import { defineRoute, type RouteDef } from '../http/api.js';
import { EXPIRES_IN, type ApiKeyService, type ExpiresIn } from './api-keys.js';

const expiresIn = Object.keys(EXPIRES_IN) as [ExpiresIn, ...ExpiresIn[]];

const createKeyBody = z.strictObject({
  name: z.string({ error: 'name is required: a label for the key (1 to 100 characters)' })
    .min(1, 'name must not be empty').max(100, 'name must be at most 100 characters'),
  expiresIn: z.enum(expiresIn, { error: `expiresIn is required: one of ${expiresIn.join(', ')}` }),
});

const keyInfo = {
  id: z.uuid(),
  name: z.string(),
  prefix: z.string().describe('The first characters of the key, to tell keys apart'),
  createdAt: z.iso.datetime(),
  expiresAt: z.iso.datetime().nullable().describe('null: never expires'),
};
const apiKeySchema = z.object({ ...keyInfo, lastUsedAt: z.iso.datetime().nullable() }).meta({ id: 'ApiKey' });
const newApiKeySchema = z.object({ ...keyInfo, key: z.string().describe('The key: shown only in this answer; send it as X-Api-Key') }).meta({ id: 'NewApiKey' });

/** The caller's API keys (docs/iam.md, "API keys"). */
export function apiKeyRoutes(keys: ApiKeyService): RouteDef[] {
  const tag = 'API keys';
  return [
    defineRoute({
      method: 'post', path: '/api/v1/users/me/keys', tag,
      summary: 'Make an API key for the caller; the key is answered once',
      description: 'Send the key as `X-Api-Key: <key>` instead of a bearer token. It acts as the caller, and carries system administration '
        + 'only if the caller has it now. Only its hash is stored. Keys are made with a bearer token only: a caller sending an API key is '
        + 'refused (403). A user holds at most 100 keys.',
      body: createKeyBody,
      responses: {
        201: { description: 'The new key, with `key`', data: newApiKeySchema },
        400: { description: 'Bad name or expiresIn, or the caller already holds 100 keys' },
        403: { description: 'The caller sent an API key, not a bearer token' },
      },
      handler: async ({ body, auth }) => ({ status: 201, data: await keys.create(auth, body.name, body.expiresIn) }),
    }),
    defineRoute({
      method: 'get', path: '/api/v1/users/me/keys', tag,
      summary: "The caller's API keys, newest first, without the keys themselves",
      responses: { 200: { description: 'Keys', data: z.array(apiKeySchema) } },
      handler: async ({ auth }) => ({ data: await keys.list(auth) }),
    }),
    defineRoute({
      method: 'delete', path: '/api/v1/users/me/keys/{id}', tag,
      summary: 'Revoke one of the caller\'s API keys: it is refused (401) from now on',
      params: z.object({ id: z.string().min(1).max(200) }),
      responses: { 200: { description: 'Revoked', data: z.string() }, 404: { description: 'The caller has no such key' } },
      handler: async ({ params, auth }) => {
        const key = await keys.revoke(auth, params.id);
        return { data: `API key "${key.name}" (${key.prefix}) revoked` };
      },
    }),
  ];
}
