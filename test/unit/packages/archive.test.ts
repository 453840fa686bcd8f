import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { readPackageArchive, DEFAULT_ARCHIVE_LIMITS } from '../../../src/packages/archive.js';
import { matrixText } from '../../../src/packages/matrix-text.js';
import { AppError } from '../../../src/errors.js';
import { sampleMatrixTurtle, tarBytes, tarGz, tinyPackage, type TarEntry } from '../../helpers/packages.js';

const manifest = (extra: Record<string, unknown> = {}) => JSON.stringify({
  name: 'demo', version: '1.0.0', engineVersion: '>=1.0 <2.0',
  matrices: [{ name: 'main', path: 'main/assembly.ttl', uri: 'https://example.org/demo/main' }],
  ...extra,
});
const matrix = sampleMatrixTurtle('https://example.org/demo/main');
const good = (): TarEntry[] => [
  { path: 'manifest.json', content: manifest() },
  { path: 'main/', type: 'Directory' },
  { path: 'main/assembly.ttl', content: matrix },
];

async function refusal(archive: Buffer, limits?: Parameters<typeof readPackageArchive>[1]): Promise<string> {
  try {
    await readPackageArchive(archive, limits);
  } catch (err) {
    expect(err).to.be.instanceOf(AppError);
    expect((err as AppError).code).to.equal('BAD_REQUEST');
    return (err as AppError).message;
  }
  throw new Error('expected the archive to be refused');
}

describe('package archive reader', () => {
  it('reads the manifest, the matrix files and the checksum', async () => {
    const archive = tarGz(good());
    const pkg = await readPackageArchive(archive);
    expect(pkg.manifest.name).to.equal('demo');
    expect(pkg.manifest.matrices).to.deep.equal([{ name: 'main', path: 'main/assembly.ttl', uri: 'https://example.org/demo/main' }]);
    expect([...pkg.files.keys()]).to.deep.equal(['main/assembly.ttl']);
    expect(matrixText(pkg.files.get('main/assembly.ttl')!)).to.equal(matrix);
    expect(pkg.sha256).to.equal(createHash('sha256').update(archive).digest('hex'));
  });

  it('accepts "./" prefixes, entries in any order and extra files', async () => {
    const pkg = await readPackageArchive(tarGz([
      { path: './', type: 'Directory' },
      { path: './main/assembly.ttl', content: '\uFEFF' + matrix },
      { path: './README.md', content: '# demo' },
      { path: './manifest.json', content: manifest() },
    ]));
    expect(matrixText(pkg.files.get('main/assembly.ttl')!)).to.equal(matrix);
  });

  it('reads the archive the test helper builds', async () => {
    const pkg = await readPackageArchive(await tinyPackage({ name: 'tiny', version: '2.3.4' }));
    expect(pkg.manifest).to.include({ name: 'tiny', version: '2.3.4' });
    expect(pkg.files.size).to.equal(1);
  });

  describe('refuses', () => {
    it('an empty upload', async () => {
      expect(await refusal(Buffer.alloc(0))).to.equal('The package archive is empty');
    });
    it('a file that is not gzip', async () => {
      expect(await refusal(Buffer.from('{"name":"demo"}'))).to.equal('The file is not a gzip-compressed tar archive (.tgz)');
      expect(await refusal(tarBytes(good()))).to.equal('The file is not a gzip-compressed tar archive (.tgz)');
    });
    it('broken gzip data', async () => {
      const gz = tarGz(good());
      expect(await refusal(gz.subarray(0, gz.length - 30))).to.match(/^The archive is not valid gzip data: /);
      const corrupt = Buffer.from(gz);
      corrupt.fill(0xff, 12, 40);
      expect(await refusal(corrupt)).to.match(/^The archive is not valid gzip data: /);
    });
    it('gzip data that is not a tar', async () => {
      expect(await refusal(gzipSync(Buffer.from('just some text, not a tar archive')))).to.match(/^The archive is not a valid tar archive inside gzip: /);
      expect(await refusal(gzipSync(Buffer.alloc(2048, 'x')))).to.match(/^The archive is not a valid tar archive inside gzip: /);
    });
    it('a tar cut short inside complete gzip data', async () => {
      const tar = tarBytes(good());
      expect(await refusal(gzipSync(tar.subarray(0, 512 + 100)))).to.match(/^The archive is not a valid tar archive inside gzip: .*[Tt]runcated/);
    });
    it('a tar header with a bad checksum', async () => {
      const tar = Buffer.from(tarBytes(good()));
      tar[0] = 'X'.charCodeAt(0); // the name changes, the recorded checksum does not
      expect(await refusal(gzipSync(tar))).to.match(/^The archive is not a valid tar archive inside gzip: .*checksum/);
    });
    it('a gzip inside the gzip', async () => {
      expect(await refusal(gzipSync(tarGz(good())))).to.equal('The archive is compressed twice; a package is one gzip-compressed tar');
    });
    it('an archive over the size limit', async () => {
      expect(await refusal(tarGz(good()), { maxArchiveBytes: 100 })).to.match(/^The archive is \d+ bytes, over the limit of 100 bytes$/);
      const big = Buffer.concat([Buffer.from([0x1f, 0x8b]), Buffer.alloc(DEFAULT_ARCHIVE_LIMITS.maxArchiveBytes)]);
      expect(await refusal(big)).to.match(/over the limit of 20 MiB$/);
    });
    it('a name with ".."', async () => {
      expect(await refusal(tarGz([...good(), { path: 'main/../../evil.ttl', content: 'x' }])))
        .to.equal('Unsafe archive entry "main/../../evil.ttl": the name contains ".."');
      expect(await refusal(tarGz([{ path: '../manifest.json', content: manifest() }, ...good().slice(1)])))
        .to.equal('Unsafe archive entry "../manifest.json": the name contains ".."');
    });
    it('an absolute name', async () => {
      expect(await refusal(tarGz([{ path: '/etc/passwd', content: 'x' }, ...good()])))
        .to.equal('Unsafe archive entry "/etc/passwd": the name is an absolute path');
    });
    it('a symbolic link', async () => {
      expect(await refusal(tarGz([...good(), { path: 'link.ttl', type: 'SymbolicLink', linkpath: '/etc/passwd' }])))
        .to.equal('Unsafe archive entry "link.ttl": it is a symbolic link; a package holds only regular files and directories');
    });
    it('a symbolic link standing in for a matrix file', async () => {
      expect(await refusal(tarGz([{ path: 'manifest.json', content: manifest() }, { path: 'main/assembly.ttl', type: 'SymbolicLink', linkpath: '../x.ttl' }])))
        .to.match(/"main\/assembly\.ttl": it is a symbolic link/);
    });
    it('a hard link', async () => {
      expect(await refusal(tarGz([...good(), { path: 'copy.ttl', type: 'Link', linkpath: 'main/assembly.ttl' }])))
        .to.equal('Unsafe archive entry "copy.ttl": it is a hard link; a package holds only regular files and directories');
    });
    it('devices and FIFOs', async () => {
      expect(await refusal(tarGz([...good(), { path: 'dev', type: 'CharacterDevice' }]))).to.match(/"dev": it is a character device/);
      expect(await refusal(tarGz([...good(), { path: 'disk', type: 'BlockDevice' }]))).to.match(/"disk": it is a block device/);
      expect(await refusal(tarGz([...good(), { path: 'pipe', type: 'FIFO' }]))).to.match(/"pipe": it is a FIFO/);
    });
    it('too many entries', async () => {
      const many = Array.from({ length: DEFAULT_ARCHIVE_LIMITS.maxEntries }, (_, i) => ({ path: `extra/${i}.txt`, content: 'x' }));
      expect(await refusal(tarGz([...good(), ...many]))).to.equal('The archive has more than 1000 entries, the limit');
      expect(await refusal(tarGz(good()), { maxEntries: 2 })).to.equal('The archive has more than 2 entries, the limit');
    });
    it('a file over the per-file limit', async () => {
      expect(await refusal(tarGz([...good(), { path: 'big.bin', content: Buffer.alloc(5000) }]), { maxFileBytes: 4096 }))
        .to.equal('Archive entry "big.bin" is 5000 bytes, over the limit of 4096 bytes per file');
    });
    it('a decompression bomb, stopping as soon as it passes the limit', async function () {
      this.timeout(20_000);
      // One file announced and filled with 200 MB of zeros: about 200 KB compressed.
      const header = tarBytes([{ path: 'zeros.bin', content: Buffer.alloc(0), size: 200 * 1024 * 1024 }]).subarray(0, 512);
      const bomb = gzipSync(Buffer.concat([header, Buffer.alloc(200 * 1024 * 1024)]), { level: 9 });
      expect(bomb.length).to.be.below(DEFAULT_ARCHIVE_LIMITS.maxArchiveBytes);
      const started = Date.now();
      expect(await refusal(bomb, { maxFileBytes: 300 * 1024 * 1024 })).to.equal('The archive decompresses to more than 50 MiB, the limit');
      // 200 MB of long-name headers: metadata, no entry announces a size; the inflated count stops them.
      const meta = tarBytes([{ path: 'x', type: 'NextFileHasLongPath', content: Buffer.alloc(60_000, 'a') }]).subarray(0, 512 + 60_416);
      const metaBomb = gzipSync(Buffer.concat(Array(Math.ceil(200 * 1024 * 1024 / meta.length)).fill(meta)), { level: 9 });
      expect(metaBomb.length).to.be.below(1024 * 1024);
      const rssBefore = process.memoryUsage().rss;
      expect(await refusal(metaBomb)).to.equal('The archive decompresses to more than 50 MiB, the limit');
      expect(process.memoryUsage().rss - rssBefore).to.be.below(100 * 1024 * 1024);
      expect(Date.now() - started).to.be.below(15_000);
    });
    it('many files that together pass the uncompressed limit', async () => {
      const files = Array.from({ length: 5 }, (_, i) => ({ path: `data/${i}.bin`, content: Buffer.alloc(3000) }));
      expect(await refusal(tarGz([...good(), ...files]), { maxUncompressedBytes: 10_000 }))
        .to.equal('The archive decompresses to more than 10000 bytes, the limit');
    });
    it('the same name twice', async () => {
      expect(await refusal(tarGz([...good(), { path: './main/assembly.ttl', content: '<a:b> <a:c> <a:d> .' }])))
        .to.equal('The archive holds "main/assembly.ttl" more than once');
    });
    it('an archive without manifest.json', async () => {
      expect(await refusal(tarGz(good().slice(1)))).to.equal('The archive has no manifest.json at its root');
    });
    it('a manifest inside a folder', async () => {
      expect(await refusal(tarGz(good().map((e) => ({ ...e, path: `package/${e.path}` })))))
        .to.equal('The archive has no manifest.json at its root (found "package/manifest.json"; pack the package folder\'s contents, not the folder)');
    });
    it('a manifest that is not JSON', async () => {
      expect(await refusal(tarGz([{ path: 'manifest.json', content: '{"name": ' }, ...good().slice(1)])))
        .to.match(/^manifest\.json is not valid JSON: /);
    });
    it('an invalid manifest, listing its problems', async () => {
      expect(await refusal(tarGz([{ path: 'manifest.json', content: manifest({ name: 'Demo', version: '1' }) }, ...good().slice(1)])))
        .to.match(/^Invalid manifest\.json: name must be a lower-case slug.*; version must be a semantic version/);
    });
    it('an incompatible engine range syntax', async () => {
      expect(await refusal(tarGz([{ path: 'manifest.json', content: manifest({ engineVersion: '>=2 <2' }) }, ...good().slice(1)])))
        .to.match(/^Invalid manifest\.json: engineVersion ">=2 <2" admits no version/);
    });
    it('a manifest naming a missing file', async () => {
      expect(await refusal(tarGz(good().slice(0, 2))))
        .to.equal('manifest.json names the file "main/assembly.ttl" for matrix "main", but the archive does not hold it');
    });
    it('a matrix path that is not Turtle', async () => {
      const m = manifest({ matrices: [{ name: 'main', path: 'main/assembly.rdf', uri: 'https://example.org/demo/main' }] });
      expect(await refusal(tarGz([{ path: 'manifest.json', content: m }, { path: 'main/assembly.rdf', content: matrix }])))
        .to.equal('Invalid manifest.json: matrices[0].path: "main/assembly.rdf" is not a Turtle file (.ttl)');
    });
    it('RDF/XML content in a .ttl file', async () => {
      const xml = '<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"></rdf:RDF>\n';
      expect(await refusal(tarGz([good()[0]!, { path: 'main/assembly.ttl', content: xml }])))
        .to.equal('"main/assembly.ttl" holds RDF/XML; matrices must be written in Turtle');
      const noDecl = '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\n</rdf:RDF>';
      expect(await refusal(tarGz([good()[0]!, { path: 'main/assembly.ttl', content: noDecl }])))
        .to.match(/holds RDF\/XML/);
    });
    it('a matrix file that is not UTF-8', async () => {
      expect(await refusal(tarGz([good()[0]!, { path: 'main/assembly.ttl', content: Buffer.from([0x3c, 0xff, 0xfe, 0x3e]) }])))
        .to.equal('"main/assembly.ttl" is not UTF-8 text');
    });
  });

  it('ignores what follows the end-of-archive blocks, without inflating it', async () => {
    const padded = gzipSync(Buffer.concat([tarBytes(good()), Buffer.alloc(120 * 1024 * 1024)]), { level: 9 });
    const started = Date.now();
    const pkg = await readPackageArchive(padded);
    expect(matrixText(pkg.files.get('main/assembly.ttl')!)).to.equal(matrix);
    expect(Date.now() - started).to.be.below(2_000);
  });

  it('reads several archives at once, each on its own', async () => {
    const archives = await Promise.all(['a', 'b', 'c', 'd'].map((n) => tinyPackage({ name: `pkg-${n}` })));
    const results = await Promise.allSettled([...archives, tarGz(good().slice(1))].map((a) => readPackageArchive(a)));
    expect(results.slice(0, 4).map((r) => r.status === 'fulfilled' && r.value.manifest.name)).to.deep.equal(['pkg-a', 'pkg-b', 'pkg-c', 'pkg-d']);
    expect(results[4]!.status).to.equal('rejected');
  });

  it('does not take Turtle that starts with an IRI for RDF/XML', async () => {
    const turtle = '<https://example.org/demo/main> a <https://poliglot.io/os/spec/matrix#Matrix> .\n';
    const pkg = await readPackageArchive(tarGz([good()[0]!, { path: 'main/assembly.ttl', content: turtle }]));
    expect(matrixText(pkg.files.get('main/assembly.ttl')!)).to.equal(turtle);
  });
});
