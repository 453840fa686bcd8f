import type { Quad } from 'n3';
import { AppError } from '../errors.js';
import { readPackageArchive, type PackageArchive } from '../packages/archive.js';
import { matrixText } from '../packages/matrix-text.js';
import { validateMatrices, type ValidationReport } from '../packages/validation.js';
import { parseTurtle } from '../rdf/turtle.js';
import { IAM, RDF } from '../rdf/vocab.js';

/**
 * The checks a publish runs (docs/packages.md, "Publishing"): the same as an upload
 * install — archive safety and limits, manifest, engine range, Turtle, SHACL —
 * plus "the manifest's name is the package of the path". A failure is 422 with
 * this report (the JSON shape of P9) in `error.details`.
 */
export interface PublishReport {
  conforms: boolean;
  violationCount: number;
  warningCount: number;
  infoCount: number;
  violations: ReportEntry[];
  warnings: ReportEntry[];
  infos: ReportEntry[];
}
export interface ReportEntry { focusNode: string | null; path: string | null; value: string | null; message: string }

export interface CheckedArchive {
  archive: PackageArchive;
  /** Role URIs the package's matrices declare (context when packages depending on it are published). */
  roleUris: string[];
  report: PublishReport;
}

/** What the registry already offers that the package may name: its dependencies' matrices and roles. */
export interface PublishContext { matrixUris: string[]; roleUris: string[] }

const entry = (message: string, focusNode: string | null = null, path: string | null = null): ReportEntry => ({ focusNode, path, value: null, message });

function failed(violations: ReportEntry[], warnings: ReportEntry[] = []): PublishReport {
  return { conforms: false, violationCount: violations.length, warningCount: warnings.length, infoCount: 0, violations, warnings, infos: [] };
}

function toJson(report: ValidationReport): PublishReport {
  const of = (severity: string) => report.results.filter((r) => r.severity === severity)
    .map((r) => ({ focusNode: r.focusNode, path: r.path, value: r.value, message: r.message }));
  return {
    conforms: report.conforms, violationCount: report.violationCount, warningCount: report.warningCount, infoCount: report.infoCount,
    violations: of('VIOLATION'), warnings: of('WARNING'), infos: of('INFO'),
  };
}

export class PublishRejected extends AppError {
  constructor(message: string, readonly report: PublishReport) {
    super('VALIDATION_FAILED', message, { report });
  }
}

/**
 * Reads and checks an archive for publishing as `name`; throws
 * PublishRejected (422) with the report, or answers the checked archive.
 * `contextFor` gives the registry's matrices and roles of the manifest's
 * dependencies, so a package importing its dependency's matrix validates.
 */
export async function checkForPublish(bytes: Buffer, name: string, maxArchiveBytes: number,
  contextFor: (manifest: PackageArchive['manifest']) => Promise<PublishContext>): Promise<CheckedArchive> {
  let archive: PackageArchive;
  try {
    archive = await readPackageArchive(bytes, { maxArchiveBytes });
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    const problems = Array.isArray(err.details?.problems) ? (err.details.problems as unknown[]).map(String) : [err.message];
    throw new PublishRejected(`The archive is not a valid package: ${err.message}`, failed(problems.map((p) => entry(p, null, 'manifest.json'))));
  }
  const m = archive.manifest;
  if (m.name !== name) {
    throw new PublishRejected(`The manifest names the package "${m.name}", but it is published as "${name}"; they must be the same`,
      failed([entry(`manifest name "${m.name}" is not "${name}", the package it is published as`, null, 'manifest.json')]));
  }
  const matrices: Array<{ uri: string; name: string; quads: Quad[] }> = [];
  const turtleProblems: ReportEntry[] = [];
  for (const matrix of m.matrices) {
    try {
      matrices.push({ uri: matrix.uri, name: matrix.name, quads: parseTurtle(matrixText(archive.files.get(matrix.path) ?? new Uint8Array()), { baseIri: matrix.uri, source: matrix.path }) });
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      turtleProblems.push(entry(err.message, matrix.uri, matrix.path));
    }
  }
  if (turtleProblems.length) throw new PublishRejected(`The package's Turtle does not parse: ${turtleProblems[0]!.message}`, failed(turtleProblems));
  const context = await contextFor(m);
  const { report } = await validateMatrices({ matrices, context });
  const json = toJson(report);
  if (report.violationCount > 0) {
    throw new PublishRejected(`SHACL validation found ${report.violationCount} violation${report.violationCount === 1 ? '' : 's'} (first: ${json.violations[0]!.message})`, json);
  }
  const roleUris = new Set<string>();
  for (const matrix of matrices) {
    for (const q of matrix.quads) {
      if (q.predicate.value === RDF.type && q.object.value === IAM.Role && q.subject.termType === 'NamedNode') roleUris.add(q.subject.value);
    }
  }
  return { archive, roleUris: [...roleUris].sort(), report: json };
}
