import { expect } from 'chai';
import { bearer, type TestServer, withSeededServer, type Tokens, type SeededWorkspace } from '../helpers/server.js';
import { tinyPackage } from '../helpers/packages.js';
import { uploadAndWait, eventsOf, workspaceDump } from '../helpers/lifecycle.js';
import { reportFromNTriples } from '../../src/packages/validation.js';

const PREFIXES = `@prefix mtx: <https://poliglot.io/os/spec/matrix#> .
@prefix iam: <https://poliglot.io/os/spec/iam#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
`;

/**
 * The deployment pipeline runs in a worker thread (parse, term check, SHACL,
 * derivation) and P9 reads the stored report with SPARQL: both observed
 * through the HTTP interface.
 */
describe('packages: deployment pipeline in a worker, and the validation report read (P2, P9)', function () {
  this.timeout(120_000);
  let t: TestServer;
  let tokens: Tokens;
  let workspace: SeededWorkspace;
  withSeededServer('acme', (s) => ({ t, tokens, workspace } = s));

  it('P9 as JSON says what the stored report says: blank focus nodes by label, inverse paths, every severity', async () => {
    const uri = 'https://example.org/packages/report/main';
    const turtle = `${PREFIXES}
<${uri}> a mtx:Matrix ; rdfs:label "Report matrix" .
<${uri}#lonely> a iam:Role ; rdfs:label "Lonely" .
<${uri}#described> a iam:Role ; rdfs:label "Described" ; rdfs:comment "Held by nobody." .
[] a iam:Role ; rdfs:label "Blank role" ; rdfs:comment "Named by a blank node." .
<${uri}#bot> a iam:Agent ; rdfs:label "Bot" .
`;
    const done = await uploadAndWait(t, tokens.owner, 'acme', await tinyPackage({ name: 'report', matrices: [{ name: 'main', uri, turtle }] }));
    expect(done.status).to.equal('failed');
    const json = await t.http.get(`/api/v1/packages/acme/commands/${done.id}/validation-report`).set(bearer(tokens.member));
    expect(json.status).to.equal(200);
    const ttl = await t.http.get(`/api/v1/packages/acme/commands/${done.id}/validation-report`).set(bearer(tokens.member)).set('Accept', 'text/turtle');
    expect(ttl.status).to.equal(200);
    // The Turtle is the whole stored graph, read by the n3 reader: the JSON must say the same.
    const whole = reportFromNTriples(ttl.text);
    const entries = (severity: string) => whole.results.filter((r) => r.severity === severity)
      .map((r) => ({ focusNode: r.focusNode, path: r.path, value: r.value, message: r.message }));
    expect(json.body.data).to.deep.equal({
      conforms: whole.conforms, violationCount: whole.violationCount, warningCount: whole.warningCount, infoCount: whole.infoCount,
      violations: entries('VIOLATION'), warnings: entries('WARNING'), infos: entries('INFO'),
    });
    const data = json.body.data;
    expect(data.violations.map((v: { focusNode: string }) => v.focusNode)).to.include('[ rdfs:label "Blank role" ]');
    expect(data.infos.map((v: { path: string }) => v.path)).to.include('^https://poliglot.io/os/spec/iam#hasRole');
    expect(data.warnings.map((v: { focusNode: string }) => v.focusNode)).to.include(`${uri}#lonely`);
    expect(data.warnings.length + data.infos.length).to.be.greaterThan(2);
  });

  it('fails the command naming an IRI the store refuses (n3 accepts it), and changes nothing', async () => {
    const before = await workspaceDump(t, workspace.id);
    const uri = 'https://example.org/packages/badiri/main';
    const turtle = `${PREFIXES}
<${uri}> a mtx:Matrix ; rdfs:label "M" ; rdfs:comment "x" ; rdfs:seeAlso <http://example.org/a%zz> .
`;
    const done = await uploadAndWait(t, tokens.owner, 'acme', await tinyPackage({ name: 'badiri', matrices: [{ name: 'main', uri, turtle }] }));
    expect(done.status).to.equal('failed');
    expect(done.errorMessage).to.include('<http://example.org/a%zz>');
    expect(done.errorMessage).to.include('main/assembly.ttl');
    const events = await eventsOf(t, tokens.owner, 'acme', done.id);
    expect(events.at(-1)!.level).to.equal('ERROR');
    expect(events.at(-1)!.message).to.not.match(/internal error/);
    // (the dump leaves out the command's own record and log)
    expect(await workspaceDump(t, workspace.id)).to.deep.equal(before);
  });

  it('installs several packages at once (more than the pool has workers), each completed with its roles', async () => {
    const names = ['p1', 'p2', 'p3', 'p4'];
    const done = await Promise.all(names.map(async (name) => uploadAndWait(t, tokens.owner, 'acme', await tinyPackage({ name }))));
    expect(done.map((c) => c.status)).to.deep.equal(names.map(() => 'completed'));
    for (const name of names) {
      const pkg = await t.http.get(`/api/v1/packages/acme/${name}`).set(bearer(tokens.owner));
      expect(pkg.status).to.equal(200);
      expect(pkg.body.data.matrices).to.have.length(1);
    }
  });
});
