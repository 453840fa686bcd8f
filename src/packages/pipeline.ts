/**
 * The CPU-heavy steps of deploying matrices (docs/architecture.md, "Threads"): parsing
 * the Turtle, checking that the store will accept every term, SHACL
 * validation and the derivation of roles and agents. They run in a worker
 * thread (pipeline-worker.ts, driven by pipeline-pool.ts) so an install of a
 * large package never holds the service's event loop; this module is plain
 * functions over one `PipelineSession` so it can also run in-thread.
 *
 * A session holds the parsed quads of one job between its steps, so they
 * are parsed once and never cross the thread boundary as objects: only
 * text (Turtle in, N-Triples out) and small summaries do.
 */
import oxigraph from 'oxigraph';
import { Parser, type Quad, type Term } from 'n3';
import { AppError } from '../errors.js';
import { Graphs } from '../rdf/graphs.js';
import { parseTurtle, quadsToNTriples } from '../rdf/turtle.js';
import { DCTERMS, MTX, RDFS } from '../rdf/vocab.js';
import { deriveMatrix, derivedIds } from './derive.js';
import { validateMatrices, type ValidationReport } from './validation.js';
import { ReservedTerms } from '../rdf/reserved.js';
import type { LoadData } from '../store/store.js';
import { matrixText } from './matrix-text.js';
import { extractDeclarations, type Declarations } from '../secrets/declarations.js';
import { packIris, type PackedIris } from '../rdf/iri-set.js';

/** A user-facing failure of a step: `message` says what is wrong, `hint` what to do (a CommandFailure on the main thread). */
export interface StepFailure { failure: { message: string; hint?: string } }

export interface ParseInput {
  /**
   * Turtle (or N-Triples) text of each matrix, or its UTF-8 bytes (a file of
   * the archive, decoded here: `matrixText`), with the IRI relative IRIs
   * resolve against.
   */
  matrices: Array<{ uri: string; name: string; path: string; text: string | Uint8Array }>;
  /** Where the role IRIs of `mentionedRoleIris` live. */
  roleIrisOf: { graphsBase: string; workspaceId: string };
}

export interface ParsedMatrix {
  uri: string;
  tripleCount: number;
  /** Objects of `<uri> mtx:imports`, once each. */
  imports: string[];
  /** First `rdfs:comment` or `dcterms:description` of `<uri>`, or null. */
  description: string | null;
}

export interface ParseOutput {
  matrices: ParsedMatrix[];
  /** Every IRI the matrices name as subject or object (packed: a large package mentions 100,000; `SortedIris` reads it). */
  mentioned: PackedIris;
  /** The role resource IRI each of `mentioned` would have if it were a role (thousands of hashes: done here), packed. */
  mentionedRoleIris: PackedIris;
  /** The variables and managed secrets the package's matrices declare (docs/secrets.md). */
  declarations: Declarations;
}

export interface ValidateInput {
  /** Per matrix URI: N-Triples of the extensions deployed with it (validated with it). */
  extensions: Record<string, string>;
  context: { roleUris: string[]; matrixUris: string[] };
  /** WSM_BASE_IRI: statements using the service's vocabulary or its resource IRIs are violations (issue 12). */
  reservedBase: string;
  /** The IRI of the report's `sh:ValidationReport` node (its graph's); a blank node without it. */
  reportIri?: string;
}

/**
 * The report's counts and, in `report.results`, only its first violation
 * (what the command's message names): the whole report is `ntriples`, which
 * is stored; sending 15,000 result objects to the main thread would hold
 * its event loop while they are copied in. A large text goes as UTF-8 bytes
 * (`pipeline-worker.ts`), which the event loop hands on to the store's
 * thread without making it a string.
 */
export interface ValidateOutput { report: ValidationReport; ntriples: LoadData }

export interface DeriveInput {
  graphsBase: string;
  workspaceId: string;
  now: string;
  /** Per matrix (by URI): its record id and the createdAt of resources of an earlier derivation. */
  matrices: Array<{ uri: string; id: string; createdAt: Array<[string, string]> }>;
}

export interface DerivedOutput {
  uri: string;
  /** The matrix as installed (its own triples, no extensions), N-Triples (as UTF-8 bytes when large: `pipeline-worker.ts`). */
  matrixNTriples: LoadData;
  /** The derived graph, N-Triples (the same). */
  derivedNTriples: LoadData;
  roleCount: number;
  agentCount: number;
  /** Resource IRIs of the derived roles and agent principals. */
  roleIris: string[];
  principalIris: string[];
}

const objectsOf = (quads: Quad[], subject: string, predicates: string[]): string[] =>
  [...new Set(quads.filter((q) => q.subject.value === subject && predicates.includes(q.predicate.value)).map((q) => q.object.value))];

/**
 * Checks every term the store will be given with the store's own term
 * constructors (which refuse what its loader refuses: a malformed IRI such as
 * `<http://a/%zz>` that the Turtle parser let through, an invalid language
 * tag), so a load can never be refused half-way. Throws a StepFailure naming
 * the term and the file.
 */
export function checkTerms(quads: Quad[], source: string, options: { irisChecked?: boolean } = {}): void {
  const seen = new Set<string>();
  const check = (term: Term) => {
    // IRIs (and datatypes) `parseTurtle` already checked the same way: only language tags are left.
    if (options.irisChecked && (term.termType !== 'Literal' || !(term as { language?: string }).language)) return;
    const key = term.termType === 'Literal' ? `L${(term as { language?: string }).language ?? ''}\u0000${(term as { datatype?: Term }).datatype?.value ?? ''}` : `${term.termType[0]}${term.value}`;
    if (seen.has(key)) return;
    seen.add(key);
    try {
      if (term.termType === 'NamedNode') oxigraph.namedNode(term.value);
      else if (term.termType === 'Literal') {
        const lit = term as unknown as { language?: string; datatype?: Term };
        if (lit.language) oxigraph.literal('x', lit.language);
        else if (lit.datatype) oxigraph.namedNode(lit.datatype.value);
      }
    } catch (err) {
      const what = term.termType === 'Literal' ? `the language tag or datatype of a literal ("${term.value.slice(0, 80)}")` : `the IRI <${term.value.slice(0, 300)}>`;
      throw failure(`${source}: ${what} is not valid: ${(err as Error).message}`, `Fix it in ${source} and install again; nothing was changed.`);
    }
  };
  for (const q of quads) {
    check(q.subject);
    check(q.predicate);
    check(q.object);
  }
}

function* allQuads(parsed: Array<{ quads: Quad[] }>): Generator<Quad> {
  for (const p of parsed) yield* p.quads;
}

class Failure extends Error {
  constructor(readonly step: StepFailure) { super(step.failure.message); }
}
const failure = (message: string, hint?: string) => new Failure({ failure: { message, ...(hint ? { hint } : {}) } });

/** Turns a Failure (or a BAD_REQUEST from the Turtle parser) into a StepFailure; rethrows anything else. */
export function asStepFailure(err: unknown, hint?: string): StepFailure {
  if (err instanceof Failure) return err.step;
  if (err instanceof AppError) return { failure: { message: err.message, ...(hint ? { hint } : {}) } };
  throw err;
}

/** One job's state between its steps. */
export class PipelineSession {
  private parsed: Array<{ uri: string; name: string; quads: Quad[] }> = [];
  private extensionQuads = new Map<string, Quad[]>();

  parse(input: ParseInput): ParseOutput | StepFailure {
    this.parsed = [];
    this.extensionQuads.clear();
    const mentioned = new Set<string>();
    const out: ParsedMatrix[] = [];
    for (const m of input.matrices) {
      let quads: Quad[];
      try {
        quads = parseTurtle(typeof m.text === 'string' ? m.text : matrixText(m.text), { baseIri: m.uri, source: m.path });
        checkTerms(quads, m.path, { irisChecked: true });
      } catch (err) {
        return asStepFailure(err, `Fix the Turtle in ${m.path} and install again.`);
      }
      for (const q of quads) {
        if (q.subject.termType === 'NamedNode') mentioned.add(q.subject.value);
        if (q.object.termType === 'NamedNode') mentioned.add(q.object.value);
      }
      this.parsed.push({ uri: m.uri, name: m.name, quads });
      out.push({
        uri: m.uri,
        tripleCount: quads.length,
        imports: objectsOf(quads, m.uri, [MTX.imports]),
        description: objectsOf(quads, m.uri, [RDFS.comment, DCTERMS.description])[0] ?? null,
      });
    }
    const graphs = new Graphs(input.roleIrisOf.graphsBase);
    const roleIris: string[] = [];
    for (const u of mentioned) roleIris.push(graphs.resource('role', derivedIds.role(input.roleIrisOf.workspaceId, u)));
    const declarations = extractDeclarations(allQuads(this.parsed), input.matrices.map((m) => m.uri));
    return { matrices: out, mentioned: packIris(mentioned), mentionedRoleIris: packIris(roleIris), declarations };
  }

  async validate(input: ValidateInput): Promise<ValidateOutput | StepFailure> {
    this.extensionQuads.clear();
    for (const [uri, nt] of Object.entries(input.extensions)) {
      if (!nt) continue;
      const quads = new Parser({ format: 'application/n-triples' }).parse(nt);
      try {
        checkTerms(quads, `an extension of <${uri}>`);
      } catch (err) {
        return asStepFailure(err);
      }
      this.extensionQuads.set(uri, quads);
    }
    const matrices = this.parsed.map((p) => ({ uri: p.uri, name: p.name, quads: [...p.quads, ...(this.extensionQuads.get(p.uri) ?? [])] }));
    const { report, ntriples } = await validateMatrices({ matrices, context: input.context, reserved: new ReservedTerms(input.reservedBase), ...(input.reportIri ? { reportIri: input.reportIri } : {}) });
    const first = report.results.find((r) => r.severity === 'VIOLATION');
    return { report: { ...report, results: first ? [first] : [] }, ntriples };
  }

  derive(input: DeriveInput): DerivedOutput[] {
    const graphs = new Graphs(input.graphsBase);
    const byUri = new Map(input.matrices.map((m) => [m.uri, m]));
    return this.parsed.map((p) => {
      const m = byUri.get(p.uri);
      if (!m) throw new Error(`derive: no matrix id for <${p.uri}>`);
      const quads = [...p.quads, ...(this.extensionQuads.get(p.uri) ?? [])];
      const derived = deriveMatrix({ graphs, workspaceId: input.workspaceId, matrixId: m.id, quads, now: input.now, createdAt: new Map(m.createdAt) });
      return {
        uri: p.uri,
        matrixNTriples: quadsToNTriples(p.quads),
        derivedNTriples: derived.ntriples,
        roleCount: derived.roleIris.length,
        agentCount: derived.agentIris.length,
        roleIris: derived.roleIris,
        principalIris: derived.principalIris,
      };
    });
  }
}
