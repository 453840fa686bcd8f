import { expect } from 'chai';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { openRegistry } from '../../src/packages/registry.js';
import { runWsm } from '../helpers/cli.js';
import { examplePackage, tinyPackage } from '../helpers/packages.js';
import { removeDir, tempDir } from '../helpers/server.js';

describe('wsm publish', () => {
  let work: string;
  let registry: string;
  beforeEach(() => { work = tempDir('wsm-publish-'); registry = path.join(work, 'registry'); });
  afterEach(() => removeDir(work));

  it('copies a package into the registry given by --registry', async () => {
    const file = path.join(work, 'project-tracking.tgz');
    writeFileSync(file, await examplePackage('project-tracking-1.1.0'));
    const res = await runWsm(['publish', file, '--publisher', 'acme', '--registry', registry]);
    expect(res.code, res.stderr).to.equal(0);
    const target = path.join(registry, 'acme', 'project-tracking', '1.1.0.tgz');
    expect(res.stdout.trim()).to.equal(`Published acme/project-tracking 1.1.0 to ${target}`);
    expect(readFileSync(target).equals(readFileSync(file))).to.equal(true);
    const versions = await openRegistry(registry).versions('acme', 'project-tracking');
    expect(versions.map((v) => [v.version, v.engineVersion])).to.deep.equal([['1.1.0', '>=1.0 <2.0']]);
  });

  it('defaults to WSM_REGISTRY', async () => {
    const file = path.join(work, 'tiny.tgz');
    writeFileSync(file, await tinyPackage({ name: 'tiny', version: '0.1.0' }));
    const res = await runWsm(['publish', file, '--publisher', 'acme'], { WSM_REGISTRY: registry, WSM_DATA_DIR: path.join(work, 'data') });
    expect(res.code, res.stderr).to.equal(0);
    expect(existsSync(path.join(registry, 'acme', 'tiny', '0.1.0.tgz'))).to.equal(true);
  });

  it('refuses an invalid archive with the reason, and writes nothing', async () => {
    const file = path.join(work, 'bad.tgz');
    writeFileSync(file, await tinyPackage({ name: 'install' }));
    const res = await runWsm(['publish', file, '--publisher', 'acme', '--registry', registry]);
    expect(res.code).to.equal(1);
    expect(res.stderr.trim()).to.equal('wsm: Invalid manifest.json: name must not be one of "install", "registry", "commands" (reserved by the API)');
    expect(existsSync(registry)).to.equal(false);
  });

  it('refuses other content for a published version', async () => {
    const file = path.join(work, 'tiny.tgz');
    writeFileSync(file, await tinyPackage({ name: 'tiny' }));
    expect((await runWsm(['publish', file, '--publisher', 'acme', '--registry', registry])).code).to.equal(0);
    writeFileSync(file, await tinyPackage({ name: 'tiny', description: 'changed' }));
    const res = await runWsm(['publish', file, '--publisher', 'acme', '--registry', registry]);
    expect(res.code).to.equal(1);
    expect(res.stderr).to.match(/Version 1\.0\.0 of "acme\/tiny" is already published with other content/);
  });

  it('explains its usage and refuses an HTTP registry', async () => {
    const missing = await runWsm(['publish', 'x.tgz', '--registry', registry]);
    expect(missing.code).to.equal(2);
    expect(missing.stderr).to.match(/usage: wsm publish <file\.tgz> --publisher P \[--registry DIR\]/);
    const http = await runWsm(['publish', 'x.tgz', '--publisher', 'acme', '--registry', 'http://127.0.0.1:1/']);
    expect(http.code).to.equal(2);
    expect(http.stderr).to.match(/is an HTTP registry/);
    const bad = await runWsm(['publish', path.join(work, 'none.tgz'), '--publisher', 'Acme Corp', '--registry', registry]);
    expect(bad.code).to.equal(1);
    expect(bad.stderr).to.match(/Publisher "Acme Corp" must be a lower-case slug/);
  });
});
