/**
 * Opens Server-Sent Event streams for the event-stream attack of
 * bench/figures/health-attacks.ts, in a process of its own so that opening
 * thousands of connections does not hold the event loop of the process
 * that samples `/health` (as the load generator runs apart).
 *
 *   node --import tsx bench/stream-opener.ts   (env BENCH_URL, BENCH_TOKEN)
 *
 * Reads commands on stdin, one per line: `open <path> <count>` opens
 * `count` streams on `path` without reading them and prints one line of
 * JSON, `{"statuses":{"200":n,"429":m,...}}`, once each has its answer's
 * head; `close` closes them all and exits.
 */
import readline from 'node:readline';

const url = process.env.BENCH_URL ?? '';
const token = process.env.BENCH_TOKEN ?? '';
/** One per stream: fetch sets a signal's listener limit to its own (1,500), so thousands of streams on one signal warn. */
const aborts: AbortController[] = [];

async function open(streamPath: string, count: number): Promise<void> {
  const statuses = await Promise.all(Array.from({ length: count }, () => {
    const abort = new AbortController();
    aborts.push(abort);
    return fetch(`${url}${streamPath}`, { headers: { Authorization: `Bearer ${token}`, Accept: 'text/event-stream' }, signal: abort.signal })
      .then((r) => String(r.status), () => 'error');
  }));
  const counts: Record<string, number> = {};
  for (const s of statuses) counts[s] = (counts[s] ?? 0) + 1;
  process.stdout.write(`${JSON.stringify({ statuses: counts })}\n`);
}

const lines = readline.createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const [command, streamPath, count] = line.trim().split(' ');
  if (command === 'open') void open(streamPath!, Number(count));
  if (command === 'close') {
    for (const abort of aborts) abort.abort();
    lines.close();
    process.exit(0);
  }
});
