import { parentPort, workerData } from 'node:worker_threads';
import { openDurableStore, type DurableStore } from './durable.js';
import { forwardFsyncs } from '../../metrics.js';
import { toThreadError, type StoreMessage, type StoreRequest, type StoreThreadData } from './store-thread.js';
import type { WriteInput } from '../store.js';

/*
 * The thread that holds the embedded store (`threaded-store.ts`): it opens
 * the durable store in the data directory and answers the event loop's
 * calls one message at a time, in the order they were sent. Writes are
 * begun in that order too, so journal order is the order the service made
 * them in.
 */

const port = parentPort!;
const data = workerData as StoreThreadData;

function post(message: StoreMessage, transfer: ArrayBuffer[] = []): void {
  port.postMessage(message, transfer);
}

// Fsyncs are reported in batches, at most one message per turn of this thread's event loop.
let fsyncs: number[] = [];
forwardFsyncs((seconds) => {
  if (fsyncs.length === 0) setImmediate(() => {
    post({ kind: 'fsyncs', seconds: fsyncs });
    fsyncs = [];
  });
  fsyncs.push(seconds);
});

function call(store: DurableStore, request: StoreRequest): Promise<unknown> {
  switch (request.call) {
    case 'select': return store.select(...request.args);
    case 'selectIris': return store.selectIris(...request.args);
    case 'ask': return store.ask(...request.args);
    case 'construct': return store.construct(...request.args);
    case 'queryRaw': return store.queryRaw(...request.args);
    case 'write': return store.write(...request.args);
    case 'writeIf': return store.writeIf(...request.args);
    case 'dumpGraph': return store.dumpGraph(...request.args);
    case 'graphNames': return store.graphNames();
    case 'size': return store.size();
    case 'isEmpty': return store.isEmpty();
    case 'graphSources': return store.graphSources(...request.args);
    case 'unchangedInSnapshot': return store.unchangedInSnapshot(...request.args);
    case 'snapshot': return store.snapshot();
    case 'health': return Promise.resolve(store.health());
    case 'close': return store.close();
  }
}

/** The ops of a write request (whose loads' bytes may have been lent); none for other calls. */
function writtenOps(request: StoreRequest): readonly WriteInput[] {
  if (request.call === 'write') return request.args[0];
  if (request.call === 'writeIf') return request.args[1];
  return [];
}

const WRITES = new Set(['write', 'writeIf']);

async function main(): Promise<void> {
  let store: DurableStore;
  try {
    store = await openDurableStore(data.dataDir, {
      onWarning: (message) => post({ kind: 'log', level: 'warn', message }),
      onInfo: (message) => post({ kind: 'log', level: 'info', message }),
      ...(data.restart ? { ownLockIsStale: true } : {}),
      ...(data.journalProbeMs !== undefined ? { journalProbeMs: data.journalProbeMs } : {}),
      ...(data.journalProbeMaxMs !== undefined ? { journalProbeMaxMs: data.journalProbeMaxMs } : {}),
      ...(data.snapshotMinBytes !== undefined ? { snapshotMinBytes: data.snapshotMinBytes } : {}),
    });
  } catch (err) {
    post({ kind: 'failed', error: toThreadError(err) });
    return;
  }
  port.on('message', (request: StoreRequest) => {
    // Begun now, in message order: a write's place in the journal is taken in this call.
    let answer: Promise<unknown>;
    try {
      answer = call(store, request);
    } catch (err) {
      answer = Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    const health = WRITES.has(request.call) ? () => store.health() : () => undefined;
    // Bytes lent by the event loop go back with the answer, moved.
    const ops = writtenOps(request);
    const returned = (request.lent ?? []).map((i) => (ops[i] as Extract<WriteInput, { kind: 'load' }>).data as Uint8Array);
    const back = returned.length > 0 ? { returned } : {};
    const transfer = returned.map((bytes) => bytes.buffer as ArrayBuffer);
    const fail = (err: unknown) => post({ kind: 'error', id: request.id, error: toThreadError(err), ...withHealth(health()), ...back }, transfer);
    answer.then((value) => {
      try {
        post({ kind: 'answer', id: request.id, value, ...withHealth(health()), ...back }, transfer);
      } catch (err) {
        fail(err); // an answer that cannot be sent (not cloneable): the caller gets the reason, never waits forever
      }
    }, fail);
  });
  post({ kind: 'ready' });
}

function withHealth(health: ReturnType<DurableStore['health']> | undefined): { health?: ReturnType<DurableStore['health']> } {
  return health ? { health } : {};
}

void main();
