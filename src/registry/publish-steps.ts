import type { Quad } from 'n3';
import { AppError } from '../errors.js';
import { readPackageArchive } from '../packages/archive.js';
import type { Manifest } from '../packages/manifest.js';
import { matrixText } from '../packages/matrix-text.js';
import { asStepFailure, checkTerms } from '../packages/pipeline.js';
import { validateMatrices, type ValidationReport } from '../packages/validation.js';
import { ReservedTerms } from '../rdf/reserved.js';
import { parseTurtle } from '../rdf/turtle.js';
import { IAM, RDF } from '../rdf/vocab.js';

/*
 * The steps of a publish check that run in a deployment worker
 * (pipeline-worker.ts), as an install's do: reading the archive, the Turtle
 * of its matrices, and SHACL with the reserved-term check. Between the two
 * steps the service reads the registry for the SHACL context (its
 * dependencies' matrices and roles). A refusal is data (`rejected`): the
 * message of the 422 and its report.
 */

/** The report of a publish (the JSON shape of P9). */
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

/** What the registry already offers that the package may name: its dependencies' matrices and roles. */
export interface PublishContext { matrixUris: string[]; roleUris: string[] }

export interface PublishRejection { rejected: { message: string; report: PublishReport } }

export interface PublishReadInput {
  /** The archive's bytes (moved to the worker). */
  archive: Uint8Array;
  /** The package name of the path: the manifest must give the same. */
  name: string;
  maxArchiveBytes: number;
}
export type PublishReadOutput = { manifest: Manifest } | PublishRejection;

export interface PublishValidateInput {
  context: PublishContext;
  /** WSM_BASE_IRI: packages may not use the service's vocabulary or resource IRIs (as installs refuse them). */
  reservedBase: string;
}
export type PublishValidateOutput = { roleUris: string[]; report: PublishReport } | PublishRejection;

/** Entries of each severity a report carries (its counts stay exact): the report crosses to the event loop and goes out as JSON. */
export const MAX_REPORT_ENTRIES = 1_000;

const entry = (message: string, focusNode: string | null = null, path: string | null = null): ReportEntry => ({ focusNode, path, value: null, message });

function failed(violations: ReportEntry[]): PublishReport {
  return { conforms: false, violationCount: violations.length, warningCount: 0, infoCount: 0, violations: violations.slice(0, MAX_REPORT_ENTRIES), warnings: [], infos: [] };
}

const reject = (message: string, report: PublishReport): PublishRejection => ({ rejected: { message, report } });

function toJson(report: ValidationReport, extra: ReportEntry[]): PublishReport {
  const of = (severity: string) => report.results.filter((r) => r.severity === severity)
    .map((r) => ({ focusNode: r.focusNode, path: r.path, value: r.value, message: r.message }));
  const violations = [...extra, ...of('VIOLATION')];
  return {
    conforms: violations.length === 0, violationCount: report.violationCount + extra.length, warningCount: report.warningCount, infoCount: report.infoCount,
    violations: violations.slice(0, MAX_REPORT_ENTRIES), warnings: of('WARNING').slice(0, MAX_REPORT_ENTRIES), infos: of('INFO').slice(0, MAX_REPORT_ENTRIES),
  };
}

/** One publish check's state between its steps (the parsed matrices). */
export class PublishSession {
  private manifest: Manifest | null = null;
  private matrices: Array<{ uri: string; name: string; quads: Quad[] }> = [];

  /** Unpacks the archive, checks its manifest's name and parses (and checks the terms of) every matrix. */
  async read(input: PublishReadInput): Promise<PublishReadOutput> {
    this.manifest = null;
    this.matrices = [];
    let archive;
    try {
      archive = await readPackageArchive(Buffer.from(input.archive.buffer, input.archive.byteOffset, input.archive.byteLength), { maxArchiveBytes: input.maxArchiveBytes });
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      const problems = Array.isArray(err.details?.problems) ? (err.details.problems as unknown[]).map(String) : [err.message];
      return reject(`The archive is not a valid package: ${err.message}`, failed(problems.map((p) => entry(p, null, 'manifest.json'))));
    }
    const m = archive.manifest;
    if (m.name !== input.name) {
      return reject(`The manifest names the package "${m.name}", but it is published as "${input.name}"; they must be the same`,
        failed([entry(`manifest name "${m.name}" is not "${input.name}", the package it is published as`, null, 'manifest.json')]));
    }
    const problems: ReportEntry[] = [];
    for (const matrix of m.matrices) {
      try {
        const quads = parseTurtle(matrixText(archive.files.get(matrix.path) ?? new Uint8Array()), { baseIri: matrix.uri, source: matrix.path });
        // The terms the store would refuse at install (a malformed IRI the Turtle parser let through, a bad language tag).
        checkTerms(quads, matrix.path, { irisChecked: true });
        this.matrices.push({ uri: matrix.uri, name: matrix.name, quads });
      } catch (err) {
        problems.push(entry(asStepFailure(err).failure.message, matrix.uri, matrix.path));
      }
    }
    if (problems.length) return reject(`The package's Turtle does not parse: ${problems[0]!.message}`, failed(problems));
    this.manifest = m;
    return { manifest: m };
  }

  /** SHACL over the matrices read, with the registry's context; statements using reserved IRIs are violations, as at install. */
  async validate(input: PublishValidateInput): Promise<PublishValidateOutput> {
    if (!this.manifest) throw new Error('publish validate: no archive was read');
    const reserved = new ReservedTerms(input.reservedBase);
    // A matrix URI among the service's IRIs (one of its graphs, say) could never be installed.
    const reservedUris = this.manifest.matrices.flatMap((x) => {
      const reason = reserved.reasonFor(x.uri);
      return reason ? [entry(`The matrix URI <${x.uri}> belongs to ${reason}; packages may not use it`, x.uri, 'manifest.json')] : [];
    });
    const { report } = await validateMatrices({ matrices: this.matrices, context: input.context, reserved });
    const json = toJson(report, reservedUris);
    if (json.violationCount > 0) {
      return reject(`SHACL validation found ${json.violationCount} violation${json.violationCount === 1 ? '' : 's'} (first: ${json.violations[0]!.message})`, json);
    }
    const roleUris = new Set<string>();
    for (const matrix of this.matrices) {
      for (const q of matrix.quads) {
        if (q.predicate.value === RDF.type && q.object.value === IAM.Role && q.subject.termType === 'NamedNode') roleUris.add(q.subject.value);
      }
    }
    return { roleUris: [...roleUris].sort(), report: json };
  }
}
