import { readdir, stat } from 'node:fs/promises';
import { create } from 'tar';
import { badRequest } from '../errors.js';

/**
 * Packs a package directory (manifest.json at its top, one folder per
 * matrix) into the gzip-compressed tar the service installs. Entry names are
 * relative to the directory, without a "./" prefix; ownership and times are
 * left out, so the same directory always gives the same bytes.
 */
export async function buildPackageArchive(dir: string): Promise<Buffer> {
  const info = await stat(dir).catch(() => null);
  if (!info?.isDirectory()) throw badRequest(`"${dir}" is not a directory`);
  const names = (await readdir(dir)).filter((n) => !n.startsWith('.')).sort();
  if (!names.includes('manifest.json')) throw badRequest(`"${dir}" has no manifest.json`);
  const pack = create({ cwd: dir, gzip: true, portable: true, noMtime: true, filter: (p) => !p.split('/').some((s) => s.startsWith('.') && s !== '.') }, names);
  const chunks: Buffer[] = [];
  for await (const chunk of pack) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
