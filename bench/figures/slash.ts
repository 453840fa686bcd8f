import oxigraph from 'oxigraph';
import { api, figure, installPackage, interleave, percentile, sampleLatency, serviceWithWorkspace, type Figure } from '../lib.js';
import { matrixTurtle, packageArchive } from '../data.js';

const PAIRS = 3;
/** Generated things have 5 triples each and a size of 5n + 2: `size < limit` selects limit / 5 things. */
const SIZES = [
  // Issue 16: the default answer of a 20,000-triple result within 2x of its N-Triples time.
  { triples: 20_000, sizeBelow: 20_000, samples: 15 },
  { triples: 99_000, sizeBelow: 99_000, samples: 3 },
];
const MATRIX_TRIPLES = 100_000;

/**
 * One execution. The bare baseline runs in this process and holds its
 * event loop for seconds; the service closes a kept-alive connection idle
 * for 5 s, and a socket closed while the loop was held can be handed to
 * the next request before its close is seen (undici: UND_ERR_SOCKET,
 * "other side closed", with no byte of the answer read). An execution is
 * a read, so that one failure is retried on a new connection.
 */
async function executeOnce(url: string, token: string, accept?: string): Promise<Response> {
  const send = () => fetch(url, { method: 'POST', headers: { Authorization: `Bearer ${token}`, ...(accept ? { Accept: accept } : {}) } });
  try {
    return await send();
  } catch (err) {
    if ((err as { cause?: { code?: string } }).cause?.code !== 'UND_ERR_SOCKET') throw err;
    return send();
  }
}

/**
 * Slash-command execution, answered the default way (the JSON envelope
 * with JSON-LD), of a CONSTRUCT over a 100,000-triple matrix whose result
 * is 20,000 and 99,000 triples. Two comparisons per size,
 * each in interleaved pairs of windows:
 * - against the same CONSTRUCT run bare on Oxigraph in process,
 *   serialized as JSON-LD by Oxigraph (what the work costs without HTTP,
 *   auth, the worker hand-off and the envelope);
 * - against the same command answered as N-Triples (issue 16: the default
 *   answer within 2x of N-Triples).
 */
export async function run(): Promise<Figure[]> {
  const env = await serviceWithWorkspace();
  try {
    const { svc, token, slug } = env;
    const uri = 'https://bench.example/matrix/slash';
    await installPackage(svc.url, token, slug, await packageArchive('slash', '1.0.0', uri, MATRIX_TRIPLES));
    const store = new oxigraph.Store();
    store.load(matrixTurtle(uri, MATRIX_TRIPLES), { format: 'text/turtle', to_graph_name: oxigraph.namedNode(uri) });
    const figures: Figure[] = [];
    for (const size of SIZES) {
      const query = `CONSTRUCT { ?s ?p ?o } WHERE { ?s <${uri}/data/size> ?n . FILTER(?n < ${size.sizeBelow}) ?s ?p ?o }`;
      const created = await api(svc.url, token, 'POST', `/api/v1/commands/${slug}`, {
        alias: `things-below-${size.sizeBelow}`, description: 'Things below a size', interpretation: 'Every triple of each thing smaller than the limit.',
        scriptType: 'CONSTRUCT', scriptContent: query,
      });
      if (created.status !== 200) throw new Error(`C5 answered ${created.status}: ${created.text.slice(0, 200)}`);
      const id: string = created.json.data.id;
      const execute = (accept?: string) => () => executeOnce(`${svc.url}/api/v1/commands/${slug}/${id}/execute`, token, accept);
      // The default answer (no Accept) is the JSON envelope; check it holds the whole result, untruncated.
      // The first execution includes preparing the worker's copy; on a loaded machine its query may still pass
      // the time limit (503) while the copy stays ready for the next: try up to three times.
      let answered = await execute()();
      for (let attempt = 1; answered.status === 503 && attempt < 3; attempt++) answered = await execute()();
      if (!answered.ok) throw new Error(`the command answered ${answered.status}: ${(await answered.text()).slice(0, 200)}`);
      const probe = await answered.json() as { data: { tripleCount: number; truncated?: boolean } };
      if (probe.data.tripleCount !== size.triples) throw new Error(`the command answered ${probe.data.tripleCount} triples, expected ${size.triples}`);
      const bare = async () => {
        const times: number[] = [];
        for (let i = 0; i < size.samples + 2; i++) {
          const started = performance.now();
          store.query(query, { results_format: 'application/ld+json', use_default_graph_as_union: true });
          if (i >= 2) times.push(performance.now() - started);
          // Let the event loop see sockets the service closed meanwhile (see `executeOnce`).
          await new Promise((r) => setTimeout(r, 1));
        }
        return percentile(times, 50);
      };
      const service = async () => (await sampleLatency(size.samples, execute(), 2)).p50;
      const ntriples = async () => (await sampleLatency(size.samples, execute('application/n-triples'), 2)).p50;
      const vsBare = await interleave(PAIRS, service, bare, (ms) => ms);
      const vsNt = await interleave(PAIRS, service, ntriples, (ms) => ms);
      const label = size.triples.toLocaleString('en');
      figures.push(figure({
        name: `execute, default answer (JSON-LD envelope), ${label}-triple result, p50`, unit: 'ms',
        value: vsBare.serviceMedian, baseline: vsBare.baselineMedian, ratios: vsBare.ratios,
        target: 'report (no target set)', check: () => true,
        note: 'baseline: the same CONSTRUCT on Oxigraph in process, serialized as JSON-LD by Oxigraph; the round-1 target (+2 ms) was set for a 6-triple result',
      }));
      figures.push(figure({
        name: `execute, default answer vs N-Triples, ${label}-triple result, p50`, unit: 'ms',
        value: vsNt.serviceMedian, baseline: vsNt.baselineMedian, ratios: vsNt.ratios,
        target: '<= 2x', check: (r) => r <= 2,
        note: 'same command, same worker; only the serialization differs',
        cause: 'the JSON-LD answer is compacted with the query\'s prefixes and wrapped in the envelope, work the N-Triples answer skips',
      }));
    }
    return figures;
  } finally {
    await env.close();
  }
}
