import { z } from 'zod';

/** zod schemas of the variables and secrets endpoints and of install bindings (docs/secrets.md). */
const name = z.string().min(1).max(200);
export const workspaceParams = z.object({ workspace: name });
export const variableParams = z.object({ workspace: name, id: z.string().min(1).max(2000) });
export const secretParams = z.object({ workspace: name, secretId: z.string().min(1).max(2000) });

const iriText = z.string().min(1).max(2000);
const base64 = (what: string) => z.string({ error: `${what} is required (standard base64)` }).min(1, `${what} is required (standard base64)`).max(200_000);
const scope = z.enum(['workspace', 'principal'], { error: 'scope must be "workspace" or "principal"' });

/** Optional: the only algorithm is X25519-XChaCha20-Poly1305; another is a 400. */
const algorithm = z.literal('X25519-XChaCha20-Poly1305', { error: 'algorithm must be "X25519-XChaCha20-Poly1305", the only one this service speaks' }).optional();

export const sealedValue = {
  algorithm,
  encryptedValue: base64('encryptedValue'),
  nonce: base64('nonce'),
  clientPublicKey: base64('clientPublicKey'),
  keyId: z.string({ error: 'keyId is required (from POST .../pubkey)' }).min(1).max(1024),
};

export const variableBinding = z.strictObject({ uri: iriText, value: z.string().max(64 * 1024), sourceMatrix: iriText.nullable().optional() });
export const secretBinding = z.strictObject({ uri: iriText, ...sealedValue });
export const bindingsFields = {
  variableBindings: z.array(variableBinding).max(500).optional(),
  secretBindings: z.array(secretBinding).max(500).optional(),
};
/** The multipart `bindings` field of an upload install, once parsed as JSON. */
export const uploadBindings = z.strictObject(bindingsFields);

export const variableValueBody = z.strictObject({ value: z.string().max(64 * 1024).nullable() });
export const secretValueBody = z.strictObject({ ...sealedValue, scope: scope.default('workspace'), scopeEntityId: z.string().min(1).max(200).optional() });
export const secretValueQuery = z.strictObject({
  clientPublicKey: base64('clientPublicKey'),
  keyId: sealedValue.keyId,
  algorithm,
  scope: scope.default('workspace'),
  scopeEntityId: z.string().min(1).max(200).optional(),
});
export const secretsQuery = z.strictObject({ prefix: z.string().max(2000).optional() });

export const variableSchema = z.object({
  id: z.uuid(), uri: z.string(), value: z.string().nullable(), hasValue: z.boolean(), variableType: z.string().nullable(),
  label: z.string().nullable(), required: z.boolean(),
}).meta({ id: 'Variable' });

export const secretSchema = z.object({
  id: z.uuid(), uri: z.string(), description: z.string().nullable(), createdAt: z.iso.datetime(), updatedAt: z.iso.datetime(),
  allowedScopes: z.array(scope), matrix: z.object({ uri: z.string(), name: z.string() }),
}).meta({ id: 'ManagedSecret' });

export const pubkeySchema = z.object({
  serverPublicKey: z.string().describe('X25519 public key, 32 bytes, standard base64'),
  keyId: z.string().describe('Names the private half for one exchange (a value set or read) within minutes'),
  expiresAt: z.iso.datetime(),
}).meta({ id: 'SecretExchangeKey' });

export const encryptedValueSchema = z.object({
  encryptedValue: z.string().describe('XChaCha20-Poly1305 ciphertext then 16-byte tag, standard base64'),
  nonce: z.string().describe('24 bytes, standard base64'),
  algorithm: z.literal('X25519-XChaCha20-Poly1305'),
  serverPublicKey: z.string().describe('The public half of keyId'),
}).meta({ id: 'EncryptedSecretValue' });

export const secretReadSchema = z.object({
  id: z.uuid(), secretUri: z.string(), username: z.string(), scope, scopeEntityId: z.string().nullable(), readAt: z.iso.datetime(),
}).meta({ id: 'SecretValueRead' });

export const declarationsSchema = z.object({
  declaredVariables: z.array(z.object({
    uri: z.string(), variableType: z.string().nullable(), label: z.string().nullable(), description: z.string().nullable(), required: z.boolean(), sourceMatrix: z.string(),
  })),
  declaredSecrets: z.array(z.object({
    uri: z.string(), label: z.string().nullable(), description: z.string().nullable(), required: z.boolean(), sourceMatrix: z.string(),
  })),
}).meta({ id: 'PackageDeclarations' });
