import { parentPort } from 'node:worker_threads';
import { PipelineSession } from './pipeline.js';
import type { PipelineRequest, PipelineReply } from './pipeline-pool.js';

/*
 * A deployment worker (worker thread): runs the steps of pipeline.ts for one
 * job at a time, keeping the job's parsed quads between its steps. `reset`
 * forgets them when the job ends.
 */
const port = parentPort;
if (!port) throw new Error('the deployment pipeline worker must run in a worker thread');

let session = new PipelineSession();

port.on('message', (msg: PipelineRequest) => {
  void (async () => {
    let reply: PipelineReply;
    try {
      switch (msg.step) {
        case 'parse': reply = { id: msg.id, ok: session.parse(msg.input) }; break;
        case 'validate': reply = { id: msg.id, ok: await session.validate(msg.input) }; break;
        case 'derive': reply = { id: msg.id, ok: session.derive(msg.input) }; break;
        case 'reset': session = new PipelineSession(); reply = { id: msg.id, ok: null }; break;
      }
    } catch (err) {
      reply = { id: msg.id, error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
    }
    port.postMessage(reply);
  })();
});
port.postMessage({ ready: true });
