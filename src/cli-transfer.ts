/**
 * `wsm backup | restore | export | import` (docs/backup.md): backups of an
 * embedded store's data directory, and one workspace moved through a
 * running service's export and import endpoints.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import { z } from 'zod';

export const TRANSFER_USAGE = `  backup <dir>                  copy the data directory (WSM_DATA_DIR) of a running or stopped embedded
                                service into the new or empty <dir>, consistent at one journal record
  restore <dir> [--to-seq N | --to-time T]
                                fill the new or empty WSM_DATA_DIR from the backup in <dir>; with
                                --to-seq, the store as of journal record N (inside the backup's journal);
                                with --to-time, as of the last record committed at or before T
                                (ISO 8601 with a zone: 2026-12-04T15:30:00Z, 2026-12-04T16:30:00+01:00)
  export <workspace> [options]  save a workspace of a running service (N-Quads; --trig for TriG)
      --out FILE                to FILE (default: standard output); FILE.gz is written gzip'ed
  import <file> [options]       make a workspace of an export on a running service (system administrators)
      --slug S                  under another slug
      (export and import: --url URL (default http://HOST:PORT), --token T | --api-key K, or WSM_TOKEN / WSM_API_KEY)
`;

type Fail = (message: string, code?: number) => never;

export async function backupCommand(args: string[], dataDir: string, fail: Fail): Promise<void> {
  const { backup, BackupError } = await import('./store/embedded/backup.js');
  const { positionals } = parseArgs({ args, allowPositionals: true, options: {} });
  if (positionals.length !== 1) fail('usage: wsm backup <dir>');
  try {
    const manifest = await backup(dataDir, positionals[0]!);
    const bytes = manifest.files.reduce((sum, f) => sum + f.bytes, 0);
    process.stdout.write(`Backed up ${dataDir} to ${positionals[0]} at journal record ${manifest.seq} (${manifest.files.length} files, ${bytes} bytes)\n`);
  } catch (err) {
    if (err instanceof BackupError) fail(err.message, 1);
    throw err;
  }
}

/**
 * An ISO 8601 date and time with its zone (`Z` or an offset), checked by
 * zod (a 31st of February or 24:30 is refused); digits past the millisecond
 * are dropped (records carry milliseconds). Null when `text` is not one.
 */
export function parseIsoTime(text: string): Date | null {
  if (!z.iso.datetime({ offset: true }).safeParse(text).success) return null;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? null : new Date(ms);
}

export async function restoreCommand(args: string[], dataDir: string, fail: Fail): Promise<void> {
  const { restore, BackupError } = await import('./store/embedded/backup.js');
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { 'to-seq': { type: 'string' }, 'to-time': { type: 'string' } } });
  if (positionals.length !== 1) fail('usage: wsm restore <dir> [--to-seq N | --to-time T]');
  if (values['to-seq'] !== undefined && values['to-time'] !== undefined) fail('give --to-seq or --to-time, not both');
  let to: { seq: number } | { time: Date } | undefined;
  if (values['to-seq'] !== undefined) {
    const seq = Number(values['to-seq']);
    if (!/^\d+$/.test(values['to-seq']) || !Number.isSafeInteger(seq)) fail(`--to-seq takes a journal record number, not "${values['to-seq']}"`);
    to = { seq };
  }
  if (values['to-time'] !== undefined) {
    const time = parseIsoTime(values['to-time']);
    if (!time) fail(`--to-time takes an ISO 8601 date and time with its zone, such as 2026-12-04T15:30:00Z or 2026-12-04T16:30:00+01:00, not "${values['to-time']}"`);
    to = { time };
  }
  try {
    const restored = await restore(positionals[0]!, dataDir, to);
    const committed = restored.at !== undefined ? ` (committed at ${new Date(restored.at).toISOString()})` : '';
    const later = to && 'time' in to && to.time.getTime() > Date.parse(restored.backupAt)
      ? ` ${to.time.toISOString()} is after the backup was taken (${restored.backupAt}): writes made after that are not in it.`
      : '';
    process.stdout.write(`Restored ${positionals[0]} into ${dataDir}, as of journal record ${restored.seq}${committed}.${later} Start the service with WSM_DATA_DIR=${dataDir}.\n`);
  } catch (err) {
    if (err instanceof BackupError) fail(err.message, 1);
    throw err;
  }
}

interface Target { root: string; headers: Record<string, string> }

function target(values: { url?: string | undefined; token?: string | undefined; 'api-key'?: string | undefined }, defaultUrl: string, fail: Fail): Target {
  const token = values.token ?? process.env.WSM_TOKEN;
  const apiKey = values['api-key'] ?? process.env.WSM_API_KEY;
  if (!token && !apiKey) fail('this needs --token T (or WSM_TOKEN) or --api-key K (or WSM_API_KEY)');
  return { root: (values.url ?? defaultUrl).replace(/\/+$/, ''), headers: apiKey && !token ? { 'X-Api-Key': apiKey } : { Authorization: `Bearer ${token}` } };
}

async function call(url: string, init: RequestInit, fail: Fail): Promise<Response> {
  try {
    return await fetch(url, { ...init, signal: AbortSignal.timeout(30 * 60_000) });
  } catch (err) {
    fail(`cannot reach ${new URL(url).origin} (${err instanceof Error ? err.message : String(err)}); is the service running?`, 1);
  }
}

async function errorOf(res: Response): Promise<string> {
  const body = await res.json().catch(() => null) as { error?: { message?: string } } | null;
  return body?.error?.message ?? `the service answered ${res.status}`;
}

const transferOptions = { url: { type: 'string' }, token: { type: 'string' }, 'api-key': { type: 'string' } } as const;

export async function exportCommand(args: string[], defaultUrl: string, fail: Fail): Promise<void> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { ...transferOptions, trig: { type: 'boolean' }, out: { type: 'string' } } });
  if (positionals.length !== 1) fail('usage: wsm export <workspace> [--trig] [--out FILE] [--url URL] [--token T | --api-key K]');
  const { root, headers } = target(values, defaultUrl, fail);
  const gzip = values.out?.endsWith('.gz') ?? false;
  const res = await call(`${root}/api/v1/workspaces/${encodeURIComponent(positionals[0]!)}/export`, {
    // fetch undoes a gzip answer itself, so gzip is asked for only where the file is kept gzip'ed (then it is compressed here).
    headers: { ...headers, Accept: values.trig ? 'application/trig' : 'application/n-quads' },
  }, fail);
  if (res.status !== 200 || !res.body) fail(await errorOf(res), 1);
  const source = Readable.fromWeb(res.body as import('node:stream/web').ReadableStream<Uint8Array>);
  if (!values.out) {
    await pipeline(source, process.stdout);
    return;
  }
  const { createGzip } = await import('node:zlib');
  await (gzip ? pipeline(source, createGzip(), createWriteStream(values.out)) : pipeline(source, createWriteStream(values.out)));
  process.stderr.write(`Exported ${positionals[0]} to ${values.out} (${(await stat(values.out)).size} bytes)\n`);
}

export async function importCommand(args: string[], defaultUrl: string, fail: Fail): Promise<void> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { ...transferOptions, slug: { type: 'string' } } });
  if (positionals.length !== 1) fail('usage: wsm import <file> [--slug S] [--url URL] [--token T | --api-key K]');
  const file = positionals[0]!;
  const plain = file.replace(/\.gz$/, '');
  const type = /\.(trig)$/i.test(plain) ? 'application/trig' : /\.(nq|nquads)$/i.test(plain) ? 'application/n-quads' : null;
  if (!type) fail(`${file}: name the file .nq or .trig (optionally .gz) so its format is known`);
  const { root, headers } = target(values, defaultUrl, fail);
  const body = Readable.toWeb(createReadStream(file)) as ReadableStream<Uint8Array>;
  const res = await call(`${root}/api/v1/workspaces/import${values.slug ? `?slug=${encodeURIComponent(values.slug)}` : ''}`, {
    method: 'POST', body, duplex: 'half',
    headers: { ...headers, 'Content-Type': type, ...(file.endsWith('.gz') ? { 'Content-Encoding': 'gzip' } : {}), Accept: 'application/json' },
  } as RequestInit, fail);
  if (res.status !== 201) fail(await errorOf(res), 1);
  const ws = ((await res.json()) as { data: { slug: string; id: string } }).data;
  process.stdout.write(`Imported workspace ${ws.slug} (${ws.id}) into ${root}\n`);
}
