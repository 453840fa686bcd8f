import { expect } from 'chai';
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Parser, type Quad } from 'n3';
import { IAM, MTX, RDF, RDFS } from '../../../src/rdf/vocab.js';
import { AppError } from '../../../src/errors.js';
import { readPackageArchive } from '../../../src/packages/archive.js';
import { matrixText } from '../../../src/packages/matrix-text.js';
import { buildPackageArchive } from '../../../src/packages/build-archive.js';
import { EXAMPLES_DIR, exampleNames, publishExamples } from '../../../src/packages/examples.js';
import { openRegistry, resolveVersion } from '../../../src/packages/registry.js';
import { examplePackage } from '../../helpers/packages.js';
import { removeDir, tempDir } from '../../helpers/server.js';

function quadsOf(turtle: string): Quad[] {
  return new Parser({ format: 'text/turtle' }).parse(turtle);
}
const subjects = (quads: Quad[], type: string) =>
  quads.filter((q) => q.predicate.value === RDF.type && q.object.value === type).map((q) => q.subject.value).sort();
const valueOf = (quads: Quad[], s: string, p: string) => quads.filter((q) => q.subject.value === s && q.predicate.value === p).map((q) => q.object.value);

describe('example packages', () => {
  it('are the two project-tracking versions and incident-response', () => {
    expect(exampleNames()).to.deep.equal(['incident-response-1.0.0', 'project-tracking-1.0.0', 'project-tracking-1.1.0']);
  });

  for (const dir of ['incident-response-1.0.0', 'project-tracking-1.0.0', 'project-tracking-1.1.0']) {
    it(`${dir}: a valid archive of labelled matrices, roles and agents`, async () => {
      const pkg = await readPackageArchive(await examplePackage(dir));
      expect(`${pkg.manifest.name}-${pkg.manifest.version}`).to.equal(dir);
      expect(pkg.manifest.engineVersion).to.equal('>=1.0 <2.0');
      for (const matrix of pkg.manifest.matrices) {
        const quads = quadsOf(matrixText(pkg.files.get(matrix.path)!));
        expect(subjects(quads, MTX.Matrix)).to.deep.equal([matrix.uri]);
        const roles = subjects(quads, IAM.Role);
        const agents = subjects(quads, IAM.Agent);
        expect(roles.length).to.be.at.least(3);
        expect(agents.length).to.be.at.least(3);
        for (const node of [matrix.uri, ...roles, ...agents]) {
          expect(valueOf(quads, node, RDFS.label), `${node} label`).to.have.length(1);
          expect(valueOf(quads, node, RDFS.comment), `${node} comment`).to.have.length(1);
        }
        for (const agent of agents) {
          const held = valueOf(quads, agent, IAM.hasRole);
          expect(held, `${agent} roles`).to.not.be.empty;
          for (const role of held) expect(roles).to.include(role);
        }
      }
    });
  }

  it('1.1.0 of project-tracking adds a role and an agent', async () => {
    const roles = async (dir: string) => {
      const pkg = await readPackageArchive(await examplePackage(dir));
      const quads = quadsOf(matrixText(pkg.files.get('project-tracking/assembly.ttl')!));
      return { roles: subjects(quads, IAM.Role), agents: subjects(quads, IAM.Agent) };
    };
    const [v1, v11] = [await roles('project-tracking-1.0.0'), await roles('project-tracking-1.1.0')];
    expect(v11.roles.filter((r) => !v1.roles.includes(r))).to.deep.equal(['https://example.org/operating-models/project-tracking#QualityReviewer']);
    expect(v1.roles.filter((r) => !v11.roles.includes(r))).to.deep.equal([]);
    expect(v11.agents.length).to.equal(v1.agents.length + 1);
  });

  it('incident-response imports the project-tracking matrix', async () => {
    const pkg = await readPackageArchive(await examplePackage('incident-response-1.0.0'));
    const quads = quadsOf(matrixText(pkg.files.get('incident-response/assembly.ttl')!));
    expect(valueOf(quads, pkg.manifest.matrices[0]!.uri, MTX.imports)).to.deep.equal(['https://example.org/operating-models/project-tracking']);
    expect(pkg.manifest.dependencies).to.deep.equal([{ publisher: 'examples', name: 'project-tracking', versionRange: '>=1.0 <2.0' }]);
  });

  describe('publishing them', () => {
    let registry: string;
    beforeEach(() => { registry = tempDir('wsm-examples-'); });
    afterEach(() => removeDir(registry));

    it('fills a directory registry, idempotently', async () => {
      await publishExamples(registry);
      const reg = openRegistry(registry);
      const versions = await reg.versions('examples', 'project-tracking');
      expect(versions.map((v) => v.version)).to.deep.equal(['1.0.0', '1.1.0']);
      expect(resolveVersion(versions, '1.0.0').version).to.equal('1.1.0');
      expect((await reg.versions('examples', 'incident-response')).map((v) => v.version)).to.deep.equal(['1.0.0']);
      const file = path.join(registry, 'examples', 'project-tracking', '1.0.0.tgz');
      const before = statSync(file).mtimeMs;
      await publishExamples(registry);
      expect(statSync(file).mtimeMs).to.equal(before);
      await publishExamples(registry, 'demo');
      expect((await reg.versions('demo', 'incident-response')).map((v) => v.version)).to.deep.equal(['1.0.0']);
    });
  });

  describe('building an archive from a directory', () => {
    let dir: string;
    beforeEach(() => { dir = tempDir('wsm-build-'); });
    afterEach(() => removeDir(dir));

    it('gives the same bytes for the same directory, without hidden files', async () => {
      const a = await buildPackageArchive(path.join(EXAMPLES_DIR, 'project-tracking-1.0.0'));
      const b = await buildPackageArchive(path.join(EXAMPLES_DIR, 'project-tracking-1.0.0'));
      expect(a.equals(b)).to.equal(true);
      mkdirSync(path.join(dir, 'm'));
      writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify({ name: 'x', version: '1.0.0', engineVersion: '>=1', matrices: [{ name: 'm', path: 'm/assembly.ttl', uri: 'urn:x:m' }] }));
      writeFileSync(path.join(dir, 'm', 'assembly.ttl'), '<urn:x:m> a <https://poliglot.io/os/spec/matrix#Matrix> .');
      writeFileSync(path.join(dir, '.DS_Store'), 'junk');
      writeFileSync(path.join(dir, 'm', '.swp'), 'junk');
      const pkg = await readPackageArchive(await buildPackageArchive(dir));
      expect([...pkg.files.keys()]).to.deep.equal(['m/assembly.ttl']);
    });

    it('refuses a directory without manifest.json', async () => {
      try {
        await buildPackageArchive(dir);
        expect.fail('expected a refusal');
      } catch (err) {
        expect((err as AppError).message).to.match(/has no manifest\.json$/);
      }
    });
  });
});
