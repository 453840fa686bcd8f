import { parentPort } from 'node:worker_threads';
import oxigraph from 'oxigraph';
import type { LoadCheckReply, LoadCheckRequest } from './load-check.js';
import { giveWayToTheEventLoop } from '../../workers/priority.js';
import { freeStore } from '../scratch.js';

/*
 * The load check's worker thread (load-check.ts): loads each text of a
 * request into a throwaway Oxigraph store, the engine the service's store
 * runs, and answers which one (if any) it refused.
 */
const port = parentPort;
if (!port) throw new Error('the load check must run in a worker thread');

// Two checkers can keep both cores busy while an install is checked: the
// event loop goes first.
giveWayToTheEventLoop();

const CHECK_GRAPH = oxigraph.namedNode('urn:x-wsm-check:graph');

/** Checks already answered as refused: their later pieces are ignored. */
const refused = new Set<number>();

// Each piece goes into a store of its own, freed right after: a piece is
// whole lines of N-Triples (or a whole text of another format), and a line
// of N-Triples is accepted or refused on its own, so this accepts exactly
// what one store holding every piece would, in about half the time of one
// growing store (docs/figures.md).
port.on('message', (msg: LoadCheckRequest) => {
  if (refused.has(msg.id)) {
    if (msg.last) refused.delete(msg.id);
    return;
  }
  if (msg.index >= 0) {
    const store = new oxigraph.Store();
    try {
      store.load(msg.data, { format: msg.format, to_graph_name: CHECK_GRAPH, no_transaction: true });
    } catch (err) {
      if (!msg.last) refused.add(msg.id);
      port.postMessage({ id: msg.id, ok: false, index: msg.index, message: (err as Error).message } satisfies LoadCheckReply);
      return;
    } finally {
      freeStore(store);
    }
  }
  if (msg.last) port.postMessage({ id: msg.id, ok: true } satisfies LoadCheckReply);
});
port.postMessage({ ready: true });
