/**
 * SHACL validation of a package's matrices (docs/packages.md, "Validation"): the shapes
 * of `shapes/` against the union of the package's matrix files plus what the
 * workspace already holds (its roles and matrices), with shacl-engine on an
 * n3 Store copy of the data.
 *
 * Decisions (docs/packages.md, "Validation"):
 * - `conforms` is "no violation": warnings and infos are reported but do not
 *   fail an install. The stored `sh:conforms` says the same, so the RDF and
 *   the JSON report agree.
 * - Roles and matrices of the workspace are in the data graph only so that
 *   `sh:class` can see them; results about nodes that only the workspace
 *   defines are dropped (they were validated when they were installed).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DataFactory, Parser, Store, Writer, type Quad } from 'n3';
import type { Term } from '@rdfjs/types';
import { Validator as ShaclEngine } from 'shacl-engine';
import { DCTERMS, IAM, MTX, RDF, RDFS, SH, WSM, XSD } from '../rdf/vocab.js';
import { parseTurtle } from '../rdf/turtle.js';
import { ReservedTerms } from '../rdf/reserved.js';
import type { BindingValue } from '../store/store.js';

export type Severity = 'VIOLATION' | 'WARNING' | 'INFO';

export interface ValidationResult {
  severity: Severity;
  focusNode: string | null;
  path: string | null;
  value: string | null;
  message: string;
  sourceShape: string | null;
}

export interface ValidationReport {
  conforms: boolean;
  violationCount: number;
  warningCount: number;
  infoCount: number;
  results: ValidationResult[];
}

export interface ValidationInput {
  /** The package's matrices: manifest URI and name, and the quads of its Turtle file. */
  matrices: Array<{ uri: string; name: string; quads: Quad[] }>;
  /** What the workspace holds outside this package: role URIs and matrix URIs. */
  context: { roleUris: string[]; matrixUris: string[] };
  /** IRIs the package may not use (the service's vocabulary and resource IRIs): each use is a violation. */
  reserved?: ReservedTerms;
  /** Build and read the engine's own report graph even where the results can be written directly (tests compare the two). */
  viaEngineReportGraph?: boolean;
  /**
   * The IRI of the report node (`sh:ValidationReport`); a blank node without
   * it. With an IRI, each result and the blank nodes it holds stand apart,
   * so the store can load a large report in pieces (a blank node linking
   * every result would make the whole report one piece).
   */
  reportIri?: string;
}

const sh = (term: string) => `${SH.ns}${term}`;
const RDF_FIRST = `${RDF.ns}first`;
const RDF_REST = `${RDF.ns}rest`;
const RDF_NIL = `${RDF.ns}nil`;

const SEVERITIES: Record<string, Severity> = {
  [sh('Violation')]: 'VIOLATION',
  [sh('Warning')]: 'WARNING',
  [sh('Info')]: 'INFO',
};
const SEVERITY_ORDER: Record<Severity, number> = { VIOLATION: 0, WARNING: 1, INFO: 2 };

/** Files of the shapes graph, in `shapes/` at the project root. */
export const SHAPE_FILES = ['matrix.ttl', 'iam.ttl', 'declarations.ttl'].map((name) => fileURLToPath(new URL(`../../shapes/${name}`, import.meta.url)));

let shapesCache: Quad[] | null = null;

/** The shapes graph (parsed once). */
export function shapesQuads(): Quad[] {
  if (!shapesCache) {
    shapesCache = SHAPE_FILES.flatMap((file) => parseTurtle(readFileSync(file, 'utf8'), { source: file }));
  }
  return shapesCache;
}

const WSMSH = 'https://w3id.org/wsm/shapes#';
/**
 * Shapes checked on each matrix file alone rather than on the package: "the
 * file of a manifest entry declares its URI `a mtx:Matrix`".
 */
const PER_FILE_SHAPES = new Set([`${WSMSH}ManifestMatrixShape`]);

interface Shapes { store: Store; validator: ShaclEngine }
let shapesGraphsCache: { packageShapes: Shapes; fileShapes: Shapes } | null = null;

/**
 * The two shapes graphs and their validators, built once: building a
 * validator (its shapes graph) costs more than validating a small package.
 * A validator's `validate` runs synchronously after its first await, so
 * concurrent validations do not mix their data graphs.
 */
function shapesGraphs(): { packageShapes: Shapes; fileShapes: Shapes } {
  if (!shapesGraphsCache) {
    const all = shapesQuads();
    const make = (quads: Quad[]): Shapes => {
      const store = new Store(quads);
      return { store, validator: new ShaclEngine(store, { factory: ENGINE_FACTORY }) };
    };
    shapesGraphsCache = {
      packageShapes: make(all.filter((q) => !PER_FILE_SHAPES.has(q.subject.value))),
      fileShapes: make(all.filter((q) => PER_FILE_SHAPES.has(q.subject.value))),
    };
  }
  return shapesGraphsCache;
}

const { namedNode, literal, blankNode, quad } = DataFactory;

/** What the SHACL engine builds its report with: n3's terms, and n3 stores as datasets. */
const ENGINE_FACTORY = { ...DataFactory, dataset: (quads?: Quad[]) => new Store(quads) };

/** Objects of (subject, predicate) in a quad lookup. */
type Lookup = (subject: Term, predicate: string) => Term[];

function storeLookup(store: Store): Lookup {
  return (subject, predicate) => store.getObjects(subject, namedNode(predicate), null);
}

/**
 * A term as a report string: an IRI, a literal's lexical form, or for a blank
 * node `[]`, with its label when the report carries one (`[ rdfs:label "x" ]`).
 * Blank node labels are not used: a store renames them, the text must not change.
 */
function termText(term: Term | undefined, lookup: Lookup): string | null {
  if (!term) return null;
  if (term.termType !== 'BlankNode') return term.value;
  const label = lookup(term, RDFS.label).find((t) => t.termType === 'Literal');
  return label ? `[ rdfs:label ${JSON.stringify(label.value)} ]` : '[]';
}

/**
 * A SHACL property path as text, in SPARQL property-path syntax:
 * `<iri>` paths are their IRI, `^p` inverse, `p1/p2` sequence, `p1|p2`
 * alternative, `p*`, `p+`, `p?`.
 */
function pathText(term: Term | undefined, lookup: Lookup, depth = 0): string | null {
  if (!term) return null;
  if (term.termType === 'NamedNode') return term.value;
  if (term.termType !== 'BlankNode' || depth > 8) return termText(term, lookup);
  const one = (predicate: string) => lookup(term, predicate)[0];
  const wrap = (inner: Term | undefined) => {
    const text = pathText(inner, lookup, depth + 1);
    return text && inner?.termType === 'BlankNode' ? `(${text})` : text;
  };
  const inverse = one(sh('inversePath'));
  if (inverse) return `^${wrap(inverse)}`;
  const alternatives = one(sh('alternativePath'));
  if (alternatives) return listItems(alternatives, lookup).map(wrap).join('|');
  for (const [predicate, suffix] of [['zeroOrMorePath', '*'], ['oneOrMorePath', '+'], ['zeroOrOnePath', '?']] as const) {
    const inner = one(sh(predicate));
    if (inner) return `${wrap(inner)}${suffix}`;
  }
  const first = lookup(term, RDF_FIRST)[0];
  if (first) return listItems(term, lookup).map(wrap).join('/');
  return termText(term, lookup);
}

function listItems(head: Term, lookup: Lookup): Term[] {
  const items: Term[] = [];
  let node: Term | undefined = head;
  while (node && node.value !== RDF_NIL && items.length < 100) {
    const first = lookup(node, RDF_FIRST)[0];
    if (!first) break;
    items.push(first);
    node = lookup(node, RDF_REST)[0];
  }
  return items;
}

/** `localeCompare` with one collator (what `localeCompare` builds per call): a report of 15,000 results is sorted in one go. */
const collate = new Intl.Collator().compare;

function compareResults(a: ValidationResult, b: ValidationResult): number {
  return SEVERITY_ORDER[a.severity] - SEVERITY_ORDER[b.severity]
    || collate(a.focusNode ?? '', b.focusNode ?? '')
    || collate(a.path ?? '', b.path ?? '')
    || collate(a.value ?? '', b.value ?? '')
    || collate(a.message, b.message)
    || collate(a.sourceShape ?? '', b.sourceShape ?? '');
}

function summarize(results: ValidationResult[]): ValidationReport {
  const sorted = [...results].sort(compareResults);
  const count = (severity: Severity) => sorted.filter((r) => r.severity === severity).length;
  const violationCount = count('VIOLATION');
  return { conforms: violationCount === 0, violationCount, warningCount: count('WARNING'), infoCount: count('INFO'), results: sorted };
}

/** Reads one sh:ValidationResult node. */
function readResult(node: Term, lookup: Lookup): ValidationResult {
  const one = (predicate: string) => lookup(node, sh(predicate))[0];
  const messages = lookup(node, sh('resultMessage'));
  const message = (messages.find((m) => m.termType === 'Literal' && (m as { language?: string }).language === 'en')
    ?? messages[0])?.value;
  return {
    severity: SEVERITIES[one('resultSeverity')?.value ?? ''] ?? 'VIOLATION',
    focusNode: termText(one('focusNode'), lookup),
    path: pathText(one('resultPath'), lookup),
    value: termText(one('value'), lookup),
    message: message ?? 'Constraint not satisfied.',
    sourceShape: termText(one('sourceShape'), lookup),
  };
}

/** The quads reachable from `start` through blank nodes (its concise bounded description). */
function describe(store: Store, start: Term, out: Quad[], seen = new Set<string>()): void {
  const key = `${start.termType}:${start.value}`;
  if (seen.has(key)) return;
  seen.add(key);
  for (const q of store.getQuads(start, null, null, null)) {
    out.push(quad(q.subject, q.predicate, q.object));
    if (q.object.termType === 'BlankNode') describe(store, q.object, out, seen);
  }
}

/** What the SHACL engine's `validate` answers (shacl-engine's Report and Result, as far as they are read here). */
interface EngineResult {
  focusNode: { terms: Term[] };
  severity: Term;
  source: Term[];
  constraintComponent: Term;
  shape: { ptr: { terms: Term[] } };
  message: Term[];
  path: Array<{ quantifier: string; start: string; predicates: Term[] }> | null | undefined;
  value?: { terms: Term[] };
}
interface EngineReport { conforms: boolean; results: EngineResult[]; dataset: unknown }

/** A result path of one step of one predicate, forward (`p`) or inverse (`^p`): what every shape of `shapes/` uses. */
function hasSimplePath(result: EngineResult): boolean {
  const path = result.path;
  return !path || (path.length === 1 && path[0]!.quantifier === 'one' && path[0]!.predicates.length === 1);
}

type ReservedUse = ReturnType<ReservedTerms['uses']> extends Iterable<infer U> ? U : never;

/**
 * The report as N-Triples and JSON straight from the engine's result objects,
 * without building its report graph: for a report of 15,000 results that graph
 * (135,000 quads added to an indexed store, then looked up again) cost more
 * than validating. The triples are the ones the engine's own report graph
 * holds, as the fallback in `validateMatrices` stores them: a result node with
 * its type, focus node, severity, source constraint(s), component, shape,
 * messages, path and value; one `[ sh:inversePath p ]` node per distinct
 * inverse path; a blank focus node or value described by its triples in the data.
 */
function directReport(reports: EngineReport[], reserved: ReservedUse[], data: Store, workspaceOnly: Set<string>, reportIri?: string): { report: ValidationReport; ntriples: string } {
  const lookup = storeLookup(data);
  const TYPE = namedNode(RDF.type);
  const P = {
    result: namedNode(sh('result')), focusNode: namedNode(sh('focusNode')), resultSeverity: namedNode(sh('resultSeverity')),
    sourceConstraint: namedNode(sh('sourceConstraint')), sourceConstraintComponent: namedNode(sh('sourceConstraintComponent')),
    sourceShape: namedNode(sh('sourceShape')), resultMessage: namedNode(sh('resultMessage')), resultPath: namedNode(sh('resultPath')),
    value: namedNode(sh('value')), inversePath: namedNode(sh('inversePath')),
  };
  const ValidationResultClass = namedNode(sh('ValidationResult'));
  interface Kept { result: ValidationResult; quads: (node: Term) => Quad[] }
  const kept: Kept[] = [];
  const englishFirst = (messages: Term[]) => (messages.find((m) => m.termType === 'Literal' && (m as { language?: string }).language === 'en') ?? messages[0])?.value;
  for (const r of reports) {
    for (const res of r.results) {
      const focus = res.focusNode.terms[0];
      if (focus && focus.termType === 'NamedNode' && workspaceOnly.has(focus.value)) continue;
      const step = res.path?.[0];
      const predicate = step?.predicates[0];
      const inverse = step?.start === 'object';
      const value = res.value?.terms[0];
      kept.push({
        result: {
          severity: SEVERITIES[res.severity.value] ?? 'VIOLATION',
          focusNode: termText(focus, lookup),
          path: predicate ? (inverse ? `^${predicate.value}` : predicate.value) : null,
          value: termText(value, lookup),
          message: englishFirst(res.message) ?? 'Constraint not satisfied.',
          sourceShape: termText(res.shape.ptr.terms[0], emptyLookup),
        },
        quads: (node) => {
          const out: Quad[] = [quad(node as never, TYPE, ValidationResultClass)];
          for (const t of res.focusNode.terms) out.push(quad(node as never, P.focusNode, t as never));
          out.push(quad(node as never, P.resultSeverity, res.severity as never));
          for (const t of res.source) out.push(quad(node as never, P.sourceConstraint, t as never));
          out.push(quad(node as never, P.sourceConstraintComponent, res.constraintComponent as never));
          for (const t of res.shape.ptr.terms) out.push(quad(node as never, P.sourceShape, t as never));
          for (const m of res.message) out.push(quad(node as never, P.resultMessage, m as never));
          if (predicate) out.push(quad(node as never, P.resultPath, (inverse ? inversePathNode(predicate) : predicate) as never));
          for (const t of res.value?.terms ?? []) out.push(quad(node as never, P.value, t as never));
          return out;
        },
      });
    }
  }
  for (const use of reserved) {
    const focus = use.quad.subject.termType === 'BlankNode' ? blankNode(use.quad.subject.value) : namedNode(use.subject);
    const message = ReservedTerms.message(use);
    kept.push({
      result: { severity: 'VIOLATION', focusNode: termText(focus, lookup), path: use.predicate, value: use.term, message, sourceShape: null },
      quads: (node) => [
        quad(node as never, TYPE, ValidationResultClass),
        quad(node as never, P.resultSeverity, namedNode(sh('Violation'))),
        quad(node as never, P.focusNode, focus),
        quad(node as never, P.resultPath, namedNode(use.predicate)),
        quad(node as never, P.value, namedNode(use.term)),
        quad(node as never, P.resultMessage, literal(message)),
      ],
    });
  }
  kept.sort((a, b) => compareResults(a.result, b.result));
  // A `[ sh:inversePath p ]` node of each result's own, as the engine gives them: one shared by every result would
  // link them all into one group of blank nodes, which the store must load in one piece.
  const pending: Quad[] = [];
  function inversePathNode(predicate: Term): Term {
    const node = blankNode();
    pending.push(quad(node as never, P.inversePath, predicate as never));
    return node;
  }
  const results = kept.map((k) => k.result);
  const report = summarize(results);
  const reportNode = reportIri ? namedNode(reportIri) : blankNode();
  const out: Quad[] = [
    quad(reportNode, TYPE, namedNode(sh('ValidationReport'))),
    quad(reportNode, namedNode(sh('conforms')), literal(String(report.conforms), namedNode(XSD.boolean))),
  ];
  const described = new Set<string>();
  for (const k of kept) {
    const node = blankNode();
    out.push(quad(reportNode, P.result, node));
    for (const q of k.quads(node)) {
      out.push(q);
      // A blank focus node or value: its own triples from the data, so it can still be told apart.
      if (q.object.termType === 'BlankNode' && q.predicate.value !== P.resultPath.value) describe(data, q.object, out, described);
    }
    if (pending.length) out.push(...pending.splice(0));
  }
  const writer = new Writer({ format: 'N-Triples' });
  return { report, ntriples: writer.quadsToString(out) };
}

const emptyLookup: Lookup = () => [];

/**
 * Validates the matrices of a package against the shapes of `shapes/`.
 * Returns the JSON report and the `sh:ValidationReport` as N-Triples (to be
 * stored; `reportFromNTriples` reads it back to the same JSON).
 */
export async function validateMatrices(input: ValidationInput): Promise<{ report: ValidationReport; ntriples: string }> {
  const data = new Store();
  const packageRoles = new Set<string>();
  const packageMatrices = new Set<string>();
  for (const matrix of input.matrices) {
    for (const q of matrix.quads) {
      data.addQuad(q.subject, q.predicate, q.object);
      if (q.predicate.value === RDF.type && q.subject.termType === 'NamedNode') {
        if (q.object.value === IAM.Role) packageRoles.add(q.subject.value);
        if (q.object.value === MTX.Matrix) packageMatrices.add(q.subject.value);
      }
    }
  }
  for (const matrix of input.matrices) {
    data.addQuad(namedNode(matrix.uri), namedNode(WSM.matrixName), literal(matrix.name));
  }
  // Nodes known only from the workspace: typed so sh:class sees them, not validated again.
  // Only those the package's triples mention can be reached from the package's nodes (every
  // path of the shapes starts at a package node); the others would only add results about
  // workspace-only nodes, which are dropped, at a cost that grows with the workspace.
  const mentioned = new Set<string>();
  for (const matrix of input.matrices) {
    for (const q of matrix.quads) {
      if (q.subject.termType === 'NamedNode') mentioned.add(q.subject.value);
      if (q.object.termType === 'NamedNode') mentioned.add(q.object.value);
    }
  }
  const workspaceOnly = new Set<string>();
  let contextTriples = 0;
  for (const uri of input.context.roleUris) {
    if (!mentioned.has(uri)) continue;
    contextTriples++;
    data.addQuad(namedNode(uri), namedNode(RDF.type), namedNode(IAM.Role));
    if (!packageRoles.has(uri)) workspaceOnly.add(uri);
  }
  // A matrix of the manifest is the package's (also when the workspace has an earlier version of
  // it): only what the package's files say about it counts.
  const manifestUris = new Set(input.matrices.map((m) => m.uri));
  for (const uri of input.context.matrixUris) {
    if (manifestUris.has(uri) || !mentioned.has(uri)) continue;
    contextTriples++;
    data.addQuad(namedNode(uri), namedNode(RDF.type), namedNode(MTX.Matrix));
    if (!packageMatrices.has(uri)) workspaceOnly.add(uri);
  }

  // The package's shapes on the union; the per-file shapes on each file with only its own manifest entry.
  const { packageShapes, fileShapes } = shapesGraphs();
  const engineReports = [await packageShapes.validator.validate({ dataset: data }) as EngineReport];
  // A package of one matrix whose union got nothing from the workspace holds exactly that
  // file and its entry: the union is read again rather than indexed twice (45,000 quads of
  // a large matrix cost a few hundred milliseconds to index).
  const fileIsUnion = input.matrices.length === 1 && contextTriples === 0;
  for (const matrix of input.matrices) {
    const file = fileIsUnion ? data : new Store();
    if (!fileIsUnion) {
      for (const q of matrix.quads) file.addQuad(q.subject, q.predicate, q.object);
      file.addQuad(namedNode(matrix.uri), namedNode(WSM.matrixName), literal(matrix.name));
    }
    engineReports.push(await fileShapes.validator.validate({ dataset: file }) as EngineReport);
  }
  const reservedUses = input.reserved ? [...input.reserved.uses(input.matrices.flatMap((m) => m.quads))] : [];
  if (!input.viaEngineReportGraph && engineReports.every((r) => r.results.every(hasSimplePath))) {
    return directReport(engineReports, reservedUses, data, workspaceOnly, input.reportIri);
  }
  // A result with a path other than `p` or `^p` (none of the shapes of `shapes/` has one today):
  // the engine's own report graph is built and read back.
  // The package run's report store is the one the results are read from; the per-file runs' few results are added to it.
  const engineStore = engineReports[0]!.dataset as Store;
  for (const other of engineReports.slice(1)) engineStore.addQuads((other.dataset as Store).getQuads(null, null, null, null));
  // Statements using the service's vocabulary or resource IRIs: one violation each (a bounded number).
  {
    let n = 0;
    for (const use of reservedUses) {
      const node = blankNode(`reserved_${n++}`);
      const add = (predicate: string, object: Term) => engineStore.addQuad(quad(node, namedNode(sh(predicate)), object as never));
      engineStore.addQuad(quad(blankNode('reserved_report'), namedNode(sh('result')), node));
      engineStore.addQuad(quad(node, namedNode(RDF.type), namedNode(sh('ValidationResult'))));
      add('resultSeverity', namedNode(sh('Violation')));
      add('focusNode', use.quad.subject.termType === 'BlankNode' ? blankNode(use.quad.subject.value) : namedNode(use.subject));
      add('resultPath', namedNode(use.predicate));
      add('value', namedNode(use.term));
      add('resultMessage', literal(ReservedTerms.message(use)));
    }
  }
  // A blank focus node or value is described in the report by its own triples (its label, its
  // type), so the report still says which node it is once a store has renamed its blank nodes.
  for (const predicate of [sh('focusNode'), sh('value')]) {
    for (const term of engineStore.getObjects(null, namedNode(predicate), null)) {
      if (term.termType !== 'BlankNode') continue;
      const description: Quad[] = [];
      describe(data, term, description);
      engineStore.addQuads(description);
    }
  }
  const lookup = storeLookup(engineStore);
  const reportQuads: Quad[] = [];
  const reportNode = input.reportIri ? namedNode(input.reportIri) : blankNode('report');
  const kept: Array<{ node: Term; result: ValidationResult }> = [];
  for (const node of engineStore.getObjects(null, namedNode(sh('result')), null)) {
    const focus = engineStore.getObjects(node, namedNode(sh('focusNode')), null)[0];
    if (focus && focus.termType === 'NamedNode' && workspaceOnly.has(focus.value)) continue;
    kept.push({ node, result: readResult(node, lookup) });
  }
  kept.sort((a, b) => compareResults(a.result, b.result));
  // The engine gives each result its own copy of a blank-node path (`[ sh:inversePath iam:hasRole ]`), kept so:
  // a copy shared by every result would link them all into one group of blank nodes (see `reportIri`).
  for (const { node } of kept) {
    reportQuads.push(quad(reportNode, namedNode(sh('result')), node as never));
    for (const q of engineStore.getQuads(node, null, null, null)) {
      reportQuads.push(quad(q.subject, q.predicate, q.object));
      if (q.object.termType === 'BlankNode') describe(engineStore, q.object, reportQuads);
    }
  }
  const results = kept.map((k) => k.result);
  const report = summarize(results);
  reportQuads.unshift(
    quad(reportNode, namedNode(RDF.type), namedNode(sh('ValidationReport'))),
    quad(reportNode, namedNode(sh('conforms')), literal(String(report.conforms), namedNode(XSD.boolean))),
  );
  // once each, in order (a blank node shared by several results is described once)
  const seen = new Set<string>();
  const unique = reportQuads.filter((q) => {
    const key = `${q.subject.id} ${q.predicate.id} ${q.object.id}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  const writer = new Writer({ format: 'N-Triples' });
  return { report, ntriples: writer.quadsToString(unique) };
}

/** Reads a stored `sh:ValidationReport` (N-Triples, N-Quads or Turtle) back into the JSON report. */
export function reportFromNTriples(nt: string): ValidationReport {
  const store = new Store(new Parser().parse(nt));
  const lookup = storeLookup(store);
  const results = store.getObjects(null, namedNode(sh('result')), null).map((node) => readResult(node, lookup));
  return summarize(results);
}

const TURTLE_PREFIXES: Record<string, string> = {
  sh: SH.ns,
  rdf: RDF.ns,
  xsd: XSD.ns,
  rdfs: RDFS.ns,
  dcterms: DCTERMS.ns,
  mtx: MTX.ns,
  iam: IAM.ns,
  wsm: WSM.ns,
  wsmsh: WSMSH,
};

/**
 * A stored report as readable Turtle: prefixes, the report first, and each
 * result (and path) nested as a `[ ... ]` blank node.
 */
export function reportTurtle(nt: string): string {
  const store = new Store(new Parser().parse(nt));
  const writer = new Writer({ prefixes: TURTLE_PREFIXES });
  const referenced = new Map<string, number>();
  for (const q of store.getQuads(null, null, null, null)) {
    if (q.object.termType === 'BlankNode') referenced.set(q.object.value, (referenced.get(q.object.value) ?? 0) + 1);
  }
  const onStack = new Set<string>();
  const objectTerm = (term: Term): Term => {
    if (term.termType !== 'BlankNode' || referenced.get(term.value) !== 1 || onStack.has(term.value)) return term;
    onStack.add(term.value);
    const body = predicateObjects(term);
    onStack.delete(term.value);
    return writer.blank(body as never) as unknown as Term;
  };
  const lookup = storeLookup(store);
  const predicateObjects = (subject: Term) => sortedQuads(store.getQuads(subject as never, null, null, null), lookup)
    .map((q) => ({ predicate: q.predicate, object: objectTerm(q.object) }));
  const written = new Set<string>();
  const writeSubject = (subject: Term) => {
    if (written.has(subject.value)) return;
    written.add(subject.value);
    for (const { predicate, object } of predicateObjects(subject)) {
      writer.addQuad(subject as never, predicate as never, object as never);
    }
  };
  // The report(s) first, then anything not nested inside them.
  for (const report of store.getSubjects(namedNode(RDF.type), namedNode(sh('ValidationReport')), null)) writeSubject(report);
  for (const subject of store.getSubjects(null, null, null)) {
    if (subject.termType === 'BlankNode' && referenced.get(subject.value) === 1) continue;
    writeSubject(subject);
  }
  let out = '';
  writer.end((error, result: string) => { if (error) throw error; out = result; });
  return out;
}

/** rdf:type first, then by predicate; results in report order (severity, focus node, path, ...). */
function sortedQuads(quads: Quad[], lookup: Lookup): Quad[] {
  const rank = (q: Quad) => (q.predicate.value === RDF.type ? 0 : 1);
  const isResult = (q: Quad) => q.predicate.value === sh('result');
  return [...quads].sort((a, b) => rank(a) - rank(b)
    || a.predicate.value.localeCompare(b.predicate.value)
    || (isResult(a) && isResult(b) ? compareResults(readResult(a.object, lookup), readResult(b.object, lookup)) : 0));
}

/** One `sh:result` of a stored report as SPARQL JSON results give it (see `reportFromResultBindings`). */
export interface StoredResultBindings {
  severity?: BindingValue;
  focusNode?: BindingValue;
  path?: BindingValue;
  /** When `path` is a blank node `[ sh:inversePath <iri> ]`: that IRI (its text is then `^<iri>`, no lookup). */
  inversePathOf?: BindingValue;
  value?: BindingValue;
  messages: BindingValue[];
  sourceShape?: BindingValue;
}

/**
 * The JSON report from a stored report read by SPARQL (P9): one row per
 * result, with the SPARQL JSON values themselves: IRIs and
 * literals are used as the strings they are, and only blank nodes are
 * looked up (once each) in `blankNodesNTriples`, the triples of the blank
 * nodes the results point at. For reports of thousands of results.
 */
export function reportFromResultBindings(rows: StoredResultBindings[], blankNodesNTriples: string): ValidationReport {
  const store = new Store(new Parser({ format: 'application/n-triples', blankNodePrefix: '' }).parse(blankNodesNTriples));
  const lookup = storeLookup(store);
  const known = new Map<string, string | null>();
  const text = (v: BindingValue | undefined, asPath: boolean): string | null => {
    if (!v) return null;
    if (v.type !== 'bnode') return v.value;
    const key = `${asPath ? 'p' : 't'}${v.value}`;
    let out = known.get(key);
    if (out === undefined) {
      out = asPath ? pathText(blankNode(v.value), lookup) : termText(blankNode(v.value), lookup);
      known.set(key, out);
    }
    return out;
  };
  const results = rows.map((row): ValidationResult => {
    const message = (row.messages.find((m) => m.type === 'literal' && m['xml:lang'] === 'en') ?? row.messages[0])?.value;
    return {
      severity: SEVERITIES[row.severity?.value ?? ''] ?? 'VIOLATION',
      focusNode: text(row.focusNode, false),
      path: row.inversePathOf?.type === 'uri' ? `^${row.inversePathOf.value}` : text(row.path, true),
      value: text(row.value, false),
      message: message ?? 'Constraint not satisfied.',
      sourceShape: text(row.sourceShape, false),
    };
  });
  return summarize(results);
}
