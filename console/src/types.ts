/** Shapes of the public API the console reads (docs/api.md). */
export interface Workspace { id: string; slug: string; name: string; engineVersion: string; owner: { id: string; username: string } }
export interface MatrixSummary { id: string; name: string; description: string | null; dependencyCount: number; uri?: string }
export interface CommandSummary { id: string; version: string; commandType: string; status: string; errorMessage: string | null; validationConforms: boolean | null; validationViolationCount: number | null }
export interface Installation {
  id: string; name: string; currentVersion: string; matrices: MatrixSummary[]; latestCommand: CommandSummary | null;
  registryPublisher?: string | null; registryName?: string | null; latestVersion?: string | null; updateAvailable?: boolean; autoUpdate?: boolean;
  updatedAt: string;
}
export interface LifecycleCommand { id: string; packageInstallationId: string | null; packageName: string; version: string; commandType: string; status: string; errorMessage: string | null; createdAt: string; updatedAt: string }
export interface CommandEvent { id: string; commandId: string; message: string; level: string; createdAt: string }
export interface ValidationEntry { focusNode: string | null; path: string | null; value: string | null; message: string | null }
export interface ValidationReport { conforms: boolean; violationCount: number; warningCount: number; infoCount: number; violations: ValidationEntry[]; warnings: ValidationEntry[]; infos: ValidationEntry[] }
export interface User { id: string; username: string; email: string | null; firstName?: string | null; lastName?: string | null }
export interface Role { id: string; uri: string; label: string; description: string | null; matrixId: string | null }
export type Agent = Role;
export interface Principal { id: string; type: string; actor: User | Agent }
export interface SlashParameter { name: string; kind: 'iri' | 'literal'; datatype?: string; required?: boolean; description?: string }
export interface SlashCommand {
  id: string; alias: string; description: string | null; interpretation: string | null; scriptType: 'CONSTRUCT' | 'DESCRIBE';
  scriptContent: string; owner: User | null; parameters?: SlashParameter[]; updatedAt: string;
}
export interface Extension { id: string; label: string | null; targetMatrixUri: string; active: boolean; ownerUsername: string | null; content?: string; lastCommandId?: string | null; updatedAt: string }
