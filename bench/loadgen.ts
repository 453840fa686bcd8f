/**
 * The load generator, run as its own process by `load()` in bench/lib.ts so
 * that autocannon's own CPU use is not charged to the server or the
 * baseline it drives (they run in processes of their own too).
 *
 *   node --import tsx bench/loadgen.ts '<LoadSpec as JSON>'
 *
 * Prints one line of JSON, a LoadResult. A request whose `uniqueBody`
 * holds `{{n}}` gets a body with `{{n}}` replaced by a number unique to
 * this run (a new alias per write, say). With several `requests`, the
 * result also holds each request kind's latency (`byKind`, in the order
 * of `requests`), so a mixed load says which kind makes its tail.
 */
import autocannon from 'autocannon';
import type { KindResult, LoadResult, LoadSpec, LoadRequest } from './lib.js';

const spec = JSON.parse(process.argv[2] ?? '{}') as LoadSpec;
let n = 0;
const unique = (template: string) => template.replaceAll('{{n}}', `${process.pid}-${n++}`);

function request(r: LoadRequest): autocannon.Request {
  const { uniqueBody, label: _label, ...rest } = r;
  if (uniqueBody === undefined) return rest;
  return { ...rest, setupRequest: (req) => ({ ...req, body: unique(uniqueBody) }) };
}

const { requests, ...options } = spec;
// Without a callback autocannon answers its instance, an event emitter that is also a promise of the result.
const instance = autocannon({
  ...options,
  ...(requests ? { requests: requests.map(request) } : {}),
}) as Promise<autocannon.Result> & { on(event: 'response', listener: (client: unknown, status: number, bytes: number, ms: number) => void): void };
// Each connection cycles through `requests` in order; when a response
// arrives its iterator still points at the request it answers.
const times: number[][] = (requests ?? []).map(() => []);
const non2xx: number[] = (requests ?? []).map(() => 0);
if (requests && requests.length > 1) {
  instance.on('response', (client, status, _bytes, ms) => {
    const i = (client as { requestIterator?: { currentRequestIndex?: number } }).requestIterator?.currentRequestIndex ?? -1;
    if (i < 0 || i >= times.length) return;
    times[i]!.push(ms);
    if (status < 200 || status >= 300) non2xx[i]!++;
  });
}
const result = await instance;
const pct = (sorted: number[], p: number) => sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : Number.NaN;
const byKind: KindResult[] | undefined = requests && requests.length > 1
  ? requests.map((r, i) => {
    const sorted = times[i]!.sort((a, b) => a - b);
    return {
      kind: r.label ?? `${r.method ?? 'GET'} ${r.path ?? '/'}`, count: sorted.length, non2xx: non2xx[i]!,
      p50: pct(sorted, 50), p99: pct(sorted, 99), max: sorted.length ? sorted[sorted.length - 1]! : Number.NaN,
    };
  })
  : undefined;
const out: LoadResult = {
  rps: result.requests.average,
  p50: result.latency.p50,
  p99: result.latency.p99,
  max: result.latency.max,
  errors: result.errors + result.timeouts,
  non2xx: result.non2xx,
  ...(byKind ? { byKind } : {}),
};
process.stdout.write(`${JSON.stringify(out)}\n`);
