import { parentPort } from 'node:worker_threads';
import { packedBuffers } from '../rdf/iri-set.js';
import { PipelineSession, type DerivedOutput } from './pipeline.js';
import type { LoadData } from '../store/store.js';
import type { PipelineRequest, PipelineReply } from './pipeline-pool.js';
import { PublishSession } from '../registry/publish-steps.js';

/*
 * A deployment worker (worker thread): runs the steps of pipeline.ts (or of a
 * publish check, registry/publish-steps.ts) for one job at a time, keeping
 * the job's parsed quads between its steps. `reset` forgets them when the
 * job ends.
 */
const port = parentPort;
if (!port) throw new Error('the deployment pipeline worker must run in a worker thread');

let session = new PipelineSession();
let publish = new PublishSession();

/** Texts from this length on go to the event loop as UTF-8 bytes, moved rather than copied (see `bytesOf`). */
const BYTES_FROM_CHARS = 64 * 1024;
const encoder = new TextEncoder();

/**
 * A large N-Triples text of a step's output as UTF-8 bytes, its buffer added
 * to `transfer`. A string sent to the event loop is copied there, on its
 * time (docs/figures.md); bytes are moved, and the store's thread makes
 * them text again (`opsWithTexts`).
 */
function bytesOf(text: LoadData, transfer: ArrayBuffer[]): LoadData {
  if (typeof text !== 'string' || text.length < BYTES_FROM_CHARS) return text;
  const bytes = encoder.encode(text);
  transfer.push(bytes.buffer as ArrayBuffer);
  return bytes;
}

function derivedAsBytes(outputs: DerivedOutput[], transfer: ArrayBuffer[]): DerivedOutput[] {
  return outputs.map((d) => ({ ...d, matrixNTriples: bytesOf(d.matrixNTriples, transfer), derivedNTriples: bytesOf(d.derivedNTriples, transfer) }));
}

port.on('message', (msg: PipelineRequest) => {
  void (async () => {
    let reply: PipelineReply;
    const transfer: ArrayBuffer[] = [];
    try {
      switch (msg.step) {
        case 'parse': {
          const out = session.parse(msg.input);
          if (!('failure' in out)) transfer.push(...packedBuffers(out.mentioned), ...packedBuffers(out.mentionedRoleIris));
          reply = { id: msg.id, ok: out };
          break;
        }
        case 'validate': {
          const out = await session.validate(msg.input);
          reply = { id: msg.id, ok: 'failure' in out ? out : { ...out, ntriples: bytesOf(out.ntriples, transfer) } };
          break;
        }
        case 'derive': {
          const out = session.derive(msg.input);
          reply = { id: msg.id, ok: derivedAsBytes(out, transfer) };
          break;
        }
        case 'publish-read': reply = { id: msg.id, ok: await publish.read(msg.input) }; break;
        case 'publish-validate': reply = { id: msg.id, ok: await publish.validate(msg.input) }; break;
        case 'reset': session = new PipelineSession(); publish = new PublishSession(); reply = { id: msg.id, ok: null }; break;
      }
    } catch (err) {
      reply = { id: msg.id, error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
    }
    port.postMessage(reply, transfer);
  })();
});
port.postMessage({ ready: true });
