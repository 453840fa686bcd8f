import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { readFileSync, statSync, utimesSync, writeFileSync, mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { AppError } from '../../../src/errors.js';
import {
  newestCompatible, openRegistry, publishBytes, publishToDirectory, resolveVersion, type Registry, type RegistryVersion,
} from '../../../src/packages/registry.js';
import { removeDir, tempDir } from '../../helpers/server.js';
import { tinyPackage } from '../../helpers/packages.js';

async function failure(promise: Promise<unknown> | (() => unknown)): Promise<AppError> {
  try {
    await (typeof promise === 'function' ? promise() : promise);
  } catch (err) {
    expect(err).to.be.instanceOf(AppError);
    return err as AppError;
  }
  throw new Error('expected a failure');
}

/** A directory registry with three versions of acme/tracker and one of acme/other. */
async function seedDirectory(dir: string): Promise<Record<string, Buffer>> {
  const archives: Record<string, Buffer> = {
    '1.0.0': await tinyPackage({ name: 'tracker', version: '1.0.0', engineVersion: '>=1.0 <2.0' }),
    '1.2.0': await tinyPackage({ name: 'tracker', version: '1.2.0', engineVersion: '>=1.1 <2.0' }),
    '2.0.0': await tinyPackage({ name: 'tracker', version: '2.0.0', engineVersion: '>=2.0' }),
  };
  for (const bytes of Object.values(archives)) await publishBytes(dir, bytes, 'acme');
  await publishBytes(dir, await tinyPackage({ name: 'other' }), 'acme');
  return archives;
}

/** Registry behaviour both kinds share. */
function sharedBehaviour(open: () => Registry, archives: () => Record<string, Buffer>) {
  it('lists every version with its engine range, oldest first', async () => {
    const versions = await open().versions('acme', 'tracker');
    expect(versions.map((v) => [v.version, v.engineVersion])).to.deep.equal([
      ['1.0.0', '>=1.0 <2.0'], ['1.2.0', '>=1.1 <2.0'], ['2.0.0', '>=2.0'],
    ]);
    for (const v of versions) expect(v.publishedAt).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
  });

  it('answers 404 naming an unknown publisher or package', async () => {
    const publisher = await failure(open().versions('nobody', 'tracker'));
    expect(publisher.code).to.equal('NOT_FOUND');
    const pkg = await failure(open().versions('acme', 'missing'));
    expect(pkg.code).to.equal('NOT_FOUND');
    expect(pkg.message).to.equal('Package "acme/missing" is not in the registry');
    expect((await failure(open().versions('../etc', 'x'))).code).to.equal('NOT_FOUND');
  });

  it('downloads the bytes of a version', async () => {
    const bytes = await open().download('acme', 'tracker', '1.2.0');
    expect(bytes.equals(archives()['1.2.0']!)).to.equal(true);
  });

  it('answers 404 for an unknown version', async () => {
    const err = await failure(open().download('acme', 'tracker', '9.9.9'));
    expect(err.code).to.equal('NOT_FOUND');
    expect(err.message).to.match(/9\.9\.9.*"acme\/tracker" is not in the registry/);
    expect((await failure(open().download('acme', 'tracker', '../../x'))).code).to.equal('NOT_FOUND');
  });
}

describe('package registries', () => {
  let dir: string;
  let archives: Record<string, Buffer>;
  before(async () => {
    dir = tempDir('wsm-registry-');
    archives = await seedDirectory(dir);
  });
  after(() => removeDir(dir));

  describe('directory registry', () => {
    sharedBehaviour(() => openRegistry(dir), () => archives);

    it('takes publishedAt from the file time and skips files that are not packages', async () => {
      const file = path.join(dir, 'acme', 'tracker', '1.0.0.tgz');
      utimesSync(file, new Date('2025-03-04T05:06:07Z'), new Date('2025-03-04T05:06:07Z'));
      writeFileSync(path.join(dir, 'acme', 'tracker', '3.0.0.tgz'), 'not an archive');
      writeFileSync(path.join(dir, 'acme', 'tracker', 'notes.txt'), 'hello');
      writeFileSync(path.join(dir, 'acme', 'tracker', 'latest.tgz'), archives['2.0.0']!);
      // A file at the wrong place: its manifest says 1.0.0.
      writeFileSync(path.join(dir, 'acme', 'tracker', '4.0.0.tgz'), archives['1.0.0']!);
      const versions = await openRegistry(dir).versions('acme', 'tracker');
      expect(versions.map((v) => v.version)).to.deep.equal(['1.0.0', '1.2.0', '2.0.0']);
      expect(versions[0]!.publishedAt).to.equal('2025-03-04T05:06:07.000Z');
    });

    it('has location = the resolved directory', () => {
      expect(openRegistry(dir).location).to.equal(path.resolve(dir));
    });
  });

  describe('HTTP registry', () => {
    let server: Server;
    let base: string;
    /** What the served archive route does: tamper with the bytes or the header. */
    let mode: 'ok' | 'tampered' | 'no-checksum' | 'error' = 'ok';

    before(async () => {
      const local = openRegistry(dir);
      server = createServer((req, res) => {
        const m = /^\/prefix\/api\/v1\/registry\/packages\/([^/]+)\/([^/]+)(?:\/([^/]+)\/archive)?$/.exec(req.url ?? '');
        const send = (status: number, body: string | Buffer, headers: Record<string, string> = {}) => {
          res.writeHead(status, headers);
          res.end(body);
        };
        if (!m) return send(404, '{}');
        if (mode === 'error') return send(500, 'boom');
        const [publisher, name, version] = [decodeURIComponent(m[1]!), decodeURIComponent(m[2]!), m[3] && decodeURIComponent(m[3])];
        const answer = version
          ? local.download(publisher, name, version).then((bytes) => {
            const sum = createHash('sha256').update(bytes).digest('hex');
            const body = mode === 'tampered' ? Buffer.concat([bytes, Buffer.from([0])]) : bytes;
            send(200, body, { 'content-type': 'application/gzip', ...(mode === 'no-checksum' ? {} : { 'x-archive-checksum': `sha256:${sum}` }) });
          })
          : local.versions(publisher, name).then((versions) => send(200, JSON.stringify({ versions }), { 'content-type': 'application/json' }));
        answer.catch((err: AppError) => send(err.code === 'NOT_FOUND' ? 404 : 500, JSON.stringify({ error: err.message })));
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/prefix/`;
    });
    after(() => new Promise<void>((resolve) => server.close(() => resolve())));
    afterEach(() => { mode = 'ok'; });

    sharedBehaviour(() => openRegistry(base), () => archives);

    it('refuses an archive that does not match its checksum', async () => {
      mode = 'tampered';
      const err = await failure(openRegistry(base).download('acme', 'tracker', '1.0.0'));
      expect(err.code).to.equal('SERVICE_UNAVAILABLE');
      expect(err.message).to.match(/^The archive of version 1\.0\.0 of "acme\/tracker" does not match its checksum \(expected sha256:[0-9a-f]{64}, got sha256:[0-9a-f]{64}\)$/);
    });

    it('refuses an archive without a checksum header', async () => {
      mode = 'no-checksum';
      const err = await failure(openRegistry(base).download('acme', 'tracker', '1.0.0'));
      expect(err.message).to.match(/without a valid X-Archive-Checksum header/);
    });

    it('reports a failing or unreachable registry as unavailable', async () => {
      mode = 'error';
      const err = await failure(openRegistry(base).versions('acme', 'tracker'));
      expect(err.code).to.equal('SERVICE_UNAVAILABLE');
      expect(err.message).to.equal('The package registry answered 500 for Package "acme/tracker"');
      const closed = await failure(openRegistry('http://127.0.0.1:1/').versions('acme', 'tracker'));
      expect(closed.code).to.equal('SERVICE_UNAVAILABLE');
      expect(closed.message).to.match(/could not be reached/);
    });
  });

  describe('choosing a version', () => {
    const versions: RegistryVersion[] = [
      { version: '1.0.0', engineVersion: '>=1.0 <2.0', publishedAt: null },
      { version: '1.3.0-beta.1', engineVersion: '>=1.0 <2.0', publishedAt: null },
      { version: '1.2.0', engineVersion: '>=1.1 <2.0', publishedAt: null },
      { version: '2.0.0', engineVersion: '>=2.0', publishedAt: null },
    ];

    it('takes the newest compatible release, never a pre-release', () => {
      expect(newestCompatible(versions, '1.0.5')?.version).to.equal('1.0.0');
      expect(newestCompatible(versions, '1.4.0')?.version).to.equal('1.2.0');
      expect(newestCompatible(versions, '2.3.0')?.version).to.equal('2.0.0');
      expect(newestCompatible(versions, '0.9.0')).to.equal(null);
      expect(resolveVersion(versions, '1.4.0').version).to.equal('1.2.0');
    });

    it('takes an explicit version, even a pre-release', () => {
      expect(resolveVersion(versions, '1.4.0', '1.0.0').version).to.equal('1.0.0');
      expect(resolveVersion(versions, '1.4.0', '1.3.0-beta.1').version).to.equal('1.3.0-beta.1');
    });

    it('answers 404 for an unknown explicit version', async () => {
      const err = await failure(() => resolveVersion(versions, '1.4.0', '1.1.0'));
      expect(err.code).to.equal('NOT_FOUND');
      expect(err.message).to.equal('Version 1.1.0 is not in the registry');
    });

    it('answers ENGINE_INCOMPATIBLE for an incompatible explicit version', async () => {
      const err = await failure(() => resolveVersion(versions, '1.4.0', '2.0.0'));
      expect(err.code).to.equal('ENGINE_INCOMPATIBLE');
      expect(err.message).to.equal('Version 2.0.0 requires engine version ">=2.0"; this workspace\'s engine version is 1.4.0');
    });

    it('answers ENGINE_INCOMPATIBLE when no release fits', async () => {
      const err = await failure(() => resolveVersion(versions, '0.9.0'));
      expect(err.code).to.equal('ENGINE_INCOMPATIBLE');
      expect(err.message).to.match(/^No release in the registry is compatible with this workspace's engine version 0\.9\.0 \(2\.0\.0 requires ">=2\.0", /);
    });
  });

  describe('publishing into a directory', () => {
    let reg: string;
    let work: string;
    beforeEach(() => { reg = tempDir('wsm-pub-'); work = tempDir('wsm-pub-src-'); });
    afterEach(() => { removeDir(reg); removeDir(work); });

    it('copies a checked archive to <publisher>/<name>/<version>.tgz, idempotently', async () => {
      const file = path.join(work, 'pkg.tgz');
      writeFileSync(file, await tinyPackage({ name: 'ops', version: '0.3.1' }));
      const out = await publishToDirectory(reg, file, 'team');
      expect(out).to.deep.equal({ publisher: 'team', name: 'ops', version: '0.3.1', path: path.join(path.resolve(reg), 'team', 'ops', '0.3.1.tgz') });
      expect(readFileSync(out.path).equals(readFileSync(file))).to.equal(true);
      const mtime = statSync(out.path).mtimeMs;
      await publishToDirectory(reg, file, 'team');
      expect(statSync(out.path).mtimeMs).to.equal(mtime);
      expect((await openRegistry(reg).versions('team', 'ops')).map((v) => v.version)).to.deep.equal(['0.3.1']);
    });

    it('refuses other content for a published version', async () => {
      const file = path.join(work, 'pkg.tgz');
      writeFileSync(file, await tinyPackage({ name: 'ops', version: '0.3.1' }));
      await publishToDirectory(reg, file, 'team');
      writeFileSync(file, await tinyPackage({ name: 'ops', version: '0.3.1', description: 'changed' }));
      const err = await failure(publishToDirectory(reg, file, 'team'));
      expect(err.code).to.equal('CONFLICT');
      expect(err.message).to.equal('Version 0.3.1 of "team/ops" is already published with other content; publish a new version');
    });

    it('refuses a bad publisher, a missing file and an invalid archive', async () => {
      const file = path.join(work, 'pkg.tgz');
      writeFileSync(file, await tinyPackage({ name: 'ops' }));
      expect((await failure(publishToDirectory(reg, file, 'Team X'))).message).to.match(/^Publisher "Team X" must be a lower-case slug/);
      expect((await failure(publishToDirectory(reg, path.join(work, 'none.tgz'), 'team'))).code).to.equal('NOT_FOUND');
      writeFileSync(file, 'hello');
      const bad = await failure(publishToDirectory(reg, file, 'team'));
      expect(bad.code).to.equal('BAD_REQUEST');
      expect(bad.message).to.equal('The file is not a gzip-compressed tar archive (.tgz)');
      mkdirSync(path.join(work, 'dir.tgz'));
      expect((await failure(publishToDirectory(reg, path.join(work, 'dir.tgz'), 'team'))).code).to.equal('NOT_FOUND');
    });
  });
});
