/*
 * Parses and checks one workspace import (`import-check.ts`) in a worker
 * thread: the body may be hundreds of MiB of N-Quads or TriG, so neither
 * parsing nor checking runs on the service's event loop.
 */
import { parentPort } from 'node:worker_threads';
import type { Quad } from '@rdfjs/types';
import { ImportRefused, planImport, type ImportPlan, type ImportRequest } from './import-check.js';
import { giveWayToTheEventLoop } from '../workers/priority.js';

export interface ImportJob { bytes: Uint8Array; request: ImportRequest }
export type ImportAnswer = { ok: true; plan: ImportPlan } | { ok: false; refused: boolean; message: string };

const port = parentPort;
if (!port) throw new Error('the import worker must run in a worker thread');
giveWayToTheEventLoop();

type N3 = typeof import('n3');

async function run(job: ImportJob): Promise<ImportAnswer> {
  const n3module = await import('n3');
  const n3 = ((n3module as { default?: N3 }).default ?? n3module) as N3;
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(job.bytes);
  } catch {
    return { ok: false, refused: true, message: 'The body is not UTF-8 text' };
  }
  let quads: Quad[];
  try {
    quads = new n3.Parser({ format: job.request.format }).parse(text) as Quad[];
  } catch (err) {
    return { ok: false, refused: true, message: `The body is not valid ${job.request.format}: ${(err as Error).message}` };
  }
  try {
    return { ok: true, plan: planImport(quads, job.request) };
  } catch (err) {
    if (err instanceof ImportRefused) return { ok: false, refused: true, message: err.message };
    throw err;
  }
}

port.on('message', (job: ImportJob) => {
  run(job).then((answer) => port.postMessage(answer), (err: unknown) => port.postMessage({ ok: false, refused: false, message: String((err as Error)?.message ?? err) }));
});
