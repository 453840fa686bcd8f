import type { SparqlEndpointOptions } from '../../src/store/remote/sparql-client.js';
import type { QuadStore } from '../../src/store/store.js';
import { SparqlStore } from '../../src/store/remote/sparql-store.js';
import { iri, sparql } from '../../src/rdf/sparql.js';

/**
 * The remote engine the remote-store tests run against, from the same
 * settings the service reads (`npm run virtuoso` prints them; .ci/run
 * exports them). Without them the tests are skipped with one line saying
 * why, except under CI, where a missing engine is a failure.
 */
export function remoteSettings(): SparqlEndpointOptions | undefined {
  const env = process.env;
  if (!env.WSM_SPARQL_QUERY_URL || !env.WSM_SPARQL_UPDATE_URL) return undefined;
  return {
    queryUrl: env.WSM_SPARQL_QUERY_URL,
    updateUrl: env.WSM_SPARQL_UPDATE_URL,
    ...(env.WSM_SPARQL_USER ? { user: env.WSM_SPARQL_USER } : {}),
    ...(env.WSM_SPARQL_PASSWORD ? { password: env.WSM_SPARQL_PASSWORD } : {}),
    dialect: env.WSM_SPARQL_DIALECT === 'standard' ? 'standard' : 'virtuoso',
  };
}

/** The service's settings (`WSM_STORE=sparql` and the engine's) for a server started on this engine. */
export function engineEnv(settings: SparqlEndpointOptions): Record<string, string> {
  return {
    WSM_STORE: 'sparql',
    WSM_SPARQL_QUERY_URL: settings.queryUrl,
    WSM_SPARQL_UPDATE_URL: settings.updateUrl,
    ...(settings.user ? { WSM_SPARQL_USER: settings.user } : {}),
    ...(settings.password ? { WSM_SPARQL_PASSWORD: settings.password } : {}),
    WSM_SPARQL_DIALECT: settings.dialect,
  };
}

/** Drops every graph of the service under `baseIri` from the engine. */
export async function emptyEngine(settings: SparqlEndpointOptions, baseIri: string): Promise<void> {
  const store = new SparqlStore(settings, baseIri);
  const graphs = await store.graphNames();
  if (graphs.length) await store.write(graphs.map((g) => ({ kind: 'update' as const, sparql: sparql`DROP SILENT GRAPH ${iri(g)}`, graphs: [g] })));
}

export const NO_ENGINE = 'no remote SPARQL engine: run `npm run virtuoso` and export the settings it prints to run these tests';

/** Call in a `before`: skips the suite without an engine, fails under CI. */
export function requireRemote(ctx: Mocha.Context): SparqlEndpointOptions {
  const settings = remoteSettings();
  if (settings) return settings;
  if (process.env.CI === 'true' || process.env.CI === '1') throw new Error(`CI: ${NO_ENGINE}`);
  console.log(`      skipped: ${NO_ENGINE}`);
  ctx.skip();
  throw new Error('unreachable');
}

/**
 * Mocha hooks for a suite whose test servers run on the remote engine: the
 * suite is skipped without one (`requireRemote`), and `WSM_TEST_STORE=sparql`
 * is set for its servers while it runs and put back after it.
 */
export function onRemoteStore(): void {
  let previous: string | undefined;
  before(function () {
    requireRemote(this);
    previous = process.env.WSM_TEST_STORE;
    process.env.WSM_TEST_STORE = 'sparql';
  });
  after(() => {
    if (previous === undefined) delete process.env.WSM_TEST_STORE; else process.env.WSM_TEST_STORE = previous;
  });
}

/**
 * Every quad of the service's named graphs, as sorted N-Quads-like lines:
 * the whole state, through the store contract, on either store (the embedded
 * one and the remote one, whose engine holds graphs of its own besides).
 */
export async function storeDump(store: Pick<QuadStore, 'graphNames' | 'dumpGraph'>): Promise<string[]> {
  const out: string[] = [];
  for (const g of await store.graphNames()) {
    for (const line of (await store.dumpGraph(g)).split('\n')) if (line.trim()) out.push(`${line.trim().replace(/\s*\.$/, '')} <${g}> .`);
  }
  return out.sort();
}
