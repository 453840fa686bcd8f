import { parentPort, workerData } from 'node:worker_threads';
import { openDurableStore, type DurableStore } from './durable.js';
import { forwardFsyncs } from '../../metrics.js';
import { toThreadError, type StoreMessage, type StoreRequest, type StoreThreadData } from './store-thread.js';
import type { QueryScope, WriteCondition, WriteInput } from '../store.js';
import type { Sparql } from '../../rdf/sparql.js';

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
  const a = request.args;
  switch (request.call) {
    case 'select': return store.select(a[0] as Sparql, a[1] as QueryScope | undefined);
    case 'selectIris': return store.selectIris(a[0] as Sparql, a[1] as string, a[2] as QueryScope | undefined);
    case 'ask': return store.ask(a[0] as Sparql, a[1] as QueryScope | undefined);
    case 'construct': return store.construct(a[0] as Sparql, a[1] as QueryScope | undefined);
    case 'queryRaw': return store.queryRaw(a[0] as Sparql, a[1] as string, a[2] as QueryScope | undefined);
    case 'write': return store.write(a[0] as WriteInput[]);
    case 'writeIf': return store.writeIf(a[0] as WriteCondition, a[1] as WriteInput[]);
    case 'dumpGraph': return store.dumpGraph(a[0] as string);
    case 'graphNames': return store.graphNames();
    case 'size': return store.size();
    case 'isEmpty': return store.isEmpty();
    case 'graphSources': return store.graphSources(a[0] as string[]);
    case 'unchangedInSnapshot': return store.unchangedInSnapshot(a[0] as string[]);
    case 'snapshot': return store.snapshot();
    case 'health': return Promise.resolve(store.health());
    case 'close': return store.close();
  }
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
    const returned = (request.lent ?? []).map((i) => ((request.args[request.args.length - 1] as WriteInput[])[i] as Extract<WriteInput, { kind: 'load' }>).data as Uint8Array);
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
