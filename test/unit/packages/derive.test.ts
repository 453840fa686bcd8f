import { expect } from 'chai';
import oxigraph from 'oxigraph';
import { Graphs } from '../../../src/rdf/graphs.js';
import { stableId } from '../../../src/rdf/ids.js';
import { PREFIXES } from '../../../src/rdf/vocab.js';
import { parseTurtle } from '../../../src/rdf/turtle.js';
import { deriveMatrix, type DeriveInput } from '../../../src/packages/derive.js';
import { trackingTurtle, reportingTurtle, TRACKING_URI, TRACKING_NS, REPORTING_URI } from '../../helpers/matrices.js';

const graphs = new Graphs('https://wsm.example.org/');
const W = 'a3c1f0d2-5b7e-4c1a-9f00-1d2e3f4a5b6c';
const M = stableId('matrix', W, TRACKING_URI);
const DERIVED = graphs.derived(W, M);

function derive(turtle: string, extra: Partial<DeriveInput> = {}) {
  return deriveMatrix({ graphs, workspaceId: W, matrixId: M, quads: parseTurtle(turtle), now: '2026-11-23T10:00:00.251Z', ...extra });
}

/** Loads the derived N-Triples into a real store, as the service does, and answers SELECT rows as plain objects. */
function loaded(ntriples: string) {
  const store = new oxigraph.Store();
  store.load(ntriples, { format: 'application/n-triples', to_graph_name: oxigraph.namedNode(DERIVED) });
  return (query: string): Array<Record<string, string>> => {
    const rows = store.query(`${PREFIXES}${query}`) as Array<Map<string, { value: string }>>;
    return rows.map((row) => Object.fromEntries([...row.entries()].map(([k, v]) => [k, v.value])));
  };
}

describe('packages/derive', () => {
  it('derives a role record per iam:Role with the documented stable id, label, description and matrix', () => {
    const result = derive(trackingTurtle());
    const roleId = stableId('role', W, `${TRACKING_NS}ProjectManager`);
    expect(result.roleIris).to.deep.equal(['Developer', 'ProjectManager', 'Reporter']
      .map((name) => graphs.resource('role', stableId('role', W, `${TRACKING_NS}${name}`))));
    const select = loaded(result.ntriples);
    const rows = select(`SELECT ?id ?uri ?label ?description ?matrix ?workspace ?created ?updated WHERE {
      GRAPH <${DERIVED}> { <${graphs.resource('role', roleId)}> a wsm:Role ; wsm:id ?id ; wsm:uri ?uri ; wsm:label ?label ;
        wsm:description ?description ; wsm:matrix ?matrix ; wsm:workspace ?workspace ; wsm:createdAt ?created ; wsm:updatedAt ?updated } }`);
    expect(rows).to.deep.equal([{
      id: roleId,
      uri: `${TRACKING_NS}ProjectManager`,
      label: 'Project manager',
      description: 'Plans milestones, prioritises the backlog and closes releases.',
      matrix: graphs.resource('matrix', M),
      workspace: graphs.resource('workspace', W),
      created: '2026-11-23T10:00:00.251Z',
      updated: '2026-11-23T10:00:00.251Z',
    }]);
    // dcterms:description is a description too
    const developer = select(`SELECT ?d WHERE { GRAPH <${DERIVED}> { ?r wsm:uri <${TRACKING_NS}Developer> ; wsm:description ?d } }`);
    expect(developer).to.deep.equal([{ d: 'Works on issues: comments, changes status, links commits.' }]);
  });

  it('links each agent to the roles of its iam:hasRole, and gives it an AGENT principal', () => {
    const result = derive(trackingTurtle());
    const triage = graphs.resource('agent', stableId('agent', W, `${TRACKING_NS}TriageBot`));
    const release = graphs.resource('agent', stableId('agent', W, `${TRACKING_NS}ReleaseBot`));
    expect(result.agentIris).to.deep.equal([release, triage]);
    const select = loaded(result.ntriples);
    const links = select(`SELECT ?agent ?roleUri WHERE { GRAPH <${DERIVED}> {
        ?a a wsm:Agent ; wsm:uri ?agent ; wsm:role ?r . ?r wsm:uri ?roleUri } } ORDER BY ?agent ?roleUri`);
    expect(links).to.deep.equal([
      { agent: `${TRACKING_NS}ReleaseBot`, roleUri: `${TRACKING_NS}Developer` },
      { agent: `${TRACKING_NS}TriageBot`, roleUri: `${TRACKING_NS}ProjectManager` },
      { agent: `${TRACKING_NS}TriageBot`, roleUri: `${TRACKING_NS}Reporter` },
    ]);
    const principalId = stableId('principal', W, 'agent', `${TRACKING_NS}TriageBot`);
    const principals = select(`SELECT ?p ?id ?type ?actor WHERE { GRAPH <${DERIVED}> {
        ?p a wsm:Principal ; wsm:id ?id ; wsm:principalType ?type ; wsm:actor ?actor ; wsm:workspace ?w ; wsm:createdAt ?c } } ORDER BY ?id`);
    expect(principals).to.have.length(2);
    expect(principals).to.deep.include({ p: graphs.resource('principal', principalId), id: principalId, type: 'AGENT', actor: triage });
    expect(result.principalIris).to.include(graphs.resource('principal', principalId));
    const agentLabel = select(`SELECT ?l WHERE { GRAPH <${DERIVED}> { <${triage}> wsm:label ?l ; wsm:matrix <${graphs.resource('matrix', M)}> } }`);
    expect(agentLabel).to.deep.equal([{ l: 'Triage bot' }]);
  });

  it('gives the same ids and the same graph on every derivation (a reinstall keeps assignments valid)', () => {
    const first = derive(trackingTurtle());
    const second = derive(trackingTurtle());
    expect(second.ntriples).to.equal(first.ntriples);
    expect(second.roleIris).to.deep.equal(first.roleIris);
    // another workspace gets other ids for the same matrix
    const elsewhere = deriveMatrix({ graphs, workspaceId: 'other-ws', matrixId: M, quads: parseTurtle(trackingTurtle()), now: '2026-11-23T10:00:00.251Z' });
    expect(elsewhere.roleIris.filter((iri) => first.roleIris.includes(iri))).to.deep.equal([]);
  });

  it('keeps createdAt of records that existed and stamps updatedAt now', () => {
    const first = derive(trackingTurtle());
    const earlier = new Map<string, string>([
      [first.roleIris[0]!, '2026-01-02T03:04:05.125Z'],
      [first.principalIris[0]!, '2026-02-03T04:05:06.751Z'],
    ]);
    const again = derive(trackingTurtle(), { now: '2026-11-24T00:00:00.501Z', createdAt: earlier });
    const select = loaded(again.ntriples);
    const role = select(`SELECT ?c ?u WHERE { GRAPH <${DERIVED}> { <${first.roleIris[0]}> wsm:createdAt ?c ; wsm:updatedAt ?u } }`);
    expect(role).to.deep.equal([{ c: '2026-01-02T03:04:05.125Z', u: '2026-11-24T00:00:00.501Z' }]);
    const principal = select(`SELECT ?c WHERE { GRAPH <${DERIVED}> { <${first.principalIris[0]}> wsm:createdAt ?c } }`);
    expect(principal).to.deep.equal([{ c: '2026-02-03T04:05:06.751Z' }]);
    const fresh = select(`SELECT ?c WHERE { GRAPH <${DERIVED}> { <${first.roleIris[1]}> wsm:createdAt ?c } }`);
    expect(fresh).to.deep.equal([{ c: '2026-11-24T00:00:00.501Z' }]);
    const typed = select(`SELECT (DATATYPE(?c) AS ?t) WHERE { GRAPH <${DERIVED}> { <${first.roleIris[0]}> wsm:createdAt ?c } }`);
    expect(typed).to.deep.equal([{ t: 'http://www.w3.org/2001/XMLSchema#dateTime' }]);
  });

  it('points wsm:role at the stable id of a role another matrix defines', () => {
    const reportingId = stableId('matrix', W, REPORTING_URI);
    const result = deriveMatrix({ graphs, workspaceId: W, matrixId: reportingId, quads: parseTurtle(reportingTurtle()), now: '2026-11-23T10:00:00.251Z' });
    expect(result.roleIris).to.deep.equal([]);
    expect(result.ntriples).to.include(`<${graphs.resource('role', stableId('role', W, `${TRACKING_NS}Reporter`))}>`);
    expect(result.ntriples).to.include(`<${graphs.resource('matrix', reportingId)}>`);
  });

  it('keeps user text intact (quotes, newlines, angle brackets) and picks labels predictably', () => {
    const turtle = trackingTurtle({
      extra: `pt:Hostile a iam:Role ;
  rdfs:label "Chef \\"de\\" projet"@fr , "Lead <script> \\"x\\" } ;"@en ;
  rdfs:comment """Line one.
Line two with > and <.""" .
pt:Plain a iam:Role ; rdfs:label "Zed"@de , "Plain" .
pt:Nameless a iam:Role .`,
    });
    const select = loaded(derive(turtle).ntriples);
    const hostile = select(`SELECT ?l ?d WHERE { GRAPH <${DERIVED}> { ?r wsm:uri <${TRACKING_NS}Hostile> ; wsm:label ?l ; wsm:description ?d } }`);
    expect(hostile).to.deep.equal([{ l: 'Lead <script> "x" } ;', d: 'Line one.\nLine two with > and <.' }]);
    const plain = select(`SELECT ?l WHERE { GRAPH <${DERIVED}> { ?r wsm:uri <${TRACKING_NS}Plain> ; wsm:label ?l } }`);
    expect(plain).to.deep.equal([{ l: 'Plain' }]);
    const nameless = select(`SELECT ?l WHERE { GRAPH <${DERIVED}> { ?r wsm:uri <${TRACKING_NS}Nameless> ; wsm:label ?l } }`);
    expect(nameless).to.deep.equal([{ l: 'Nameless' }]);
  });

  it('skips roles and agents named by blank nodes', () => {
    const result = derive(trackingTurtle({ extra: '[] a iam:Role ; rdfs:label "Anonymous" . [] a iam:Agent ; rdfs:label "Ghost" ; iam:hasRole pt:Developer .' }));
    expect(result.roleIris).to.have.length(3);
    expect(result.agentIris).to.have.length(2);
    expect(result.ntriples).to.not.include('Anonymous');
    expect(result.ntriples).to.not.include('_:');
  });
});
