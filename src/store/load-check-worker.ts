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

/** The throwaway store of each check under way, and whether one of its pieces was refused. */
const checks = new Map<number, { store: oxigraph.Store; refused: boolean }>();

const free = (store: oxigraph.Store) => (store as unknown as { free?: () => void }).free?.();

/** Checks already answered as refused: their later pieces are ignored. */
const refused = new Set<number>();

port.on('message', (msg: LoadCheckRequest) => {
  if (refused.has(msg.id)) {
    if (msg.last) refused.delete(msg.id);
    return;
  }
  let check = checks.get(msg.id);
  if (!check) {
    check = { store: new oxigraph.Store(), refused: false };
    checks.set(msg.id, check);
  }
  if (!check.refused && msg.index >= 0) {
    try {
      check.store.load(msg.data, { format: msg.format, to_graph_name: CHECK_GRAPH, no_transaction: true });
    } catch (err) {
      check.refused = true;
      port.postMessage({ id: msg.id, ok: false, index: msg.index, message: (err as Error).message } satisfies LoadCheckReply);
    }
  }
  if (msg.last || check.refused) {
    checks.delete(msg.id);
    if (check.refused && !msg.last) refused.add(msg.id);
    free(check.store);
    if (!check.refused) port.postMessage({ id: msg.id, ok: true } satisfies LoadCheckReply);
  }
});
port.postMessage({ ready: true });
