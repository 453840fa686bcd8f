import { expect } from 'chai';
import { compareSemver, isSemver, parseSemver } from '../../../src/packages/semver.js';
import { engineAdmits, parseEngineRange } from '../../../src/packages/engine-range.js';
import { AppError } from '../../../src/errors.js';

function refusal(fn: () => unknown): AppError {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(AppError);
    expect((err as AppError).code).to.equal('BAD_REQUEST');
    return err as AppError;
  }
  throw new Error('expected a refusal');
}

describe('semantic versions', () => {
  it('parses valid versions', () => {
    expect(parseSemver('1.2.3')).to.deep.equal({ major: 1, minor: 2, patch: 3, prerelease: null });
    expect(parseSemver('0.0.0')).to.deep.equal({ major: 0, minor: 0, patch: 0, prerelease: null });
    expect(parseSemver('10.20.30-rc.1+build.5')).to.deep.equal({ major: 10, minor: 20, patch: 30, prerelease: 'rc.1' });
    expect(parseSemver('1.0.0-alpha-2.x')).to.deep.include({ prerelease: 'alpha-2.x' });
  });

  for (const bad of ['', '1', '1.2', '1.2.3.4', 'v1.2.3', ' 1.2.3', '01.2.3', '1.02.3', '1.2.3-', '1.2.3-01', '1.2.3+', 'a.b.c', '1.2.3 ', '1..3', '99999999999999999999.0.0']) {
    it(`refuses ${JSON.stringify(bad)}`, () => {
      expect(parseSemver(bad)).to.equal(null);
      expect(isSemver(bad)).to.equal(false);
    });
  }

  it('orders by precedence, pre-releases below releases, build ignored', () => {
    const sorted = ['1.0.0-alpha', '1.0.0-alpha.1', '1.0.0-alpha.beta', '1.0.0-beta', '1.0.0-beta.2', '1.0.0-beta.11', '1.0.0-rc.1', '1.0.0', '1.0.1', '1.1.0', '1.10.0', '2.0.0'];
    for (let i = 0; i < sorted.length - 1; i++) {
      expect(compareSemver(sorted[i]!, sorted[i + 1]!), `${sorted[i]} < ${sorted[i + 1]}`).to.equal(-1);
      expect(compareSemver(sorted[i + 1]!, sorted[i]!)).to.equal(1);
    }
    expect(compareSemver('1.0.0+a', '1.0.0+b')).to.equal(0);
    expect([...sorted].reverse().sort(compareSemver)).to.deep.equal(sorted);
  });

  it('refuses to compare a non-version', () => {
    expect(refusal(() => compareSemver('1.0', '1.0.0')).message).to.match(/"1\.0" is not a semantic version/);
  });
});

describe('engine ranges', () => {
  const cases: Array<[string, { lower: [number, number] | null; upper: [number, number] | null }]> = [
    ['>=2.1 <3.0', { lower: [2, 1], upper: [3, 0] }],
    ['>=2', { lower: [2, 0], upper: null }],
    ['<3', { lower: null, upper: [3, 0] }],
    ['<3 >=2', { lower: [2, 0], upper: [3, 0] }],
    ['  >=1.0    <2.0  ', { lower: [1, 0], upper: [2, 0] }],
    ['>=2.1 <2.2', { lower: [2, 1], upper: [2, 2] }],
    ['>=0', { lower: [0, 0], upper: null }],
  ];
  for (const [text, want] of cases) {
    it(`parses ${JSON.stringify(text)}`, () => {
      const r = parseEngineRange(text);
      const mm = (b: [number, number] | null) => (b ? { major: b[0], minor: b[1] } : null);
      expect(r.lower).to.deep.equal(mm(want.lower));
      expect(r.upper).to.deep.equal(mm(want.upper));
      expect(r.text).to.equal(text.trim().split(/\s+/).join(' '));
    });
  }

  const refused: Array<[string, RegExp]> = [
    ['', /engineVersion is empty/],
    ['   ', /engineVersion is empty/],
    ['>=2.1.0', /has a patch number/],
    ['>=2 <3.0.1', /has a patch number/],
    ['>=1 >=2', /two lower bounds/],
    ['<1 <2', /two upper bounds/],
    ['>=3 <2', /admits no version: the lower bound 3\.0 is not below the upper bound 2\.0/],
    ['>=2 <2', /admits no version/],
    ['>=2.5 <2.5', /admits no version/],
    ['>=1 <2 <3', /has 3 bounds/],
    ['>2', /unsupported operator/],
    ['<=2', /unsupported operator/],
    ['^1.0', /unsupported operator/],
    ['=1', /unsupported operator/],
    ['2.0', /is not a bound/],
    ['>= 2', /is not a bound/],
    ['>=02', /is not a bound/],
    ['>=x', /is not a bound/],
    ['>=1,<2', /is not a bound/],
  ];
  for (const [text, message] of refused) {
    it(`refuses ${JSON.stringify(text)}`, () => {
      expect(refusal(() => parseEngineRange(text)).message).to.match(message);
    });
  }

  it('refuses a non-string', () => {
    expect(refusal(() => parseEngineRange(2 as unknown as string)).message).to.match(/must be a string/);
  });

  it('compares only major.minor of the engine version', () => {
    const r = parseEngineRange('>=2.1 <3.0');
    expect(engineAdmits(r, '2.1.0')).to.equal(true);
    expect(engineAdmits(r, '2.1.0-beta.1')).to.equal(true);
    expect(engineAdmits(r, '2.9.99')).to.equal(true);
    expect(engineAdmits(r, '2.0.9')).to.equal(false);
    expect(engineAdmits(r, '3.0.0')).to.equal(false);
    expect(engineAdmits(r, '3.0.0-rc.1')).to.equal(false);
    expect(engineAdmits('>=2', '100.0.0')).to.equal(true);
    expect(engineAdmits('>=2', '1.99.0')).to.equal(false);
    expect(engineAdmits('<3', '0.0.1')).to.equal(true);
    expect(engineAdmits('<3', '3.0.0')).to.equal(false);
    expect(engineAdmits('>=1.0 <2.0', '1.0.0')).to.equal(true);
  });

  it('refuses a bad engine version', () => {
    expect(refusal(() => engineAdmits('>=1', '1.0')).message).to.match(/engine version "1\.0" is not a semantic version/);
  });
});
