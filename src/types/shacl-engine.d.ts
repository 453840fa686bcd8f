/**
 * The part of shacl-engine's API the service uses (the package ships no
 * types): a validator built once from a shapes dataset, run on a data
 * dataset, answering a report whose `dataset` is the sh:ValidationReport.
 */
declare module 'shacl-engine' {
  import type { DatasetCore, DataFactory, Quad, Term } from '@rdfjs/types';

  export interface ValidatorOptions {
    factory: DataFactory & { dataset(quads?: Quad[]): DatasetCore };
    details?: boolean;
    debug?: boolean;
  }

  export interface ValidationReport {
    readonly conforms: boolean;
    readonly results: ReadonlyArray<{ severity: Term }>;
    readonly dataset: DatasetCore;
  }

  export class Validator {
    constructor(shapes: DatasetCore, options: ValidatorOptions);
    validate(data: { dataset: DatasetCore; terms?: Iterable<Term> }): Promise<ValidationReport>;
  }
}
