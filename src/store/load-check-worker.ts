import { parentPort } from 'node:worker_threads';
import oxigraph from 'oxigraph';
import type { LoadCheckReply, LoadCheckRequest } from './load-check.js';

/*
 * The load check's worker thread (load-check.ts): loads each text of a
 * request into a throwaway Oxigraph store, the engine the service's store
 * runs, and answers which one (if any) it refused.
 */
const port = parentPort;
if (!port) throw new Error('the load check must run in a worker thread');

const CHECK_GRAPH = oxigraph.namedNode('urn:x-wsm-check:graph');

port.on('message', (msg: LoadCheckRequest) => {
  let reply: LoadCheckReply = { id: msg.id, ok: true };
  const scratch = new oxigraph.Store();
  try {
    for (const [i, load] of msg.loads.entries()) {
      try {
        scratch.load(load.data, { format: load.format, to_graph_name: CHECK_GRAPH, no_transaction: true });
      } catch (err) {
        reply = { id: msg.id, ok: false, index: i, message: (err as Error).message };
        break;
      }
    }
  } finally {
    (scratch as unknown as { free?: () => void }).free?.();
  }
  port.postMessage(reply);
});
port.postMessage({ ready: true });
