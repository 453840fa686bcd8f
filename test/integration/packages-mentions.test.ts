import { expect } from 'chai';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { tinyPackage } from '../helpers/packages.js';
import { uploadAndWait } from '../helpers/lifecycle.js';

/**
 * What an install finds of the other packages' matrices and roles that its
 * Turtle mentions (the imports it needs, the roles its agents hold). A
 * package naming a few IRIs is looked up IRI by IRI; one naming thousands is
 * matched against the workspace's matrices and roles read once. Both must
 * find the same: each case runs small and padded past the lookup's 500.
 */

const PREFIXES = `@prefix mtx: <https://poliglot.io/os/spec/matrix#> .
@prefix iam: <https://poliglot.io/os/spec/iam#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
`;
const BASE = 'https://example.org/mentions/base';

function dependent(uri: string, role: string, padding: number): string {
  const lines = [PREFIXES,
    `<${uri}> a mtx:Matrix ; rdfs:label "Dependent" ; rdfs:comment "Uses the base matrix." ; mtx:imports <${BASE}> .`,
    `<${uri}#bot> a iam:Agent ; rdfs:label "Bot" ; rdfs:comment "Holds a role of the base package." ; iam:hasRole <${role}> .`];
  for (let i = 0; i < padding; i++) lines.push(`<${uri}#thing${i}> a <https://example.org/Thing> ; rdfs:label "Thing ${i}" .`);
  return lines.join('\n');
}

describe('packages: an install sees the matrices and roles of other packages it mentions, however many IRIs it names', function () {
  this.timeout(120_000);
  let t: TestServer;
  let owner: string;
  before(async () => {
    t = await startTestServer();
    owner = (await seedWorkspace(t, 'acme')).tokens.owner;
    const base = await uploadAndWait(t, owner, 'acme', await tinyPackage({
      name: 'base',
      matrices: [{ name: 'base', uri: BASE, turtle: `${PREFIXES}<${BASE}> a mtx:Matrix ; rdfs:label "Base" ; rdfs:comment "Defines the auditor." .
<${BASE}#auditor> a iam:Role ; rdfs:label "Auditor" ; rdfs:comment "Reads everything." .` }],
    }));
    expect(base.status, base.errorMessage ?? '').to.equal('completed');
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  for (const padding of [0, 600]) {
    it(`${padding ? `naming ${padding * 2}+ IRIs` : 'naming a few IRIs'}: installs with an import and a role of another package`, async () => {
      const uri = `https://example.org/mentions/ok${padding}`;
      const done = await uploadAndWait(t, owner, 'acme', await tinyPackage({ name: `ok${padding}`, matrices: [{ name: 'main', uri, turtle: dependent(uri, `${BASE}#auditor`, padding) }] }));
      expect(done.status, done.errorMessage ?? '').to.equal('completed');
      const pkg = (await t.http.get(`/api/v1/packages/acme/ok${padding}`).set(bearer(owner))).body.data;
      expect(pkg.matrices[0].dependencyCount).to.equal(1);
    });

    it(`${padding ? `naming ${padding * 2}+ IRIs` : 'naming a few IRIs'}: refuses a role no package defines, naming it`, async () => {
      const uri = `https://example.org/mentions/bad${padding}`;
      const done = await uploadAndWait(t, owner, 'acme', await tinyPackage({ name: `bad${padding}`, matrices: [{ name: 'main', uri, turtle: dependent(uri, `${BASE}#nobody`, padding) }] }));
      expect(done.status).to.equal('failed');
      const report = await t.http.get(`/api/v1/packages/acme/commands/${done.id}/validation-report`).set(bearer(owner));
      expect(report.status).to.equal(200);
      expect(JSON.stringify(report.body.data)).to.contain(`${BASE}#nobody`);
    });

    it(`${padding ? `naming ${padding * 2}+ IRIs` : 'naming a few IRIs'}: refuses a matrix another package installed`, async () => {
      const done = await uploadAndWait(t, owner, 'acme', await tinyPackage({ name: `rival${padding}`, matrices: [{ name: 'base', uri: BASE, turtle: dependent(BASE, `${BASE}#auditor`, padding).replace(` ; mtx:imports <${BASE}>`, '') }] }));
      expect(done.status).to.equal('failed');
      expect(done.errorMessage).to.match(/already installed by package "base"/);
    });
  }
});
