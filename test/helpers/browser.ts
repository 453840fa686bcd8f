import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Finds Debian's Chromium for the browser tests (CHROMIUM_PATH overrides).
 * Answers null when there is none; the caller fails under CI and skips
 * locally.
 */
export function findChromium(): string | null {
  const candidates = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter((p): p is string => Boolean(p));
  return candidates.find((p) => existsSync(p)) ?? null;
}

/** Flags for a quiet, offline headless Chromium (playwright gives each launch a fresh profile directory). */
export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Where browser tests keep their screenshots (gitignored): test-artifacts/<name>/. */
export function artifactDir(name: string): string {
  const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../test-artifacts', name);
  mkdirSync(dir, { recursive: true });
  return dir;
}
