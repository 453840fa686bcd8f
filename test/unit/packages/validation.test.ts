import { expect } from 'chai';
import { Parser } from 'n3';
import oxigraph from 'oxigraph';
import jsonld from 'jsonld';
import { ReservedTerms } from '../../../src/rdf/reserved.js';
import { parseTurtle } from '../../../src/rdf/turtle.js';
import {
  validateMatrices, reportFromNTriples, reportTurtle, shapesQuads, type ValidationReport, type ValidationResult,
} from '../../../src/packages/validation.js';
import { trackingTurtle, reportingTurtle, TRACKING_URI, TRACKING_NS, REPORTING_URI, type TrackingOptions } from '../../helpers/matrices.js';

const RDFS_LABEL = 'http://www.w3.org/2000/01/rdf-schema#label';
const HAS_ROLE = 'https://poliglot.io/os/spec/iam#hasRole';
const IMPORTS = 'https://poliglot.io/os/spec/matrix#imports';
const SH = 'http://www.w3.org/ns/shacl#';

const noContext = { roleUris: [], matrixUris: [] };

function tracking(options: TrackingOptions = {}) {
  return { uri: TRACKING_URI, name: 'tracking', quads: parseTurtle(trackingTurtle(options), { source: 'tracking/assembly.ttl' }) };
}

const violations = (report: ValidationReport): ValidationResult[] => report.results.filter((r) => r.severity === 'VIOLATION');

describe('packages/validation (SHACL)', () => {
  it('accepts the project-tracking matrix with no result at all', async () => {
    const { report, ntriples } = await validateMatrices({ matrices: [tracking()], context: noContext });
    expect(report).to.deep.equal({ conforms: true, violationCount: 0, warningCount: 0, infoCount: 0, results: [] });
    const store = new oxigraph.Store();
    store.load(ntriples, { format: 'application/n-triples', to_graph_name: oxigraph.namedNode('urn:report') });
    expect(store.query(`ASK { GRAPH <urn:report> { ?r a <${SH}ValidationReport> ; <${SH}conforms> true } }`)).to.equal(true);
  });

  it('reports a role without a label as a violation, with focus node and path', async () => {
    const { report } = await validateMatrices({ matrices: [tracking({ managerWithoutLabel: true })], context: noContext });
    expect(report.conforms).to.equal(false);
    expect(report.violationCount).to.equal(1);
    expect(violations(report)[0]).to.deep.include({
      focusNode: `${TRACKING_NS}ProjectManager`,
      path: RDFS_LABEL,
      value: null,
      sourceShape: 'https://w3id.org/wsm/shapes#RoleLabelShape',
    });
    expect(violations(report)[0]!.message).to.match(/role needs a text rdfs:label/);
  });

  it('reports a matrix and an agent without a label', async () => {
    const turtle = trackingTurtle({ extra: 'pt:Ops a iam:Agent ; rdfs:comment "On-call helper." ; iam:hasRole pt:Developer .' })
      .replace('rdfs:label "Project tracking"@en ;', '');
    const { report } = await validateMatrices({ matrices: [{ uri: TRACKING_URI, name: 'tracking', quads: parseTurtle(turtle) }], context: noContext });
    expect(violations(report).map((r) => [r.focusNode, r.path])).to.deep.equal([
      [TRACKING_URI, RDFS_LABEL],
      [`${TRACKING_NS}Ops`, RDFS_LABEL],
    ]);
  });

  it('reports iam:hasRole to a role defined nowhere as a violation naming the value', async () => {
    const matrix = tracking({ extra: 'pt:Auditor a iam:Agent ; rdfs:label "Auditor" ; rdfs:comment "Reads everything." ; iam:hasRole pt:Compliance .' });
    const { report } = await validateMatrices({ matrices: [matrix], context: noContext });
    expect(report.violationCount).to.equal(1);
    expect(violations(report)[0]).to.deep.include({
      focusNode: `${TRACKING_NS}Auditor`, path: HAS_ROLE, value: `${TRACKING_NS}Compliance`,
    });
    expect(violations(report)[0]!.message).to.match(/neither defined by this package nor in the workspace/);
  });

  it('accepts iam:hasRole to a role of the workspace (context.roleUris), without validating that role again', async () => {
    const workspaceRole = 'https://example.org/matrices/compliance#Compliance';
    const matrix = tracking({ extra: `pt:Auditor a iam:Agent ; rdfs:label "Auditor" ; rdfs:comment "Reads everything." ; iam:hasRole <${workspaceRole}> .` });
    const { report } = await validateMatrices({ matrices: [matrix], context: { roleUris: [workspaceRole], matrixUris: [] } });
    expect(report).to.deep.include({ conforms: true, violationCount: 0, warningCount: 0, infoCount: 0 });
  });

  it('accepts iam:hasRole and mtx:imports across the matrices of one package', async () => {
    const reporting = { uri: REPORTING_URI, name: 'reporting', quads: parseTurtle(reportingTurtle()) };
    const { report } = await validateMatrices({ matrices: [tracking(), reporting], context: noContext });
    expect(report.results).to.deep.equal([]);
    const alone = await validateMatrices({ matrices: [reporting], context: noContext });
    expect(violations(alone.report).map((r) => [r.focusNode, r.path, r.value])).to.deep.equal([
      [REPORTING_URI, IMPORTS, TRACKING_URI],
      [`${REPORTING_URI}#ReportBot`, HAS_ROLE, `${TRACKING_NS}Reporter`],
    ]);
  });

  it('reports mtx:imports of an unknown matrix, and accepts one installed in the workspace', async () => {
    const other = 'https://example.org/matrices/time-tracking';
    const matrix = tracking({ imports: [other] });
    const unknown = await validateMatrices({ matrices: [matrix], context: noContext });
    expect(unknown.report.violationCount).to.equal(1);
    expect(violations(unknown.report)[0]).to.deep.include({ focusNode: TRACKING_URI, path: IMPORTS, value: other });
    const installed = await validateMatrices({ matrices: [matrix], context: { roleUris: [], matrixUris: [other] } });
    expect(installed.report.conforms).to.equal(true);
    expect(installed.report.results).to.deep.equal([]);
  });

  it('requires each manifest matrix URI to be declared a mtx:Matrix', async () => {
    const wrongUri = { ...tracking(), uri: 'https://example.org/matrices/project-trackin' };
    const { report } = await validateMatrices({ matrices: [wrongUri], context: noContext });
    expect(violations(report).map((r) => r.focusNode)).to.deep.equal(['https://example.org/matrices/project-trackin']);
    expect(violations(report)[0]!.message).to.match(/does not declare it `a mtx:Matrix`/);
    // the matrix the file does declare is not in the manifest: an info
    expect(report.results.filter((r) => r.severity === 'INFO').map((r) => r.focusNode)).to.include(TRACKING_URI);
  });

  it('requires the file of each manifest entry itself to declare its URI, even if another file of the package does', async () => {
    const reportingElsewhere = trackingTurtle({ extra: `<${REPORTING_URI}> a mtx:Matrix ; rdfs:label "Reporting" ; rdfs:comment "Declared in the wrong file." .` });
    const emptyReporting = '@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n<https://example.org/matrices/reporting#Note> rdfs:label "Nothing else" .';
    const matrices = [
      { uri: TRACKING_URI, name: 'tracking', quads: parseTurtle(reportingElsewhere) },
      { uri: REPORTING_URI, name: 'reporting', quads: parseTurtle(emptyReporting) },
    ];
    const { report } = await validateMatrices({ matrices, context: noContext });
    expect(violations(report).map((r) => [r.focusNode, r.sourceShape])).to.deep.equal([
      [REPORTING_URI, 'https://w3id.org/wsm/shapes#ManifestMatrixShape'],
    ]);
    // a reinstall: the workspace already has the matrix, the new file still has to declare it
    const reinstall = await validateMatrices({ matrices: [matrices[1]!], context: { roleUris: [], matrixUris: [REPORTING_URI] } });
    expect(violations(reinstall.report).map((r) => r.focusNode)).to.deep.equal([REPORTING_URI]);
  });

  it('refuses blank-node roles and agents (their ids derive from the IRI)', async () => {
    const matrix = tracking({ extra: '[] a iam:Role ; rdfs:label "Anonymous" ; rdfs:comment "No IRI." .' });
    const { report } = await validateMatrices({ matrices: [matrix], context: noContext });
    expect(report.violationCount).to.equal(1);
    expect(violations(report)[0]!.focusNode).to.equal('[ rdfs:label "Anonymous" ]');
    expect(violations(report)[0]!.message).to.match(/must be named by an IRI/);
  });

  it('counts warnings and infos but still conforms', async () => {
    const matrix = tracking({
      extra: `pt:Watcher a iam:Agent ; rdfs:label "Watcher" .
pt:Guest a iam:Role ; rdfs:label "Guest" ; rdfs:comment "Read-only access." .`,
    });
    const { report, ntriples } = await validateMatrices({ matrices: [matrix], context: noContext });
    expect(report.conforms).to.equal(true);
    expect(report.violationCount).to.equal(0);
    expect(report.warningCount).to.equal(2); // Watcher: no description, no role
    expect(report.infoCount).to.equal(1); // Guest: held by no agent
    expect(report.results.map((r) => [r.severity, r.focusNode, r.path])).to.deep.equal([
      ['WARNING', `${TRACKING_NS}Watcher`, null],
      ['WARNING', `${TRACKING_NS}Watcher`, HAS_ROLE],
      ['INFO', `${TRACKING_NS}Guest`, `^${HAS_ROLE}`],
    ]);
    // the stored report says the same: sh:conforms true (no violation) and three results
    const quads = new Parser().parse(ntriples);
    expect(quads.filter((q) => q.predicate.value === `${SH}conforms`).map((q) => q.object.value)).to.deep.equal(['true']);
    expect(quads.filter((q) => q.predicate.value === `${SH}result`)).to.have.length(3);
  });

  it('reads a stored report back to the same JSON (round trip through a real store)', async () => {
    const matrix = tracking({
      managerWithoutLabel: true,
      imports: ['https://example.org/matrices/missing'],
      extra: `pt:Watcher a iam:Agent ; rdfs:label "Watcher"@en, "Beobachter"@de ; iam:hasRole pt:Nobody .
pt:Guest a iam:Role ; rdfs:label "Guest" ; rdfs:comment "Read-only access." .
[] a iam:Agent ; rdfs:label "Anonymous bot" ; iam:hasRole pt:Developer .`,
    });
    const { report, ntriples } = await validateMatrices({ matrices: [matrix], context: noContext });
    expect(report.violationCount).to.equal(4);
    expect(report.warningCount).to.equal(2);
    expect(report.infoCount).to.equal(1);
    expect(report.results.map((r) => r.focusNode)).to.include('[ rdfs:label "Anonymous bot" ]');
    const lines = ntriples.trim().split('\n');
    expect(new Set(lines).size, 'no triple written twice').to.equal(lines.length);
    // store and dump through Oxigraph, as the service does
    const store = new oxigraph.Store();
    const graph = oxigraph.namedNode('urn:report');
    store.load(ntriples, { format: 'application/n-triples', to_graph_name: graph });
    const dumped = store.dump({ format: 'application/n-triples', from_graph_name: graph });
    expect(reportFromNTriples(dumped)).to.deep.equal(report);
    expect(reportFromNTriples(ntriples)).to.deep.equal(report);
    // a dump with graph names (N-Quads) reads the same
    expect(reportFromNTriples(store.dump({ format: 'application/n-quads' }))).to.deep.equal(report);
  });

  it('writes the same report as the engine\'s own report graph, for results of every kind', async () => {
    // Violations, warnings, infos, an inverse path, blank focus nodes with labels, a result of the
    // per-file shapes (a second file not declaring its URI) and uses of reserved IRIs.
    const matrices = [
      tracking({
        managerWithoutLabel: true,
        imports: ['https://example.org/matrices/missing'],
        extra: `pt:Watcher a iam:Agent ; rdfs:label "Watcher"@en, "Beobachter"@de ; iam:hasRole pt:Nobody .
pt:Guest a iam:Role ; rdfs:label "Guest" ; rdfs:comment "Read-only access." .
[] a iam:Agent ; rdfs:label "Anonymous bot" ; iam:hasRole pt:Developer .
[] a iam:Role ; rdfs:label "Anonymous role" .
pt:Guest <https://w3id.org/wsm/ns#owner> <https://workspaces.local/users/root> .`,
      }),
      { uri: 'https://example.org/matrices/second', name: 'second', quads: parseTurtle('<https://example.org/matrices/other> a <https://poliglot.io/os/spec/matrix#Matrix> .', { source: 'second/assembly.ttl' }) },
    ];
    const input = { matrices, context: { roleUris: [`${TRACKING_NS}Developer`], matrixUris: [] }, reserved: new ReservedTerms('https://workspaces.local/') };
    const direct = await validateMatrices(input);
    const engine = await validateMatrices({ ...input, viaEngineReportGraph: true });
    expect(direct.report.violationCount).to.be.greaterThan(3);
    expect(direct.report.warningCount).to.be.greaterThan(0);
    expect(direct.report.infoCount).to.be.greaterThan(0);
    expect(direct.report.results.map((r) => r.path)).to.include(`^${HAS_ROLE}`);
    expect(direct.report.results.map((r) => r.message).join('\n')).to.match(/service's own vocabulary/);
    expect(direct.report).to.deep.equal(engine.report);
    expect(reportFromNTriples(direct.ntriples)).to.deep.equal(engine.report);
    // The same graph, whatever the blank node labels: compared in canonical form.
    // (jsonld's types only name JSON-LD input; with inputFormat it takes N-Quads text.)
    const canonical = (nt: string) => jsonld.canonize(nt as unknown as jsonld.JsonLdDocument, { algorithm: 'URDNA2015', inputFormat: 'application/n-quads' });
    expect(await canonical(direct.ntriples)).to.equal(await canonical(engine.ntriples));
  });

  it('gives readable Turtle with prefixes that parses to the same report', async () => {
    const { report, ntriples } = await validateMatrices({ matrices: [tracking({ managerWithoutLabel: true })], context: noContext });
    const turtle = reportTurtle(ntriples);
    expect(turtle).to.match(/@prefix sh: <http:\/\/www\.w3\.org\/ns\/shacl#>/);
    expect(turtle).to.include('a sh:ValidationReport');
    expect(turtle).to.include('sh:resultPath rdfs:label');
    expect(turtle).to.include('sh:resultSeverity sh:Violation');
    expect(reportFromNTriples(turtle)).to.deep.equal(report);
  });

  it('keeps a message on every shape, so every result explains itself', () => {
    const quads = shapesQuads();
    const shapes = new Set(quads.filter((q) => q.predicate.value === `${SH}path` || q.predicate.value === `${SH}targetClass`
      || q.predicate.value === `${SH}targetSubjectsOf`).map((q) => q.subject.value));
    const withMessage = new Set(quads.filter((q) => q.predicate.value === `${SH}message`).map((q) => q.subject.value));
    const named = [...shapes].filter((s) => s.startsWith('https://w3id.org/wsm/shapes#'));
    expect(named.length).to.be.greaterThan(10);
    // the shapes whose only role is to group property shapes carry no constraint of their own
    const grouping = ['https://w3id.org/wsm/shapes#ImportsShape', 'https://w3id.org/wsm/shapes#HasRoleShape'];
    expect(named.filter((s) => !withMessage.has(s) && !grouping.includes(s))).to.deep.equal([]);
  });
});
