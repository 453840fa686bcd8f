import { z } from 'zod';
import { defineRoute, type RouteDef } from '../http/api.js';
import type { SecretsService } from './service.js';
import {
  encryptedValueSchema, pubkeySchema, secretParams, secretReadSchema, secretSchema, secretsQuery, secretValueBody, secretValueQuery,
  variableParams, variableSchema, variableValueBody, workspaceParams,
} from './schema.js';

/** Variables and managed secrets of a workspace (docs/secrets.md), as the ecosystem's client calls them. */
export function secretsRoutes(secrets: SecretsService): RouteDef[] {
  const tag = 'Variables and secrets';
  const e2e = 'Values cross the wire only end to end encrypted: X25519 with the key of POST .../pubkey, the key BLAKE2b-256 of the raw shared secret, '
    + 'XChaCha20-Poly1305 with a 24-byte nonce (docs/secrets.md). Each keyId serves one exchange.';
  return [
    defineRoute({
      method: 'get', path: '/api/v1/variables/{workspace}', tag, access: 'member',
      summary: 'Variables the installed packages declare, with their values (plaintext)',
      params: workspaceParams,
      responses: { 200: { description: 'Variables by URI', data: z.array(variableSchema) }, 404: { description: 'Workspace not found' } },
      handler: async ({ access }) => ({ data: await secrets.listVariables(access!.workspace.id) }),
    }),
    defineRoute({
      method: 'put', path: '/api/v1/variables/{workspace}/{id}/value', tag, access: 'admin',
      summary: 'Set a variable\'s value; null clears an optional one (administrators)',
      params: variableParams, body: variableValueBody,
      responses: {
        200: { description: 'The variable', data: variableSchema }, 400: { description: 'Bad body, or null for a required variable' },
        403: { description: 'Not an administrator' }, 404: { description: 'Workspace or variable not found' },
      },
      handler: async ({ params, body, access }) => ({ data: await secrets.setVariable(access!.workspace.id, params.id, body.value) }),
    }),
    defineRoute({
      method: 'get', path: '/api/v1/secrets/{workspace}', tag, access: 'member',
      summary: 'Managed secrets the installed packages declare (metadata only)',
      params: workspaceParams, query: secretsQuery,
      responses: { 200: { description: 'Secrets by URI', data: z.array(secretSchema) }, 404: { description: 'Workspace not found' } },
      handler: async ({ query, access }) => ({ data: await secrets.listSecrets(access!.workspace.id, query.prefix) }),
    }),
    defineRoute({
      method: 'post', path: '/api/v1/secrets/{workspace}/pubkey', tag, access: 'member',
      summary: 'A fresh server X25519 public key and the keyId of its private half, for one value exchange',
      description: e2e,
      params: workspaceParams,
      responses: {
        200: { description: 'The key', data: pubkeySchema }, 404: { description: 'Workspace not found' },
        503: { description: 'Secret values are off (no WSM_SECRETS_KEY_FILE)' },
      },
      handler: async ({ auth, access }) => ({ data: secrets.pubkey(access!, auth.username) }),
    }),
    defineRoute({
      method: 'get', path: '/api/v1/secrets/{workspace}/reads', tag, access: 'admin',
      summary: 'The record of secret value reads: who, when, which secret, which scope, newest first (administrators)',
      params: workspaceParams, query: z.strictObject({ uri: z.string().max(2000).optional() }),
      responses: { 200: { description: 'Reads', data: z.array(secretReadSchema) }, 403: { description: 'Not an administrator' }, 404: { description: 'Workspace not found' } },
      handler: async ({ query, access }) => ({ data: await secrets.reads(access!.workspace.id, query.uri) }),
    }),
    defineRoute({
      method: 'get', path: '/api/v1/secrets/{workspace}/{secretId}', tag, access: 'member',
      summary: 'One managed secret\'s metadata, by id, IRI or QName prefix:Name',
      params: secretParams,
      responses: { 200: { description: 'The secret', data: secretSchema }, 404: { description: 'Workspace or secret not found' } },
      handler: async ({ params, access }) => ({ data: await secrets.getSecret(access!.workspace.id, params.secretId) }),
    }),
    defineRoute({
      method: 'put', path: '/api/v1/secrets/{workspace}/{secretId}/value', tag, access: 'member',
      summary: 'Set a secret\'s value in a scope, end to end encrypted',
      description: `${e2e} A workspace-scope value is set by administrators; a principal-scope value by that principal or by administrators.`,
      params: secretParams, body: secretValueBody,
      responses: {
        200: { description: 'Set; the secret\'s metadata', data: secretSchema },
        400: { description: 'Malformed key, nonce or ciphertext, a value that does not decrypt, an unknown scope, a bad or expired keyId' },
        403: { description: 'Not allowed to set a value in this scope' }, 404: { description: 'Workspace, secret or principal not found' },
        409: { description: 'The keyId was used already' }, 503: { description: 'Secret values are off (no WSM_SECRETS_KEY_FILE)' },
      },
      handler: async ({ params, body, auth, access }) => {
        await secrets.setValue(access!, auth.username, params.secretId, body);
        return { data: await secrets.getSecret(access!.workspace.id, params.secretId) };
      },
    }),
    defineRoute({
      method: 'get', path: '/api/v1/secrets/{workspace}/{secretId}/value', tag, access: 'member',
      summary: 'Read a secret\'s value in a scope, encrypted for the caller\'s key (the read is recorded)',
      description: `${e2e} A workspace-scope value is read by members; a principal-scope value by that principal alone.`,
      params: secretParams, query: secretValueQuery,
      responses: {
        200: { description: 'The value, encrypted', data: encryptedValueSchema },
        400: { description: 'Malformed key, an unknown scope, a bad or expired keyId' },
        403: { description: 'Not allowed to read a value in this scope' }, 404: { description: 'Workspace or secret not found, or no value in this scope' },
        409: { description: 'The keyId was used already' }, 503: { description: 'Secret values are off (no WSM_SECRETS_KEY_FILE)' },
      },
      handler: async ({ params, query, auth, access }) => ({ data: await secrets.readValue(access!, auth.username, params.secretId, query) }),
    }),
  ];
}
