import { z } from 'zod';
import { COMMAND_TYPES } from './commands.js';
import { bindingsFields } from '../secrets/schema.js';

/** zod schemas of the package endpoints (P1 to P10), for validation and OpenAPI. */
const name = z.string().min(1).max(200);
export const workspaceParams = z.object({ workspace: name });
export const packageParams = z.object({ workspace: name, packageName: name });
export const commandParams = z.object({ workspace: name, commandId: name });
export const registryParams = z.object({ workspace: name, publisher: name, name });

export const installBody = z.strictObject({
  version: z.string().min(1).max(100).optional(),
  autoUpdate: z.boolean({ error: 'autoUpdate must be true or false' }).optional(),
  ...bindingsFields,
});
export const autoUpdateBody = z.strictObject({ autoUpdate: z.boolean({ error: 'autoUpdate is required: true or false' }) });

const queryBoolean = (field: string) => z.enum(['true', 'false'], { error: `${field} must be true or false` }).transform((v) => v === 'true');
export const uploadQuery = z.strictObject({ forceUpdate: queryBoolean('forceUpdate').optional() });

/** Lower-case by default; upper-case when WSM_STATUS_CASE=upper (src/http/status-case.ts). */
const status = z.enum(['pending', 'in_progress', 'completed', 'failed', 'PENDING', 'IN_PROGRESS', 'COMPLETED', 'FAILED']);
export const commandSchema = z.object({
  id: z.uuid(),
  packageInstallationId: z.uuid().nullable(),
  packageName: z.string(),
  version: z.string(),
  commandType: z.enum(COMMAND_TYPES as [string, ...string[]]),
  status,
  errorMessage: z.string().nullable(),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
  packageInstallation: z.object({ id: z.uuid() }).nullable(),
  parentCommandId: z.uuid().nullable().describe('The command that installed this package as its dependency'),
}).meta({ id: 'LifecycleCommand' });

export const commandSummarySchema = z.object({
  id: z.uuid(), version: z.string(), commandType: z.string(), status, errorMessage: z.string().nullable(),
  validationConforms: z.boolean().nullable(), validationViolationCount: z.number().int().nullable(),
  validationWarningCount: z.number().int().nullable(), validationInfoCount: z.number().int().nullable(),
  createdAt: z.iso.datetime(), updatedAt: z.iso.datetime(),
}).meta({ id: 'LifecycleCommandSummary' });

export const matrixSummarySchema = z.object({
  id: z.uuid(), uri: z.string().describe('The matrix URI'), name: z.string(), description: z.string().nullable(), dependencyCount: z.number().int(),
}).meta({ id: 'MatrixSummary' });

export const installationSchema = z.object({
  id: z.uuid(), name: z.string(), currentVersion: z.string(), createdAt: z.iso.datetime(), updatedAt: z.iso.datetime(),
  matrices: z.array(matrixSummarySchema), latestCommand: commandSummarySchema.nullable(),
  registryPublisher: z.string().nullable(), registryName: z.string().nullable(), latestVersion: z.string().nullable(),
  updateAvailable: z.boolean(), autoUpdate: z.boolean(),
}).meta({ id: 'PackageInstallation' });

export const eventSchema = z.object({
  id: z.uuid(), commandId: z.uuid(), message: z.string(), level: z.enum(['INFO', 'SUCCESS', 'WARNING', 'ERROR']),
  createdAt: z.iso.datetime(), command: z.object({ id: z.uuid() }),
}).meta({ id: 'CommandEvent' });

const entry = z.object({ focusNode: z.string().nullable(), path: z.string().nullable(), value: z.string().nullable(), message: z.string() });
export const reportSchema = z.object({
  conforms: z.boolean(), violationCount: z.number().int(), warningCount: z.number().int(), infoCount: z.number().int(),
  violations: z.array(entry), warnings: z.array(entry), infos: z.array(entry),
}).meta({ id: 'ValidationReport' });
