import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OxigraphStore } from '../../../src/store/embedded/oxigraph-store.js';
import { openDurableStore } from '../../../src/store/embedded/durable.js';
import { openThreadedStore, type ThreadedStore } from '../../../src/store/embedded/threaded-store.js';
import { SparqlStore } from '../../../src/store/remote/sparql-store.js';
import type { QuadStore } from '../../../src/store/store.js';
import { iri, sparql } from '../../../src/rdf/sparql.js';
import { NO_ENGINE, remoteSettings, requireRemote } from '../../helpers/remote.js';
import { openClusterStore } from '../../../src/store/cluster/open.js';
import { NO_POSTGRES, freshClusterUrl, postgresUrl, requirePostgres } from '../../helpers/cluster.js';

/**
 * The backends the store contract suite runs against (docs/store.md, "The
 * contract suite"). A new backend is one more entry: how to open it in a
 * place of its own, how to open it again there, and what it promises.
 */
export interface ContractBackend {
  /** Short name for `WSM_TEST_BACKENDS` (a comma-separated list: only those run). */
  id: string;
  name: string;
  /** What an acknowledged write changed is there, whole, after the store is opened again. */
  durable: boolean;
  /** Other service instances may write the same data (its `capabilities` must say so, `contract-capabilities.test.ts`). */
  otherInstancesWrite: boolean;
  /** Called in a `before`: skips the backend's tests when it cannot run here (and fails under CI). */
  available?(ctx: Mocha.Context): void;
  /** A fresh, empty store in a place of its own. */
  create(): Promise<ContractPlace>;
}

export interface ContractPlace {
  store: QuadStore;
  /** The IRI of a graph of this place (the remote store lists and keeps only graphs under its base IRI). */
  graph(name: string): string;
  /** Closes the store and opens it again on the same place (a restart of the service). */
  restart(): Promise<QuadStore>;
  /** Stops the store as a crash would, without closing it, and answers the store that took over. Absent where a test cannot crash it in process. */
  crash?(): Promise<QuadStore>;
  /** Closes what is open and removes the place. */
  dispose(): Promise<void>;
}

const BASE = 'https://contract.example/';

async function tempDir(): Promise<{ dir: string; remove: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'wsm-contract-'));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

/** A backend held in a data directory, opened by `open`. */
function inDirectory(open: (dir: string) => Promise<QuadStore>, crash?: (store: QuadStore) => Promise<void>): () => Promise<ContractPlace> {
  return async () => {
    const { dir, remove } = await tempDir();
    let store = await open(dir);
    const place: ContractPlace = {
      get store() { return store; },
      graph: (name) => `${BASE}${name}`,
      restart: async () => {
        await store.close();
        store = await open(dir);
        return store;
      },
      dispose: async () => {
        await store.close().catch(() => undefined);
        await remove();
      },
    };
    if (crash) place.crash = async () => { await crash(store); return store; };
    return place;
  };
}

/** Waits until the threaded store's thread is back after a stop (it restarts itself). */
async function crashThread(store: QuadStore): Promise<void> {
  const threaded = store as ThreadedStore;
  const before = threaded.restarts;
  await threaded.stopThreadAsCrash();
  while (threaded.restarts === before) await new Promise((resolve) => setTimeout(resolve, 50));
}

export const BACKENDS: ContractBackend[] = [
  {
    id: 'memory',
    name: 'embedded in memory',
    durable: false,
    otherInstancesWrite: false,
    create: async () => {
      const store = new OxigraphStore();
      return {
        store,
        graph: (name) => `${BASE}${name}`,
        restart: () => Promise.reject(new Error('the in-memory store promises no durability')),
        dispose: () => store.close(),
      };
    },
  },
  {
    id: 'embedded',
    name: 'embedded (event loop)',
    durable: true,
    otherInstancesWrite: false,
    create: inDirectory((dir) => openDurableStore(dir)),
  },
  {
    id: 'threaded',
    name: 'embedded (store thread)',
    durable: true,
    otherInstancesWrite: false,
    create: inDirectory((dir) => openThreadedStore(dir, { restartMs: 50 }), crashThread),
  },
  {
    id: 'remote',
    name: 'remote SPARQL engine',
    durable: true,
    otherInstancesWrite: true,
    // Named in WSM_TEST_BACKENDS (`npm run test:remote`), a missing engine fails under CI; otherwise it skips.
    available: (ctx) => {
      if (chosen()?.includes('remote') || remoteSettings()) requireRemote(ctx);
      else {
        console.log(`      skipped: ${NO_ENGINE}`);
        ctx.skip();
      }
    },
    create: async () => {
      const settings = remoteSettings();
      if (!settings) throw new Error('no remote engine settings');
      const base = `https://contract.example/${randomUUID()}/`;
      let store = new SparqlStore(settings, base);
      const drop = async (s: SparqlStore) => {
        const graphs = [...await s.graphNames(), s.generationsGraph, s.gateGraph];
        await s.write(graphs.map((g) => ({ kind: 'update', sparql: sparql`DROP SILENT GRAPH ${iri(g)}`, graphs: [g] })));
      };
      return {
        get store() { return store; },
        graph: (name) => `${base}${name}`,
        restart: async () => {
          await store.close();
          store = new SparqlStore(settings, base);
          return store;
        },
        dispose: async () => {
          await drop(store);
          await store.close();
        },
      };
    },
  },
  {
    id: 'cluster',
    name: 'cluster (journal in PostgreSQL, in-memory replica)',
    durable: true,
    otherInstancesWrite: true,
    // Named in WSM_TEST_BACKENDS (`npm run test:cluster`), a missing PostgreSQL fails under CI; otherwise it skips.
    available: (ctx) => {
      if (chosen()?.includes('cluster') || postgresUrl()) requirePostgres(ctx);
      else {
        console.log(`      skipped: ${NO_POSTGRES}`);
        ctx.skip();
      }
    },
    create: async () => {
      // A schema of its own: an empty log.
      const url = await freshClusterUrl();
      const open = () => openClusterStore(url, { snapshotAfterBytes: 1 << 30, probeMs: 100 });
      let store: QuadStore = await open();
      return {
        get store() { return store; },
        graph: (name) => `${BASE}${name}`,
        restart: async () => {
          await store.close();
          store = await open();
          return store;
        },
        dispose: () => store.close(),
      };
    },
  },
  {
    id: 'cluster-resident',
    name: 'cluster with residency (each graph a workspace of its own, a budget of one quad: every workspace let go after each use)',
    durable: true,
    otherInstancesWrite: true,
    available: (ctx) => {
      if (chosen()?.includes('cluster-resident')) requirePostgres(ctx);
      else ctx.skip();
    },
    create: async () => {
      const url = await freshClusterUrl();
      const open = () => openClusterStore(url, { snapshotAfterBytes: 1 << 30, probeMs: 100, baseIri: BASE, residency: { quads: 1, idleMs: 1000 } });
      let store: QuadStore = await open();
      return {
        get store() { return store; },
        graph: (name) => `${BASE}workspaces/${name.replace(/\//g, '-')}/g`,
        restart: async () => {
          await store.close();
          store = await open();
          return store;
        },
        dispose: () => store.close(),
      };
    },
  },
];

/** The backends `WSM_TEST_BACKENDS` names, or undefined for all of them. */
function chosen(): string[] | undefined {
  return process.env.WSM_TEST_BACKENDS?.split(',').map((id) => id.trim()).filter(Boolean);
}

/** What a contract test works with: the backend's current store, its graphs, a restart. */
export class Harness {
  private current: ContractPlace | undefined;
  constructor(readonly backend: ContractBackend) {}

  get store(): QuadStore {
    return this.place.store;
  }

  get place(): ContractPlace {
    if (!this.current) throw new Error('no store: the test runs outside its hooks');
    return this.current;
  }

  graph(name: string): string {
    return this.place.graph(name);
  }

  async begin(): Promise<void> {
    this.current = await this.backend.create();
  }

  async end(): Promise<void> {
    const place = this.current;
    this.current = undefined;
    await place?.dispose();
  }
}

/**
 * Declares `tests` once per backend, each run on a fresh store. `area` names
 * the invariant the file checks; the title names the backend, so a failure
 * says which backend broke which invariant.
 */
export function forEachBackend(area: string, tests: (t: Harness) => void): void {
  const only = chosen();
  for (const backend of BACKENDS.filter((b) => !only || only.includes(b.id))) {
    describe(`store contract, ${backend.name}: ${area}`, function () {
      this.timeout(120_000);
      const harness = new Harness(backend);
      before(function () { backend.available?.(this); });
      beforeEach(() => harness.begin());
      afterEach(() => harness.end());
      tests(harness);
    });
  }
}
