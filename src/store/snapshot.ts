import { createHash } from 'node:crypto';
import { open, readFile, readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import oxigraph from 'oxigraph';
import { fsyncDir } from './fsutil.js';

/*
 * A snapshot is one file `snapshot-<seq>.nq`: a header line
 *   # wsm-snapshot v1 seq=<seq> sha256=<hex of the body>
 * then the whole store as N-Quads. `seq` is the last journal record the
 * snapshot includes. The file appears under its name only by an atomic
 * rename, after its bytes were fsynced.
 */
const HEADER = /^# wsm-snapshot v1 seq=(\d+) sha256=([0-9a-f]{64})$/;
const NAME = /^snapshot-(\d{16})\.nq$/;

/** The file name of the snapshot that includes journal records up to `seq`. */
export function snapshotFileName(seq: number): string {
  return `snapshot-${String(seq).padStart(16, '0')}.nq`;
}

/** Snapshots in `dir`, newest (highest seq) first. */
export async function listSnapshots(dir: string): Promise<{ seq: number; file: string }[]> {
  const found: { seq: number; file: string }[] = [];
  for (const name of await readdir(dir)) {
    const m = NAME.exec(name);
    if (m) found.push({ seq: Number(m[1]), file: join(dir, name) });
  }
  return found.sort((a, b) => b.seq - a.seq);
}

/**
 * Writes a snapshot durably: to a temporary file, fsynced, renamed into
 * place, then the directory fsynced. Returns the snapshot's path.
 */
export async function writeSnapshot(dir: string, seq: number, nquads: string): Promise<string> {
  const body = Buffer.from(nquads, 'utf8');
  const sha = createHash('sha256').update(body).digest('hex');
  const header = Buffer.from(`# wsm-snapshot v1 seq=${seq} sha256=${sha}\n`, 'utf8');
  const file = join(dir, snapshotFileName(seq));
  const temp = `${file}.tmp`;
  const handle = await open(temp, 'w');
  try {
    await handle.writeFile(Buffer.concat([header, body]));
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temp, file);
  await fsyncDir(dir);
  return file;
}

/** The snapshot that was loaded. */
export interface LoadedSnapshot {
  seq: number;
  file: string;
}

/**
 * Loads the newest valid snapshot of `dir` into `raw` (an empty store).
 * A snapshot whose header or checksum is wrong, or that does not parse, is
 * reported through `onWarning` and the next older one is tried. Returns
 * null when there is no valid snapshot.
 */
export async function loadLatestSnapshot(
  dir: string,
  raw: oxigraph.Store,
  onWarning: (message: string) => void,
): Promise<LoadedSnapshot | null> {
  for (const { seq, file } of await listSnapshots(dir)) {
    const bytes = await readFile(file);
    const newline = bytes.indexOf(0x0a);
    const header = HEADER.exec(newline < 0 ? '' : bytes.subarray(0, newline).toString('utf8'));
    const body = bytes.subarray(newline + 1);
    if (!header || Number(header[1]) !== seq) {
      onWarning(`snapshot ${file}: missing or wrong header; ignored`);
      continue;
    }
    if (createHash('sha256').update(body).digest('hex') !== header[2]) {
      onWarning(`snapshot ${file}: checksum mismatch; ignored`);
      continue;
    }
    try {
      raw.load(body, { format: 'application/n-quads' });
    } catch (err) {
      onWarning(`snapshot ${file}: does not load (${(err as Error).message}); ignored`);
      // A failed load may have added part of the file: start again from empty.
      for (const quad of raw.match()) raw.delete(quad);
      continue;
    }
    return { seq, file };
  }
  return null;
}

/** Removes snapshots older than `keepSeq` and leftover temporary files. */
export async function removeOldSnapshots(dir: string, keepSeq: number): Promise<void> {
  for (const name of await readdir(dir)) {
    const m = NAME.exec(name);
    if ((m && Number(m[1]) < keepSeq) || /^snapshot-\d{16}\.nq\.tmp$/.test(name)) {
      await rm(join(dir, name), { force: true });
    }
  }
}
