import { parentPort, workerData } from 'node:worker_threads';
import { snapshotFileProblem } from './snapshot-file.js';

/*
 * Checks one snapshot file's header, end line and checksum
 * (`snapshotFileProblem`) while the main thread loads the same file without
 * hashing it (`loadLatestSnapshot`): a start with a large snapshot does not
 * spend its main thread on the SHA-256 too. Answers the problem, or null.
 */
const port = parentPort;
if (!port) throw new Error('the snapshot check must run in a worker thread');
const { file } = workerData as { file: string };
let answer: string | null;
try {
  answer = snapshotFileProblem(file) ?? null;
} catch (err) {
  answer = `could not be read (${(err as Error).message})`;
}
port.postMessage(answer);
