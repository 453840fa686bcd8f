/**
 * The load generator, run as its own process by `load()` in bench/lib.ts so
 * that autocannon's own CPU use is not charged to the server or the
 * baseline it drives (they run in processes of their own too).
 *
 *   node --import tsx bench/loadgen.ts '<LoadSpec as JSON>'
 *
 * Prints one line of JSON, a LoadResult. A request whose `uniqueBody`
 * holds `{{n}}` gets a body with `{{n}}` replaced by a number unique to
 * this run (a new alias per write, say).
 */
import autocannon from 'autocannon';
import type { LoadResult, LoadSpec, LoadRequest } from './lib.js';

const spec = JSON.parse(process.argv[2] ?? '{}') as LoadSpec;
let n = 0;
const unique = (template: string) => template.replaceAll('{{n}}', `${process.pid}-${n++}`);

function request(r: LoadRequest): autocannon.Request {
  const { uniqueBody, ...rest } = r;
  if (uniqueBody === undefined) return rest;
  return { ...rest, setupRequest: (req) => ({ ...req, body: unique(uniqueBody) }) };
}

const { requests, ...options } = spec;
const result = await autocannon({
  ...options,
  ...(requests ? { requests: requests.map(request) } : {}),
});
const out: LoadResult = {
  rps: result.requests.average,
  p50: result.latency.p50,
  p99: result.latency.p99,
  max: result.latency.max,
  errors: result.errors + result.timeouts,
  non2xx: result.non2xx,
};
process.stdout.write(`${JSON.stringify(out)}\n`);
