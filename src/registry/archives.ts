import { mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import { fsyncDir } from '../store/fsutil.js';
import { newId } from '../rdf/ids.js';

/**
 * Where the hosted registry keeps the bytes of published archives, by
 * sha256: the data directory (`archives/<sha256>.tgz`), or, when several
 * instances serve one registry, a place they share (the cluster store keeps
 * them in PostgreSQL: `QuadStore.archives`).
 */
export interface ArchiveFiles {
  /** Stores the bytes durably; storing the same sha256 again changes nothing. */
  put(sha: string, bytes: Buffer): Promise<void>;
  /** The bytes, or undefined when none were stored under this sha256. */
  get(sha: string): Promise<Buffer | undefined>;
}

function checkSha(sha: string): void {
  if (!/^[0-9a-f]{64}$/.test(sha)) throw new Error(`not a sha256: ${sha}`);
}

/** Archives as files of a directory. */
export class DirectoryArchives implements ArchiveFiles {
  constructor(readonly dir: string) {}

  private file(sha: string): string {
    checkSha(sha);
    return path.join(this.dir, `${sha}.tgz`);
  }

  /** Temp file, fsync, rename, fsync of the directory. */
  async put(sha: string, bytes: Buffer): Promise<void> {
    const target = this.file(sha);
    await mkdir(this.dir, { recursive: true });
    const temp = `${target}.${process.pid}.${newId()}.tmp`;
    try {
      const handle = await open(temp, 'w');
      try {
        await handle.writeFile(bytes);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temp, target);
      await fsyncDir(this.dir);
    } catch (err) {
      await unlink(temp).catch(() => undefined);
      throw err;
    }
  }

  async get(sha: string): Promise<Buffer | undefined> {
    try {
      return await readFile(this.file(sha));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }
}
