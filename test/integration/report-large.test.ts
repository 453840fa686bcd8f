import { expect } from 'chai';
import { Parser, type Quad } from 'n3';
import { bearer, startTestServer, type TestServer, withSeededServer, type Tokens } from '../helpers/server.js';
import { installMatrices } from '../helpers/installs.js';
import { sampleMatrixTurtle } from '../helpers/packages.js';

const SH = 'http://www.w3.org/ns/shacl#';
const RDF_TYPE = 'http://www.w3.org/1999/02/22-rdf-syntax-ns#type';

/**
 * A report too large for one piece of the store's sliced write (about 1.5 MB
 * of N-Triples): as stored and served, it is still one report whose
 * results each hang off it with their own path.
 */
describe('a large validation report', function () {
  this.timeout(120_000);
  let t: TestServer;
  let tokens: Tokens;
  withSeededServer('acme', (s) => ({ t, tokens } = s));

  it('is one sh:ValidationReport holding every result, in P9 Turtle as in its JSON, after a restart too', async () => {
    const uri = 'https://example.org/matrices/many-roles';
    // Roles nobody holds: an info result each (iam.ttl, RoleHolderShape, an inverse path).
    let turtle = sampleMatrixTurtle(uri);
    for (let i = 0; i < 1500; i++) turtle += `<${uri}#role-${i}> a iam:Role ; rdfs:label "Role ${i}" ; rdfs:comment "Role number ${i}, held by nobody." .\n`;
    const command = await installMatrices(t, tokens.owner, 'acme', 'many-roles', [{ uri, turtle }]);
    const path = `/api/v1/packages/acme/commands/${command.id}/validation-report`;
    const check = async () => {
      const json = await t.http.get(path).set(bearer(tokens.owner));
      expect(json.status).to.equal(200);
      expect(json.body.data.infos).to.have.length(json.body.data.infoCount);
      const res = await t.http.get(path).set(bearer(tokens.owner)).set('Accept', 'text/turtle');
      expect(res.status).to.equal(200);
      const quads: Quad[] = new Parser().parse(res.text);
      const reports = quads.filter((q) => q.predicate.value === RDF_TYPE && q.object.value === `${SH}ValidationReport`).map((q) => q.subject);
      expect(reports, 'one report node').to.have.length(1);
      const report = reports[0]!;
      const results = quads.filter((q) => q.predicate.value === `${SH}result`);
      expect(new Set(results.map((q) => q.subject.id)), 'every result hangs off that node').to.deep.equal(new Set([report.id]));
      const infos = results.filter((r) => quads.some((q) => q.subject.equals(r.object) && q.predicate.value === `${SH}resultSeverity` && q.object.value === `${SH}Info`));
      expect(infos.length).to.equal(json.body.data.infoCount).and.to.be.at.least(1500);
      for (const r of infos) {
        const paths = quads.filter((q) => q.subject.equals(r.object) && q.predicate.value === `${SH}resultPath`);
        expect(paths, 'a result path').to.have.length(1);
        expect(quads.some((q) => q.subject.equals(paths[0]!.object) && q.predicate.value === `${SH}inversePath`), 'an inverse path').to.equal(true);
      }
    };
    await check();
    await t.server.close();
    t = await startTestServer({}, t.dataDir);
    await check();
  });
});
