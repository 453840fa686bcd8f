import { expect } from 'chai';
import { openThreadedStore, type ThreadedStore } from '../../src/store/embedded/threaded-store.js';
import { StoreUnavailableError, WriteRefusedError, type WriteInput } from '../../src/store/store.js';
import { sparql } from '../../src/rdf/sparql.js';
import { insertPair, tempDir } from './helpers.js';

/*
 * The embedded store as the service holds it: in a thread of its own, every
 * call a message (src/store/embedded/threaded-store.ts). The integration suite runs
 * through it too; these check what crosses the threads.
 */
describe('threaded store (the embedded store in its own thread)', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let store: ThreadedStore | undefined;
  beforeEach(async () => ({ dir, cleanup } = await tempDir()));
  afterEach(async () => {
    await store?.close();
    store = undefined;
    await cleanup();
  });

  const count = async (s: ThreadedStore) =>
    Number((await s.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH <urn:g:test> { ?s ?p ?o } }`))[0]!.n!.value);

  it('keeps writes across close and reopen, and tells listeners and revisions of each applied write', async () => {
    store = await openThreadedStore(dir);
    const heard: string[][] = [];
    store.onWrite((graphs) => heard.push([...graphs]));
    const revision = store.revision('urn:g:test');
    for (let i = 0; i < 3; i++) await store.update(insertPair(i), ['urn:g:test']);
    expect(await count(store)).to.equal(6);
    expect(heard).to.deep.equal([['urn:g:test'], ['urn:g:test'], ['urn:g:test']]);
    expect(store.revision('urn:g:test')).to.be.above(revision);
    expect(store.version).to.equal(3);
    await store.close();
    store = await openThreadedStore(dir);
    expect(await count(store)).to.equal(6);
    expect(await store.graphNames()).to.deep.equal(['urn:g:test']);
  });

  it('answers a kept ASK again only until the next write', async () => {
    store = await openThreadedStore(dir);
    const ask = sparql`ASK { GRAPH <urn:g:test> { <urn:n:7> ?p ?o } }`;
    expect(await store.ask(ask)).to.equal(false);
    expect(await store.ask(ask)).to.equal(false);
    await store.update(insertPair(7), ['urn:g:test']);
    expect(await store.ask(ask)).to.equal(true);
  });

  it('brings a refusal back as WriteRefusedError naming the op, with nothing applied and no listener told', async () => {
    store = await openThreadedStore(dir);
    await store.update(insertPair(1), ['urn:g:test']);
    let heard = 0;
    store.onWrite(() => heard++);
    const error = await store.write([
      { kind: 'update', sparql: insertPair(2), graphs: ['urn:g:test'] },
      { kind: 'load', graph: 'urn:g:test', format: 'text/turtle', data: '<http://example.org/a%zz> <urn:p> <urn:o> .' },
    ]).then(() => undefined, (err: unknown) => err);
    expect(error).to.be.instanceOf(WriteRefusedError);
    expect((error as WriteRefusedError).opIndex).to.equal(1);
    expect((error as Error).message).to.contain('part 2');
    expect(await count(store)).to.equal(2);
    expect(heard).to.equal(0);
    expect(store.health()).to.deep.equal({ writable: true });
  });

  it('answers conditional writes with whether they applied', async () => {
    store = await openThreadedStore(dir);
    const absent = { ask: sparql`ASK { GRAPH <urn:g:test> { <urn:n:1> ?p ?o } }`, expect: false };
    const results = await Promise.all([1, 2, 3].map(() => store!.writeIf(absent, [{ kind: 'update', sparql: insertPair(1), graphs: ['urn:g:test'] }])));
    expect(results.filter(Boolean)).to.have.length(1);
    expect(await count(store)).to.equal(2);
  });

  it('loads data given as UTF-8 bytes as the text they encode, and gives the bytes back in the op (lent, not copied)', async () => {
    store = await openThreadedStore(dir);
    const lines = Array.from({ length: 8000 }, (_, i) => `<urn:s:${i}> <urn:p:label> "Zoë ${i} — 東京 🚀" .`).join('\n');
    const op: WriteInput = { kind: 'load', graph: 'urn:g:test', format: 'application/n-triples', data: new TextEncoder().encode(lines), replace: true };
    await store.write([op]);
    // The same op again (as a failed command writes its report again), here after a refused write.
    const refused = await store.write([op, { kind: 'load', graph: 'urn:g:other', format: 'text/turtle', data: '<http://example.org/a%zz> <urn:p> <urn:o> .' }]).then(() => false, () => true);
    expect(refused).to.equal(true);
    expect(new TextDecoder().decode(op.data as Uint8Array)).to.equal(lines);
    await store.write([{ ...op, graph: 'urn:g:copy' }]);
    expect(Number((await store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH <urn:g:copy> { ?s ?p ?o } }`))[0]!.n!.value)).to.equal(8000);
    const rows = await store.select(sparql`SELECT ?l WHERE { GRAPH <urn:g:test> { <urn:s:7999> <urn:p:label> ?l } }`);
    expect(rows.map((r) => r.l!.value)).to.deep.equal(['Zoë 7999 — 東京 🚀']);
    expect(await count(store)).to.equal(8000);
    await store.close();
    store = await openThreadedStore(dir);
    expect(await count(store)).to.equal(8000);
  });

  it('refuses to open a data directory another store holds, with the lock message', async () => {
    store = await openThreadedStore(dir);
    const error = await openThreadedStore(dir).then(() => undefined, (err: unknown) => err as Error);
    expect(error?.message).to.contain('is using the data directory');
  });

  const restarted = async (s: ThreadedStore, restarts: number) => {
    for (const deadline = Date.now() + 30_000; s.restarts < restarts && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 20));
    expect(s.restarts).to.equal(restarts);
  };

  it('restarts a thread that stopped: 503 meanwhile, then every acknowledged write is there and writes go on', async () => {
    const errors: string[] = [];
    store = await openThreadedStore(dir, { restartMs: 200, onError: (m) => errors.push(m) });
    for (let i = 0; i < 3; i++) await store.update(insertPair(i), ['urn:g:test']);
    await store.stopThreadAsCrash();
    expect(store.health()).to.include({ writable: false, readable: false });
    const meanwhile = await store.select(sparql`SELECT * WHERE { ?s ?p ?o } LIMIT 1`).then(() => undefined, (err: unknown) => err);
    expect(meanwhile).to.be.instanceOf(StoreUnavailableError);
    // A write made while the thread is down is refused before it is sent: nothing changed, no listener hears of it.
    let heard = 0;
    store.onWrite(() => heard++);
    const version = store.version;
    expect(await store.update(insertPair(99), ['urn:g:test']).then(() => undefined, (err: unknown) => err)).to.be.instanceOf(StoreUnavailableError);
    expect([heard, store.version]).to.deep.equal([0, version]);
    expect(errors.join('\n')).to.match(/store's thread stopped.*it is restarted/);
    await restarted(store, 1);
    expect(store.health()).to.deep.equal({ writable: true });
    expect(await count(store)).to.equal(6);
    await store.update(insertPair(3), ['urn:g:test']);
    expect(await count(store)).to.equal(8);
    // The restarted thread holds the directory's lock as its own and releases it on close.
    await store.close();
    store = await openThreadedStore(dir);
    expect(await count(store)).to.equal(8);
  });

  it('a write under way when the thread stops answers 503, is whole or absent after the restart, and listeners hear of it', async () => {
    store = await openThreadedStore(dir, { restartMs: 200 });
    await store.update(insertPair(0), ['urn:g:test']);
    const heard: string[][] = [];
    store.onWrite((graphs) => heard.push([...graphs]));
    const revision = store.revision('urn:g:big');
    const lines = Array.from({ length: 200_000 }, (_, i) => `<urn:s:${i}> <urn:p:n> "${i}" .`).join('\n');
    const write = store.write([{ kind: 'load', graph: 'urn:g:big', format: 'application/n-triples', data: lines, replace: true }]);
    await store.stopThreadAsCrash();
    expect(await write.then(() => undefined, (err: unknown) => err)).to.be.instanceOf(StoreUnavailableError);
    expect(heard).to.deep.equal([['urn:g:big']]);
    expect(store.revision('urn:g:big')).to.be.above(revision);
    await restarted(store, 1);
    const big = Number((await store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH <urn:g:big> { ?s ?p ?o } }`))[0]!.n!.value);
    expect([0, 200_000]).to.include(big);
    expect(await count(store)).to.equal(2);
  });

  it('after a close, answers every call with an error instead of waiting', async () => {
    const closed = await openThreadedStore(dir);
    await closed.close();
    const error = await closed.ask(sparql`ASK { }`).then(() => undefined, (err: unknown) => err as Error);
    expect(error?.message).to.match(/store's thread stopped/);
    expect(closed.health()).to.include({ writable: false, readable: false });
  });
});
