import { open } from 'node:fs/promises';

/**
 * Fsyncs a directory so that a file created, renamed or removed in it is
 * durable (the directory entry, not only the file's bytes).
 */
export async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } catch (err) {
    // Some platforms cannot fsync a directory; on Linux this does not happen.
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EISDIR' && code !== 'EINVAL' && code !== 'EPERM') throw err;
  } finally {
    await handle.close();
  }
}
