import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { QuadStore } from './store.js';
import { openDurableStore, type DurableStoreOptions } from './embedded/durable.js';
import { SparqlStore } from './remote/sparql-store.js';
import { openThreadedStore } from './embedded/threaded-store.js';
import { sparql } from '../rdf/sparql.js';
import { openClusterStore } from './cluster/open.js';
import { adoptSharedIssuerKey } from '../auth/tokens.js';

/** What tests may set on the embedded store beside the settings: its journal's file operations (fault injection). */
export type StoreTestOptions = Pick<DurableStoreOptions, 'journalFileOps' | 'journalProbeMs' | 'journalProbeMaxMs'> & {
  /** The store on the event loop's thread, as `wsm` commands hold it, for a test that reads the engine synchronously. */
  onEventLoop?: boolean;
};

/**
 * Opens the service's store: the embedded Oxigraph store in the data
 * directory, recovered from its snapshot and journal (docs/store.md),
 * held by a thread of its own (`threaded-store.ts`),
 * or, with `WSM_STORE=sparql`, the remote engine (docs/remote-store.md): no journal and
 * no lock then, the engine keeps the data (the issuer key still lives in the
 * data directory).
 */
export async function openStore(config: Config, logger: Logger, storeOptions: StoreTestOptions = {}): Promise<QuadStore> {
  if (config.WSM_STORE === 'sparql') {
    const store = new SparqlStore({
      queryUrl: config.WSM_SPARQL_QUERY_URL!,
      updateUrl: config.WSM_SPARQL_UPDATE_URL!,
      ...(config.WSM_SPARQL_USER !== undefined ? { user: config.WSM_SPARQL_USER } : {}),
      ...(config.WSM_SPARQL_PASSWORD !== undefined ? { password: config.WSM_SPARQL_PASSWORD } : {}),
      dialect: config.WSM_SPARQL_DIALECT,
    }, config.WSM_BASE_IRI);
    // Fail at start, with the engine's answer, rather than at the first request.
    await store.ask(sparql`ASK { }`);
    await store.checkProcedures();
    // Several instances may share the engine: this one's lease on the commands it runs (docs/store.md).
    await store.startLease(config.WSM_LEASE_MS, (message, details) => logger.warn(details ?? {}, message));
    logger.info({ store: 'sparql', queryUrl: config.WSM_SPARQL_QUERY_URL, dialect: config.WSM_SPARQL_DIALECT }, 'using the remote SPARQL engine');
    return store;
  }
  if (config.WSM_STORE === 'cluster') {
    const store = await openClusterStore(config.WSM_POSTGRES_URL!, {
      snapshotAfterBytes: config.WSM_SNAPSHOT_JOURNAL_MB * 1024 * 1024,
      baseIri: config.WSM_BASE_IRI,
      ...(config.WSM_CLUSTER_RESIDENT_QUADS !== undefined ? { residency: { quads: config.WSM_CLUSTER_RESIDENT_QUADS, idleMs: config.WSM_CLUSTER_IDLE_SECONDS * 1000 } } : {}),
      ...(config.WSM_CLUSTER_PLACEMENT === 'lease' ? { placement: { leaseMs: config.WSM_CLUSTER_LEASE_MS, idleMs: config.WSM_CLUSTER_IDLE_SECONDS * 1000 } } : {}),
      onWarning: (message) => logger.warn({ store: 'cluster' }, message),
      onInfo: (message) => logger.info({ store: 'cluster' }, message),
    });
    try {
      // Tokens minted by any instance are accepted by all: one issuer key, kept in PostgreSQL.
      await adoptSharedIssuerKey(config.dataDir, (proposed) => store.log.shared('issuer-key', proposed));
      await store.startLease(config.WSM_BASE_IRI, config.WSM_LEASE_MS, (message, details) => logger.warn(details ?? {}, message));
    } catch (err) {
      await store.close().catch(() => undefined);
      throw err;
    }
    return store;
  }
  const shared = {
    onWarning: (message: string) => logger.warn({ dataDir: config.dataDir }, message),
    onInfo: (message: string) => logger.info({ dataDir: config.dataDir }, message),
    snapshotMinBytes: config.WSM_SNAPSHOT_JOURNAL_MB * 1024 * 1024,
  };
  // Tests that replace the journal's file operations (functions, which cannot
  // cross to another thread), or ask for it, get the store on the event loop's thread.
  if (storeOptions.journalFileOps || storeOptions.onEventLoop) {
    const { onEventLoop: _, ...options } = storeOptions;
    return openDurableStore(config.dataDir, { ...options, ...shared });
  }
  return openThreadedStore(config.dataDir, {
    ...shared,
    onError: (message) => logger.error({ dataDir: config.dataDir }, message),
    ...(storeOptions.journalProbeMs !== undefined ? { journalProbeMs: storeOptions.journalProbeMs } : {}),
    ...(storeOptions.journalProbeMaxMs !== undefined ? { journalProbeMaxMs: storeOptions.journalProbeMaxMs } : {}),
  });
}
