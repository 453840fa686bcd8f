/**
 * Online backup and restore of an embedded store's data directory
 * (docs/backup.md).
 *
 * A backup is taken by another process while the service keeps writing:
 * the newest snapshot, the journal files holding the records after it, the
 * service's other files (store marker, issuer key, registry archives), and
 * last a manifest of every file's size and SHA-256. The journal's last file
 * is copied up to its last whole record whose checksum holds, so the backup
 * is the store at one sequence number; every write acknowledged before the
 * backup began is in it (a record is synced before its write is answered).
 * Files the service removes meanwhile (an older snapshot, a pruned journal)
 * are read through descriptors opened before, and a listing that loses a
 * file before it is opened is taken again. A backup without its manifest
 * is incomplete: `restore` refuses it.
 */
import { createHash } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readSync, readdirSync, type Dirent } from 'node:fs';
import { mkdir, open, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { HEADER_BYTES, JOURNAL_FILE, checksum, lengthAndSeqBytes, recordTime } from '../journal-records.js';
import { fsyncDir } from '../fsutil.js';

export const MANIFEST = 'manifest.json';
const FORMAT = 'wsm-backup 1';
const SNAPSHOT_FILE = /^snapshot-(\d{16})\.(nq|trig)$/;
/** Files and folders of a data directory besides snapshots and journals that a backup carries. */
const CARRIED = new Set(['store.json', 'issuer-key.json', 'archives']);
const COPY_BYTES = 4 * 2 ** 20;

export interface BackupManifest {
  format: typeof FORMAT;
  createdAt: string;
  /** The last journal record in the backup: the store as of this record. */
  seq: number;
  snapshotSeq: number;
  /**
   * When the snapshot's last record (`snapshotSeq`) was committed, when the
   * data directory still held it with its time: the earliest point
   * `restore --to-time` can go back to. Absent in older backups.
   */
  snapshotAt?: string;
  files: Array<{ path: string; bytes: number; sha256: string }>;
}

/** Refusal of a backup or restore, with the sentence to print. */
export class BackupError extends Error {}

interface Listed { snapshot: { name: string; seq: number } | null; journals: Array<{ name: string; firstSeq: number }> }

function list(dataDir: string): Listed {
  const names = readdirSync(dataDir);
  const snapshots = names.flatMap((name) => {
    const m = SNAPSHOT_FILE.exec(name);
    return m ? [{ name, seq: Number(m[1]) }] : [];
  }).sort((a, b) => b.seq - a.seq);
  const journals = names.flatMap((name) => {
    const m = JOURNAL_FILE.exec(name);
    return m ? [{ name, firstSeq: Number(m[1]) }] : [];
  }).sort((a, b) => a.firstSeq - b.firstSeq);
  const snapshot = snapshots[0] ?? null;
  // The journal files that may hold records after the snapshot: the last one starting at or before it, and every later one.
  const after = snapshot?.seq ?? 0;
  let first = 0;
  for (const [i, j] of journals.entries()) if (j.firstSeq <= after + 1) first = i;
  return { snapshot, journals: journals.slice(first) };
}

/**
 * The whole records of a journal file (read through `fd`) from its start up
 * to the first one that is cut short or fails its checksum: each one's seq,
 * commit time (absent in older records) and the byte where it ends.
 */
function* wholeRecordsOf(fd: number): Generator<{ seq: number; at: number | undefined; end: number }> {
  const header = Buffer.alloc(HEADER_BYTES);
  let position = 0;
  for (;;) {
    if (readSync(fd, header, 0, HEADER_BYTES, position) < HEADER_BYTES) return;
    const length = header.readUInt32LE(0);
    const seq = Number(header.readBigUInt64LE(12));
    const payload = Buffer.allocUnsafe(length);
    if (readSync(fd, payload, 0, length, position + HEADER_BYTES) < length) return;
    if (!checksum(lengthAndSeqBytes(length, seq), payload).equals(header.subarray(4, 12))) return;
    position += HEADER_BYTES + length;
    yield { seq, at: recordTime(payload), end: position };
  }
}

/** Where the whole records of a journal file up to `upToSeq` end, and the last one's seq (reading through `fd`). */
function wholeRecords(fd: number, upToSeq = Infinity): { bytes: number; lastSeq: number | null } {
  let bytes = 0;
  let lastSeq: number | null = null;
  for (const record of wholeRecordsOf(fd)) {
    if (record.seq > upToSeq) break;
    bytes = record.end;
    lastSeq = record.seq;
  }
  return { bytes, lastSeq };
}

/**
 * The commit time of record `seq` in the data directory's journal files
 * (its snapshot's last record, which a backup does not copy): undefined
 * when no file holds it whole, it has no time, or the file is gone.
 */
function recordTimeIn(dataDir: string, seq: number): number | undefined {
  if (seq === 0) return undefined;
  const holder = readdirSync(dataDir)
    .flatMap((name) => {
      const m = JOURNAL_FILE.exec(name);
      return m && Number(m[1]) <= seq ? [{ name, firstSeq: Number(m[1]) }] : [];
    })
    .sort((a, b) => b.firstSeq - a.firstSeq)[0];
  if (!holder) return undefined;
  let fd: number;
  try {
    fd = openSync(join(dataDir, holder.name), constants.O_RDONLY);
  } catch {
    return undefined;
  }
  try {
    for (const record of wholeRecordsOf(fd)) if (record.seq === seq) return record.at;
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/** Copies `bytes` bytes of `fd` to `target`; their SHA-256. */
async function copyFd(fd: number, bytes: number, target: string): Promise<string> {
  const hash = createHash('sha256');
  const out = await open(target, 'wx');
  try {
    const buffer = Buffer.allocUnsafe(COPY_BYTES);
    for (let at = 0; at < bytes;) {
      const n = readSync(fd, buffer, 0, Math.min(COPY_BYTES, bytes - at), at);
      if (n === 0) throw new BackupError(`${target}: the source ended at byte ${at} of ${bytes}`);
      hash.update(buffer.subarray(0, n));
      await out.write(buffer, 0, n);
      at += n;
    }
    await out.sync();
  } finally {
    await out.close();
  }
  return hash.digest('hex');
}

function walk(dir: string): string[] {
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : e.isFile() && !e.name.endsWith('.tmp') ? [join(dir, e.name)] : []));
}

async function emptyOrMissing(dir: string): Promise<boolean> {
  try {
    return (await readdir(dir)).length === 0;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return true;
    throw err;
  }
}

/** Takes a backup of `dataDir` (a running service's or not) into the empty or new directory `target`. */
export async function backup(dataDir: string, target: string): Promise<BackupManifest> {
  if (!(await emptyOrMissing(target))) throw new BackupError(`${target} is not empty: a backup goes into a new or empty directory`);
  await mkdir(target, { recursive: true });
  // Open every file the backup needs before copying any, so the service's pruning cannot take one away midway.
  let opened: { listed: Listed; fds: Map<string, number> } | undefined;
  for (let attempt = 0; attempt < 20 && !opened; attempt++) {
    const listed = list(dataDir);
    if (!listed.snapshot && listed.journals.length === 0) throw new BackupError(`${dataDir} holds no store (no snapshot-*.trig, no journal-*.log)`);
    const fds = new Map<string, number>();
    try {
      for (const name of [...(listed.snapshot ? [listed.snapshot.name] : []), ...listed.journals.map((j) => j.name)]) {
        fds.set(name, openSync(join(dataDir, name), constants.O_RDONLY));
      }
      opened = { listed, fds };
    } catch (err) {
      for (const fd of fds.values()) closeSync(fd);
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
  if (!opened) throw new BackupError(`${dataDir} kept changing its files while the backup listed them; try again`);
  const { listed, fds } = opened;
  const files: BackupManifest['files'] = [];
  let seq = listed.snapshot?.seq ?? 0;
  try {
    if (listed.snapshot) {
      const fd = fds.get(listed.snapshot.name)!;
      const bytes = fstatSync(fd).size;
      files.push({ path: listed.snapshot.name, bytes, sha256: await copyFd(fd, bytes, join(target, listed.snapshot.name)) });
    }
    for (const journal of listed.journals) {
      const fd = fds.get(journal.name)!;
      // Whole records only: the last file may end in a record being written now.
      const { bytes, lastSeq } = wholeRecords(fd);
      if (lastSeq !== null) seq = Math.max(seq, lastSeq);
      files.push({ path: journal.name, bytes, sha256: await copyFd(fd, bytes, join(target, journal.name)) });
    }
  } finally {
    for (const fd of fds.values()) closeSync(fd);
  }
  for (const name of CARRIED) {
    const source = join(dataDir, name);
    const found = await stat(source).catch(() => null);
    if (!found) continue;
    for (const file of found.isDirectory() ? walk(source) : [source]) {
      const path = relative(dataDir, file);
      await mkdir(join(target, path, '..'), { recursive: true });
      let fd: number;
      try {
        fd = openSync(file, constants.O_RDONLY);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw err;
      }
      try {
        const bytes = fstatSync(fd).size;
        files.push({ path, bytes, sha256: await copyFd(fd, bytes, join(target, path)) });
      } finally {
        closeSync(fd);
      }
    }
  }
  const snapshotSeq = listed.snapshot?.seq ?? 0;
  const snapshotAt = recordTimeIn(dataDir, snapshotSeq);
  const manifest: BackupManifest = {
    format: FORMAT, createdAt: new Date().toISOString(), seq, snapshotSeq,
    ...(snapshotAt !== undefined ? { snapshotAt: new Date(snapshotAt).toISOString() } : {}), files,
  };
  // Written last, whole or not at all: its presence is what makes the backup complete.
  await writeFile(join(target, `${MANIFEST}.tmp`), `${JSON.stringify(manifest, null, 2)}\n`, { flush: true });
  await rename(join(target, `${MANIFEST}.tmp`), join(target, MANIFEST));
  await fsyncDir(target);
  return manifest;
}

/** Reads and checks a backup's manifest and files; the manifest. */
export async function verifyBackup(source: string): Promise<BackupManifest> {
  let text: string;
  try {
    text = await readFile(join(source, MANIFEST), 'utf8');
  } catch {
    throw new BackupError(`${source} is not a complete backup: it has no ${MANIFEST} (a backup is complete only once its manifest is written last)`);
  }
  let manifest: BackupManifest;
  try {
    manifest = JSON.parse(text) as BackupManifest;
  } catch {
    throw new BackupError(`${join(source, MANIFEST)} is not JSON`);
  }
  if (manifest.format !== FORMAT || !Array.isArray(manifest.files) || !Number.isInteger(manifest.seq)) {
    throw new BackupError(`${join(source, MANIFEST)} is not a manifest of this service's backups (${FORMAT})`);
  }
  for (const file of manifest.files) {
    if (file.path.split(/[\\/]/).includes('..')) throw new BackupError(`${MANIFEST} names ${file.path}, outside the backup`);
    let bytes: Buffer;
    try {
      bytes = await readFile(join(source, file.path));
    } catch {
      throw new BackupError(`${source} lacks ${file.path}, which its manifest lists`);
    }
    if (bytes.length !== file.bytes || createHash('sha256').update(bytes).digest('hex') !== file.sha256) {
      throw new BackupError(`${file.path} in ${source} does not match its manifest (size or SHA-256): the backup is damaged`);
    }
  }
  return manifest;
}

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * The last journal record of the backup in `source` committed at or before
 * `time`: the records are walked in order up to the first one committed
 * after it. Refused (`BackupError`, saying why) when the backup cannot tell:
 * `time` is before its snapshot, or records without a commit time (written
 * before records carried one) lie where the answer would be.
 */
export function seqAtTime(source: string, manifest: BackupManifest, time: Date): { seq: number; at?: number } {
  const t = time.getTime();
  const when = time.toISOString();
  const snapshotSeq = manifest.snapshotSeq;
  const useSeq = `give --to-seq N instead (N from ${snapshotSeq}, the snapshot, to ${manifest.seq})`;
  // Every record of the backup was committed before the backup ended.
  if (t >= Date.parse(manifest.createdAt)) return { seq: manifest.seq };
  const journals = manifest.files
    .flatMap((f) => {
      const m = JOURNAL_FILE.exec(f.path);
      return m ? [{ path: f.path, firstSeq: Number(m[1]) }] : [];
    })
    .sort((a, b) => a.firstSeq - b.firstSeq);
  let snapshotAt = manifest.snapshotAt !== undefined ? Date.parse(manifest.snapshotAt) : undefined;
  let found: { seq: number; at?: number } | undefined;
  let untimed: { first: number; last: number } | undefined;
  let after: { seq: number; at: number } | undefined;
  walk: for (const journal of journals) {
    const fd = openSync(join(source, journal.path), constants.O_RDONLY);
    try {
      for (const { seq, at } of wholeRecordsOf(fd)) {
        if (seq > manifest.seq) break walk;
        if (seq === snapshotSeq && at !== undefined) snapshotAt = at;
        if (seq <= snapshotSeq) continue;
        if (at === undefined) {
          untimed = { first: untimed?.first ?? seq, last: seq };
        } else if (at <= t) {
          // Records are in commit order: the ones without a time before this one were committed before it.
          found = { seq, at };
          untimed = undefined;
        } else {
          after = { seq, at };
          break walk;
        }
      }
    } finally {
      closeSync(fd);
    }
  }
  if (untimed) {
    throw new BackupError(
      `journal records ${untimed.first} to ${untimed.last} of this backup carry no commit time (a version of the service that did not record it wrote them), ` +
        `so whether they were committed before ${when} cannot be told` +
        (found ? `; the last record known to be committed by then is ${found.seq} (at ${iso(found.at!)})` : '') +
        (after ? `, and record ${after.seq} was committed after it (at ${iso(after.at)})` : '') +
        `: ${useSeq}`,
    );
  }
  if (found) return found;
  // No record after the snapshot was committed by `time`: the store was as of the snapshot, if the snapshot was by then.
  if (snapshotAt !== undefined && snapshotAt <= t) return { seq: snapshotSeq, at: snapshotAt };
  const first = after ? `journal record ${after.seq}, the first after the backup's snapshot, was committed at ${iso(after.at)}` : '';
  if (snapshotSeq === 0) {
    throw new BackupError(`${when} is before the backup's first write (${first}): the store held nothing then`);
  }
  if (snapshotAt !== undefined) {
    throw new BackupError(`${when} is before the backup's snapshot (journal record ${snapshotSeq}, committed at ${iso(snapshotAt)}): the backup holds no earlier state of the store`);
  }
  throw new BackupError(
    `${when} may be before the backup's snapshot (journal record ${snapshotSeq}): ${first ? `${first}, and ` : ''}` +
      `when the snapshot's own last record was committed is not in the backup (it carries no time, or was no longer in the data directory), ` +
      `so the backup cannot show the store as of ${when}; the earliest state it holds is --to-seq ${snapshotSeq}`,
  );
}

/** Where a restore stops: a journal record, or the last record committed at or before a time. */
export type RestorePoint = { seq: number } | { time: Date };

/** What a restore put in place: the store as of journal record `seq`. */
export interface Restored {
  seq: number;
  /** That record's commit time, when the restore went by time and the record has one. */
  at?: number;
  /** When the backup was taken (its manifest's `createdAt`). */
  backupAt: string;
}

/**
 * Fills the empty (or new) data directory `dataDir` from the backup in
 * `source`; with `to`, the store as of that journal record (at least the
 * backup's snapshot, at most its last record) or as of the last record
 * committed at or before that time (`seqAtTime`).
 */
export async function restore(source: string, dataDir: string, to?: RestorePoint): Promise<Restored> {
  const manifest = await verifyBackup(source);
  let point: { seq: number; at?: number } = { seq: manifest.seq };
  if (to && 'seq' in to) {
    if (to.seq < manifest.snapshotSeq || to.seq > manifest.seq) {
      throw new BackupError(`--to-seq ${to.seq} is outside this backup: it holds the store from record ${manifest.snapshotSeq} (its snapshot) to record ${manifest.seq}`);
    }
    point = { seq: to.seq };
  } else if (to) {
    point = seqAtTime(source, manifest, to.time);
  }
  if (!(await emptyOrMissing(dataDir))) throw new BackupError(`${dataDir} is not empty: a restore fills only a new or empty data directory`);
  await mkdir(dataDir, { recursive: true });
  const last = point.seq;
  try {
    for (const file of manifest.files) {
      const journal = JOURNAL_FILE.exec(file.path);
      // A journal file that starts after the last record wanted holds none of it.
      if (journal && Number(journal[1]) > last) continue;
      const from = openSync(join(source, file.path), constants.O_RDONLY);
      try {
        const bytes = journal ? wholeRecords(from, last).bytes : file.bytes;
        await mkdir(join(dataDir, file.path, '..'), { recursive: true });
        await copyFd(from, bytes, join(dataDir, file.path));
      } finally {
        closeSync(from);
      }
    }
    await fsyncDir(dataDir);
  } catch (err) {
    // Nothing half restored is left for a service to start on.
    for (const name of await readdir(dataDir)) await rm(join(dataDir, name), { recursive: true, force: true });
    throw err;
  }
  return { ...point, backupAt: manifest.createdAt };
}
