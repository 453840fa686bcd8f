import { expect } from 'chai';
import { parseManifest, type Manifest } from '../../../src/packages/manifest.js';
import { AppError } from '../../../src/errors.js';

const valid = () => ({
  name: 'project-tracking',
  version: '1.0.0',
  engineVersion: '>=1.0 <2.0',
  description: 'Tracks projects',
  matrices: [
    { name: 'projects', path: 'projects/assembly.ttl', uri: 'https://example.org/matrices/projects' },
    { name: 'tasks', path: 'tasks/assembly.ttl', uri: 'urn:example:tasks' },
  ],
  dependencies: [{ publisher: 'examples', name: 'base', versionRange: '>=1.0 <2' }],
});

function problems(value: unknown): string {
  try {
    parseManifest(value);
  } catch (err) {
    expect(err).to.be.instanceOf(AppError);
    expect((err as AppError).code).to.equal('BAD_REQUEST');
    return (err as AppError).message;
  }
  throw new Error('expected the manifest to be refused');
}

describe('package manifest', () => {
  it('accepts a valid manifest and fills defaults', () => {
    const m: Manifest = parseManifest(valid());
    expect(m).to.deep.equal(valid());
    const { description: _d, dependencies: _x, ...minimal } = valid();
    const min = parseManifest({ ...minimal, engineVersion: '  >=1   <2 ', extra: 'ignored' });
    expect(min.description).to.equal(null);
    expect(min.dependencies).to.deep.equal([]);
    expect(min.engineVersion).to.equal('>=1 <2');
    expect(min).to.not.have.property('extra');
  });

  it('refuses a value that is not an object', () => {
    for (const v of [null, [], 'x', 3]) expect(problems(v)).to.match(/manifest\.json must hold a JSON object/);
  });

  it('lists every problem at once, naming each field', () => {
    const msg = problems({ matrices: [] });
    expect(msg).to.match(/^Invalid manifest\.json: /);
    expect(msg).to.include('name is required');
    expect(msg).to.include('version is required');
    expect(msg).to.include('engineVersion is required');
    expect(msg).to.include('matrices is empty');
    try { parseManifest({}); } catch (err) {
      expect((err as AppError).details?.problems).to.be.an('array').with.length(4);
    }
  });

  const refusals: Array<[string, (m: ReturnType<typeof valid>) => unknown, RegExp]> = [
    ['an upper-case name', (m) => ({ ...m, name: 'Project' }), /name must be a lower-case slug/],
    ['a name with a space', (m) => ({ ...m, name: 'my package' }), /name must be a lower-case slug/],
    ['a name with a double hyphen', (m) => ({ ...m, name: 'a--b' }), /name must be a lower-case slug/],
    ['a name of 65 characters', (m) => ({ ...m, name: 'a'.repeat(65) }), /name is longer than 64 characters/],
    ['the name "install"', (m) => ({ ...m, name: 'install' }), /name must not be one of "install", "registry", "commands"/],
    ['the name "registry"', (m) => ({ ...m, name: 'registry' }), /reserved by the API/],
    ['the name "commands"', (m) => ({ ...m, name: 'commands' }), /reserved by the API/],
    ['a numeric name', (m) => ({ ...m, name: 5 }), /name must be a string/],
    ['a two-part version', (m) => ({ ...m, version: '1.0' }), /version must be a semantic version/],
    ['a v-prefixed version', (m) => ({ ...m, version: 'v1.0.0' }), /version must be a semantic version/],
    ['a patch in engineVersion', (m) => ({ ...m, engineVersion: '>=1.0.0' }), /engineVersion ">=1\.0\.0": bound ">=1\.0\.0" has a patch number/],
    ['an empty engine interval', (m) => ({ ...m, engineVersion: '>=3 <2' }), /admits no version/],
    ['an empty engineVersion', (m) => ({ ...m, engineVersion: '' }), /engineVersion is empty/],
    ['a non-string description', (m) => ({ ...m, description: 3 }), /description must be a string/],
    ['matrices not an array', (m) => ({ ...m, matrices: {} }), /matrices must be an array/],
    ['a matrix that is not an object', (m) => ({ ...m, matrices: ['x'] }), /matrices\[0\]/],
    ['a matrix without a uri', (m) => ({ ...m, matrices: [{ name: 'a', path: 'a/assembly.ttl' }] }), /matrices\[0\]\.uri: is required/],
    ['an absolute matrix path', (m) => ({ ...m, matrices: [{ ...m.matrices[0], path: '/etc/x.ttl' }] }), /matrices\[0\]\.path: "\/etc\/x\.ttl" is absolute/],
    ['a Windows drive path', (m) => ({ ...m, matrices: [{ ...m.matrices[0], path: 'C:/x.ttl' }] }), /is absolute/],
    ['a ".." matrix path', (m) => ({ ...m, matrices: [{ ...m.matrices[0], path: 'a/../../x.ttl' }] }), /contains "\.\."/],
    ['a backslash matrix path', (m) => ({ ...m, matrices: [{ ...m.matrices[0], path: 'a\\x.ttl' }] }), /contains a backslash/],
    ['a "./" matrix path', (m) => ({ ...m, matrices: [{ ...m.matrices[0], path: './x.ttl' }] }), /empty or "\." segment/],
    ['a non-Turtle matrix path', (m) => ({ ...m, matrices: [{ ...m.matrices[0], path: 'a/assembly.rdf' }] }), /is not a Turtle file \(\.ttl\)/],
    ['a relative matrix uri', (m) => ({ ...m, matrices: [{ ...m.matrices[0], uri: 'matrices/projects' }] }), /matrices\[0\]\.uri: "matrices\/projects" is not an absolute IRI/],
    ['a uri with a space', (m) => ({ ...m, matrices: [{ ...m.matrices[0], uri: 'https://x.org/a b' }] }), /not allowed in an IRI/],
    ['a uri with ">"', (m) => ({ ...m, matrices: [{ ...m.matrices[0], uri: 'https://x.org/a>' }] }), /not allowed in an IRI/],
    ['a duplicate uri', (m) => ({ ...m, matrices: [m.matrices[0], { ...m.matrices[1], uri: m.matrices[0]!.uri }] }), /matrices\[1\]\.uri: uri "https:\/\/example\.org\/matrices\/projects" is used by more than one matrix/],
    ['a duplicate path', (m) => ({ ...m, matrices: [m.matrices[0], { ...m.matrices[1], path: m.matrices[0]!.path }] }), /path "projects\/assembly\.ttl" is used by more than one matrix/],
    ['a duplicate matrix name', (m) => ({ ...m, matrices: [m.matrices[0], { ...m.matrices[1], name: 'projects' }] }), /name "projects" is used by more than one matrix/],
    ['a bad matrix name', (m) => ({ ...m, matrices: [{ ...m.matrices[0], name: '../x' }] }), /matrices\[0\]\.name: must start with a letter or digit/],
    ['a bad dependency publisher', (m) => ({ ...m, dependencies: [{ publisher: 'A B', name: 'x', versionRange: '1' }] }), /dependencies\[0\]\.publisher: publisher must be a lower-case slug/],
    ['an empty dependency range', (m) => ({ ...m, dependencies: [{ publisher: 'a', name: 'x', versionRange: ' ' }] }), /dependencies\[0\]\.versionRange: versionRange is empty/],
    ['a dependency range that is not a range', (m) => ({ ...m, dependencies: [{ publisher: 'a', name: 'x', versionRange: 'banana' }] }), /dependencies\[0\]\.versionRange: versionRange "banana": "banana" is not a bound/],
    ['a caret dependency range', (m) => ({ ...m, dependencies: [{ publisher: 'a', name: 'x', versionRange: '^1.0.0' }] }), /versionRange "\^1\.0\.0": bound "\^1\.0\.0" uses an unsupported operator/],
    ['a dependency range with a patch number', (m) => ({ ...m, dependencies: [{ publisher: 'a', name: 'x', versionRange: '>=1.0.0 <2.0.0' }] }), /bound ">=1\.0\.0" has a patch number/],
  ];
  for (const [what, change, message] of refusals) {
    it(`refuses ${what}`, () => {
      expect(problems(change(valid()))).to.match(message);
    });
  }
});
