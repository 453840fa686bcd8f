import { isUtf8 } from 'node:buffer';
import { createHash } from 'node:crypto';
import { createGunzip } from 'node:zlib';
import { Parser, type ReadEntry } from 'tar';
import { AppError, badRequest } from '../errors.js';
import { parseManifest, type Manifest } from './manifest.js';

/**
 * Reading a package archive (docs/packages.md, "The archive"): a gzip-compressed tar with
 * `manifest.json` at its root and one Turtle file per matrix. Everything
 * happens in memory; the limits are enforced while the archive is read, so a
 * decompression bomb is stopped as soon as it passes them, not after.
 */
export interface ArchiveLimits {
  /** Size of the compressed archive. */
  maxArchiveBytes: number;
  /** Total decompressed size (tar headers, padding and file contents). */
  maxUncompressedBytes: number;
  /** Entries of any type, directories included. */
  maxEntries: number;
  /** Size of one file in the archive. */
  maxFileBytes: number;
}

const MiB = 1024 * 1024;

export const DEFAULT_ARCHIVE_LIMITS: Readonly<ArchiveLimits> = Object.freeze({
  maxArchiveBytes: 20 * MiB,
  maxUncompressedBytes: 50 * MiB,
  maxEntries: 1000,
  maxFileBytes: 20 * MiB,
});

export interface PackageArchive {
  manifest: Manifest;
  /**
   * Matrix path (as in the manifest) -> its bytes, valid UTF-8 (`matrixText`
   * in `matrix-text.ts` makes them text). Kept as bytes: a matrix of 100,000 triples is
   * megabytes, which the pipeline worker decodes; made a string on the event
   * loop, and posted to the worker as one, it would hold the loop (docs/figures.md).
   * An install moves them to its worker (`PipelineJob.parse`): read once,
   * for one install.
   */
  files: Map<string, Uint8Array>;
  /** Hex SHA-256 of the archive bytes. */
  sha256: string;
}

const GZIP_MAGIC = [0x1f, 0x8b];
const ZSTD_MAGIC = [0x28, 0xb5, 0x2f, 0xfd];
const FILE_TYPES = new Set(['File', 'OldFile', 'ContiguousFile']);
const DESCRIBED_TYPES: Record<string, string> = {
  SymbolicLink: 'a symbolic link',
  Link: 'a hard link',
  CharacterDevice: 'a character device',
  BlockDevice: 'a block device',
  FIFO: 'a FIFO',
};

const startsWith = (bytes: Uint8Array, magic: number[]) => magic.every((b, i) => bytes[i] === b);
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The entry name as it is meant inside the package, or why it is unsafe. */
function entryName(raw: string): { name: string } | { unsafe: string } {
  if (/[\u0000-\u001f\u007f]/.test(raw)) return { unsafe: 'contains a control character' };
  if (raw.includes('\\')) return { unsafe: 'contains a backslash' };
  if (raw.startsWith('/') || /^[A-Za-z]:/.test(raw)) return { unsafe: 'is an absolute path' };
  const segments = raw.split('/');
  if (segments.includes('..')) return { unsafe: 'contains ".."' };
  const name = segments.filter((s) => s !== '' && s !== '.').join('/');
  return { name };
}

/**
 * Something that looks like RDF/XML rather than Turtle: an XML declaration,
 * a doctype, or a qualified root element with namespace declarations.
 */
function looksLikeXml(text: string): boolean {
  const head = text.replace(/^\uFEFF/, '').trimStart().slice(0, 4096);
  if (/^<\?xml[\s?]/i.test(head) || /^<!DOCTYPE/i.test(head) || /^<rdf:RDF[\s>]/.test(head)) return true;
  return /^<[A-Za-z_][\w.-]*(?::[A-Za-z_][\w.-]*)?[\s>]/.test(head) && /\bxmlns(?::[\w.-]+)?\s*=/.test(head);
}

const bytes = (n: number) => (n >= MiB ? `${(n / MiB).toFixed(1).replace(/\.0$/, '')} MiB` : `${n} bytes`);

/** Reads the tar entries of a gzip stream into memory, within the limits. */
function readEntries(archive: Buffer, limits: ArchiveLimits): Promise<Map<string, Buffer>> {
  return new Promise((resolve, reject) => {
    const files = new Map<string, Buffer>();
    const seen = new Set<string>();
    let settled = false;
    let inflated = 0;
    let declared = 0;
    let entries = 0;
    let sniffed = false;

    const gunzip = createGunzip();
    const parser = new Parser({ strict: true, zstd: false, brotli: false, maxMetaEntrySize: 64 * 1024 });

    const fail = (err: AppError) => {
      if (settled) return;
      settled = true;
      gunzip.removeAllListeners('data');
      gunzip.destroy();
      parser.removeAllListeners('entry');
      parser.abort(err);
      reject(err);
    };

    const bomb = () => badRequest(`The archive decompresses to more than ${bytes(limits.maxUncompressedBytes)}, the limit`,
      { limit: limits.maxUncompressedBytes });

    parser.on('error', (err: Error & { tarCode?: string }) => {
      if (settled) return;
      const reason = err.message.replace(/^TAR_[A-Z_]+: /, '');
      fail(badRequest(`The archive is not a valid tar archive inside gzip: ${reason}`));
    });
    parser.on('entry', (entry: ReadEntry) => {
      if (settled) { entry.resume(); return; }
      entries += 1;
      if (entries > limits.maxEntries) {
        fail(badRequest(`The archive has more than ${limits.maxEntries} entries, the limit`, { limit: limits.maxEntries }));
        return;
      }
      const raw = entry.path;
      const checked = entryName(raw);
      if ('unsafe' in checked) {
        fail(badRequest(`Unsafe archive entry "${raw.slice(0, 200)}": the name ${checked.unsafe}`, { entry: raw.slice(0, 200) }));
        return;
      }
      if (entry.type === 'Directory' || entry.type === 'GNUDumpDir') {
        entry.resume();
        return;
      }
      if (!FILE_TYPES.has(entry.type)) {
        const what = DESCRIBED_TYPES[entry.type] ?? `of type ${entry.type}`;
        fail(badRequest(`Unsafe archive entry "${raw}": it is ${what}; a package holds only regular files and directories`, { entry: raw }));
        return;
      }
      const size = entry.size ?? 0;
      if (size > limits.maxFileBytes) {
        fail(badRequest(`Archive entry "${raw}" is ${bytes(size)}, over the limit of ${bytes(limits.maxFileBytes)} per file`,
          { entry: raw, limit: limits.maxFileBytes }));
        return;
      }
      declared += size;
      if (declared > limits.maxUncompressedBytes) {
        fail(bomb());
        return;
      }
      if (seen.has(checked.name)) {
        fail(badRequest(`The archive holds "${checked.name}" more than once`, { entry: checked.name }));
        return;
      }
      seen.add(checked.name);
      // Copied into a buffer of the declared size as the pieces arrive: joining the pieces of a
      // large file at the end holds the event loop in one long copy (docs/figures.md).
      const content = Buffer.allocUnsafeSlow(size);
      let got = 0;
      entry.on('data', (chunk: Buffer) => {
        const room = size - got;
        if (room <= 0) return; // never more than the header declared
        got += chunk.copy(content, got, 0, Math.min(chunk.length, room));
      });
      entry.on('end', () => { files.set(checked.name, got === size ? content : content.subarray(0, got)); });
    });
    // Two zero blocks end a tar; whatever follows is ignored, so stop inflating it.
    let ended = false;
    parser.on('eof', () => {
      if (settled || ended) return;
      ended = true;
      gunzip.removeAllListeners('data');
      gunzip.destroy();
      parser.end();
    });
    parser.on('end', () => {
      if (settled) return;
      settled = true;
      resolve(files);
    });

    gunzip.on('data', (chunk: Buffer) => {
      if (settled) return;
      if (!sniffed) {
        sniffed = true;
        if (startsWith(chunk, GZIP_MAGIC) || startsWith(chunk, ZSTD_MAGIC)) {
          fail(badRequest('The archive is compressed twice; a package is one gzip-compressed tar'));
          return;
        }
      }
      inflated += chunk.length;
      if (inflated > limits.maxUncompressedBytes) {
        fail(bomb());
        return;
      }
      parser.write(chunk);
    });
    gunzip.on('end', () => { if (!settled && !ended) parser.end(); });
    gunzip.on('error', (err: Error) => {
      if (!ended) fail(badRequest(`The archive is not valid gzip data: ${err.message}`));
    });
    gunzip.end(archive);
  });
}

/**
 * Reads and checks a package archive held in memory: size limits, entry
 * safety (no "..", absolute names, links or devices), the manifest, and that
 * every matrix it names is a UTF-8 Turtle file in the archive. Throws
 * BAD_REQUEST with a message saying what is wrong. Turtle syntax and SHACL
 * are checked later, by the install.
 */
export async function readPackageArchive(archive: Buffer, limits: Partial<ArchiveLimits> = {}): Promise<PackageArchive> {
  const lim: ArchiveLimits = { ...DEFAULT_ARCHIVE_LIMITS, ...limits };
  if (!Buffer.isBuffer(archive) || archive.length === 0) throw badRequest('The package archive is empty');
  if (archive.length > lim.maxArchiveBytes) {
    throw badRequest(`The archive is ${bytes(archive.length)}, over the limit of ${bytes(lim.maxArchiveBytes)}`, { limit: lim.maxArchiveBytes });
  }
  if (!startsWith(archive, GZIP_MAGIC)) throw badRequest('The file is not a gzip-compressed tar archive (.tgz)');
  const sha256 = createHash('sha256').update(archive).digest('hex');
  const entries = await readEntries(archive, lim);

  const manifestBytes = entries.get('manifest.json');
  if (!manifestBytes) {
    const nested = [...entries.keys()].find((p) => p.endsWith('/manifest.json'));
    throw badRequest(nested
      ? `The archive has no manifest.json at its root (found "${nested}"; pack the package folder's contents, not the folder)`
      : 'The archive has no manifest.json at its root');
  }
  let json: unknown;
  try {
    json = JSON.parse(utf8.decode(manifestBytes).replace(/^\uFEFF/, ''));
  } catch (err) {
    const why = err instanceof SyntaxError ? err.message : 'it is not valid UTF-8';
    throw badRequest(`manifest.json is not valid JSON: ${why}`);
  }
  const manifest = parseManifest(json);

  const files = new Map<string, Uint8Array>();
  for (const matrix of manifest.matrices) {
    const content = entries.get(matrix.path);
    if (!content) {
      throw badRequest(`manifest.json names the file "${matrix.path}" for matrix "${matrix.name}", but the archive does not hold it`,
        { matrix: matrix.name, path: matrix.path });
    }
    // Checked as bytes: the text is made where it is parsed (the pipeline worker), not on the event loop.
    if (!isUtf8(content)) throw badRequest(`"${matrix.path}" is not UTF-8 text`, { path: matrix.path });
    if (looksLikeXml(new TextDecoder().decode(content.subarray(0, XML_SNIFF_BYTES)))) {
      throw badRequest(`"${matrix.path}" holds RDF/XML; matrices must be written in Turtle`, { path: matrix.path });
    }
    files.set(matrix.path, content);
  }
  return { manifest, files, sha256 };
}

/** The bytes at the start of a matrix file that the RDF/XML check reads (it looks at the first 4096 characters after white space). */
const XML_SNIFF_BYTES = 64 * 1024;

