import { AppError } from '../errors.js';
import type { Manifest } from '../packages/manifest.js';
import type { PipelinePool } from '../packages/pipeline-pool.js';
import type { PublishContext, PublishRejection, PublishReport } from './publish-steps.js';

export type { PublishContext, PublishReport, ReportEntry } from './publish-steps.js';

/**
 * The checks a publish runs (docs/packages.md, "The hosted registry"): the same as an upload
 * install — archive safety and limits, manifest, engine range, Turtle (and
 * every term the store would refuse), SHACL, and no use of the service's
 * own IRIs — plus "the manifest's name is the package of the path". They run
 * in a deployment worker (`publish-steps.ts`), as an install's do, so no
 * archive holds the service's event loop. A failure is 422 with the report
 * (the JSON shape of P9) in `error.details`.
 */
export interface CheckedArchive {
  manifest: Manifest;
  /** Role URIs the package's matrices declare (context when packages depending on it are published). */
  roleUris: string[];
  report: PublishReport;
}

export class PublishRejected extends AppError {
  constructor(message: string, readonly report: PublishReport) {
    super('VALIDATION_FAILED', message, { report });
  }
}

export interface PublishCheckOptions {
  maxArchiveBytes: number;
  /** The workers that run the checks (the installs' pool). */
  pool: PipelinePool;
  /** WSM_BASE_IRI: the service's resource IRIs, which packages may not use. */
  reservedBase: string;
}

function refuseIfRejected<T extends object>(out: T | PublishRejection): T {
  if ('rejected' in out) throw new PublishRejected(out.rejected.message, out.rejected.report);
  return out;
}

/**
 * Reads and checks an archive for publishing as `name`; throws
 * PublishRejected (422) with the report, or answers the checked archive.
 * `contextFor` gives the registry's matrices and roles of the manifest's
 * dependencies, so a package importing its dependency's matrix validates.
 */
export function checkForPublish(bytes: Buffer, name: string, options: PublishCheckOptions,
  contextFor: (manifest: Manifest) => Promise<PublishContext>): Promise<CheckedArchive> {
  return options.pool.run(async (job) => {
    // A copy of its own, moved to the worker: the caller keeps `bytes` to store them.
    const { manifest } = refuseIfRejected(await job.publishRead({ archive: new Uint8Array(bytes), name, maxArchiveBytes: options.maxArchiveBytes }));
    const context = await contextFor(manifest);
    const { roleUris, report } = refuseIfRejected(await job.publishValidate({ context, reservedBase: options.reservedBase }));
    return { manifest, roleUris, report };
  });
}
