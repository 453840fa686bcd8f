import oxigraph from 'oxigraph';
import { api, figure, installPackage, percentile, sampleLatency, serviceWithWorkspace, type Figure } from '../lib.js';
import { matrixTurtle, packageArchive } from '../data.js';

const TRIPLES = 10_000;
const QUERY = `PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
PREFIX iam: <https://poliglot.io/os/spec/iam#>
CONSTRUCT { ?agent rdfs:label ?label ; iam:hasRole ?role . ?role rdfs:label ?roleLabel }
WHERE { ?agent a iam:Agent ; rdfs:label ?label ; iam:hasRole ?role . ?role rdfs:label ?roleLabel }`;

/** Slash-command execution over a 10,000-triple workspace against the same CONSTRUCT run bare on Oxigraph in process. */
export async function run(): Promise<Figure[]> {
  const env = await serviceWithWorkspace();
  try {
    const { svc, token, slug } = env;
    const uri = 'https://bench.example/matrix/slash';
    await installPackage(svc.url, token, slug, await packageArchive('slash', '1.0.0', uri, TRIPLES));
    const created = await api(svc.url, token, 'POST', `/api/v1/commands/${slug}`, {
      alias: 'agents-and-roles', description: 'Agents with their roles', interpretation: 'Each agent with the roles its specification gives it.',
      scriptType: 'CONSTRUCT', scriptContent: QUERY,
    });
    if (created.status !== 200) throw new Error(`C5 answered ${created.status}: ${created.text.slice(0, 200)}`);
    const id: string = created.json.data.id;
    const service = await sampleLatency(500, () => fetch(`${svc.url}/api/v1/commands/${slug}/${id}/execute`, {
      method: 'POST', headers: { Authorization: `Bearer ${token}`, Accept: 'application/n-triples' },
    }));

    const store = new oxigraph.Store();
    store.load(matrixTurtle(uri, TRIPLES), { format: 'text/turtle', to_graph_name: oxigraph.namedNode(uri) });
    const bareTimes: number[] = [];
    for (let i = 0; i < 520; i++) {
      const started = performance.now();
      store.query(QUERY, { results_format: 'application/n-triples', use_default_graph_as_union: true });
      if (i >= 20) bareTimes.push(performance.now() - started);
    }
    const bare = percentile(bareTimes, 50);

    // The default answer (JSON envelope with JSON-LD) of a ~20,000-triple result against its N-Triples.
    const bigUri = 'https://bench.example/matrix/slash-big';
    await installPackage(svc.url, token, slug, await packageArchive('slash-big', '1.0.0', bigUri, 20_000));
    const all = await api(svc.url, token, 'POST', `/api/v1/commands/${slug}`, {
      alias: 'big-matrix', scriptType: 'CONSTRUCT',
      scriptContent: `CONSTRUCT { ?s ?p ?o } WHERE { GRAPH ?g { <${bigUri}> a ?type . ?s ?p ?o } }`,
    });
    if (all.status !== 200) throw new Error(`C5 answered ${all.status}: ${all.text.slice(0, 200)}`);
    const bigId: string = all.json.data.id;
    const execute = (accept: string) => () => fetch(`${svc.url}/api/v1/commands/${slug}/${bigId}/execute`, {
      method: 'POST', headers: { Authorization: `Bearer ${token}`, Accept: accept },
    });
    const probe = await (await execute('application/json')()).json() as { data: { tripleCount: number } };
    const ntriples = await sampleLatency(20, execute('application/n-triples'));
    const envelope = await sampleLatency(20, execute('application/json'));
    return [figure({
      name: `default answer (JSON-LD envelope) of ${probe.data.tripleCount.toLocaleString('en')} triples vs N-Triples, p50`, unit: 'ms',
      value: envelope.p50, baseline: ntriples.p50, target: '<= 2x', check: (r) => r <= 2,
      note: 'same command, same worker; only the serialization differs',
    }), figure({
      name: `execute a CONSTRUCT over ${TRIPLES.toLocaleString('en')} triples, p50 latency`, unit: 'ms',
      value: service.p50, baseline: bare, target: '<= +2 ms at p50', check: (_r, v, b) => v - b <= 2,
      note: `overhead ${(service.p50 - bare).toFixed(2)} ms (HTTP on loopback, auth, worker hand-off, serialization)`,
    })];
  } finally {
    await env.close();
  }
}
