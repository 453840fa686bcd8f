/**
 * Realistic matrix specifications (project-tracking style) for unit tests of
 * validation and derivation. Each builder returns Turtle; tests break one
 * thing at a time by passing options.
 */
export const TRACKING_URI = 'https://example.org/matrices/project-tracking';
export const TRACKING_NS = 'https://example.org/matrices/project-tracking#';
export const REPORTING_URI = 'https://example.org/matrices/reporting';

const PREFIXES = `@prefix mtx: <https://poliglot.io/os/spec/matrix#> .
@prefix iam: <https://poliglot.io/os/spec/iam#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix dcterms: <http://purl.org/dc/terms/> .
@prefix pt: <${TRACKING_NS}> .
`;

export interface TrackingOptions {
  /** Leave out the label of pt:ProjectManager. */
  managerWithoutLabel?: boolean;
  /** Extra Turtle appended (prefixes above are in scope). */
  extra?: string;
  /** Imports of the matrix. */
  imports?: string[];
}

/** The project-tracking matrix: three roles, two agents holding them. */
export function trackingTurtle(options: TrackingOptions = {}): string {
  const imports = (options.imports ?? []).map((uri) => `  mtx:imports <${uri}> ;\n`).join('');
  return `${PREFIXES}
<${TRACKING_URI}> a mtx:Matrix ;
${imports}  rdfs:label "Project tracking"@en ;
  rdfs:comment "Issues, milestones and the people and bots who move them." .

pt:ProjectManager a iam:Role ;
${options.managerWithoutLabel ? '' : '  rdfs:label "Project manager" ;\n'}  rdfs:comment "Plans milestones, prioritises the backlog and closes releases." .

pt:Developer a iam:Role ;
  rdfs:label "Developer" ;
  dcterms:description "Works on issues: comments, changes status, links commits." .

pt:Reporter a iam:Role ;
  rdfs:label "Reporter" ;
  rdfs:comment "Files issues and follows their progress." .

pt:TriageBot a iam:Agent ;
  rdfs:label "Triage bot" ;
  rdfs:comment "Labels new issues and assigns them to a milestone." ;
  iam:hasRole pt:ProjectManager , pt:Reporter .

pt:ReleaseBot a iam:Agent ;
  rdfs:label "Release bot" ;
  rdfs:comment "Tags releases when a milestone closes." ;
  iam:hasRole pt:Developer .
${options.extra ?? ''}`;
}

/** A second matrix of the same package that imports project tracking and reuses its roles. */
export function reportingTurtle(): string {
  return `${PREFIXES}
@prefix rp: <${REPORTING_URI}#> .
<${REPORTING_URI}> a mtx:Matrix ;
  mtx:imports <${TRACKING_URI}> ;
  rdfs:label "Reporting" ;
  rdfs:comment "Weekly progress reports over project tracking." .

rp:ReportBot a iam:Agent ;
  rdfs:label "Report bot" ;
  rdfs:comment "Sends the weekly status report." ;
  iam:hasRole pt:Reporter .
`;
}
