import { appendFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'chai';
import { openDurableStore } from '../../src/store/embedded/durable.js';
import { encodeRecord } from '../../src/store/journal.js';
import { content, openCollecting, shape, tempDir } from './helpers.js';
import { sparql, integer, iri } from '../../src/rdf/sparql.js';

/*
 * A restart joins journal records of updates into fewer engine calls
 * (`RecordReplayer`): what it rebuilds must be exactly what the live store
 * held, whatever the records' prologues and blank nodes.
 */
describe('durable store: replaying the journal in joined calls', function () {
  this.timeout(60_000);
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => ({ dir, cleanup } = await tempDir()));
  afterEach(async () => cleanup());

  it('rebuilds the same store from records whose prefixes and bases differ, and whose updates read what earlier records wrote', async () => {
    const store = await openDurableStore(dir);
    await store.update(sparql`INSERT DATA { GRAPH <urn:g:c> { <urn:counter> <urn:count> 0 } }`, ['urn:g:c']);
    for (let i = 0; i < 300; i++) {
      // The same prefix name bound to another IRI in every other record, and a base in every third.
      const ns = iri(i % 2 === 0 ? 'urn:even#' : 'urn:odd#');
      const s = iri(`${i % 2 === 0 ? 'urn:even#' : 'urn:odd#'}s${i}`);
      await store.update(i % 3 === 0
        ? sparql`PREFIX ex: ${ns}\nBASE <urn:based/>\nINSERT DATA { GRAPH <urn:g:t> { ${s} ex:p ${integer(i)} ; ex:rel <rel> } }`
        : sparql`PREFIX ex: ${ns}\nINSERT DATA { GRAPH <urn:g:t> { ${s} ex:p ${integer(i)} } }`, ['urn:g:t']);
      // Each increment reads the count the record before it left.
      await store.update(sparql`DELETE { GRAPH <urn:g:c> { <urn:counter> <urn:count> ?n } } INSERT { GRAPH <urn:g:c> { <urn:counter> <urn:count> ?m } }
        WHERE { GRAPH <urn:g:c> { <urn:counter> <urn:count> ?n } BIND(?n + 1 AS ?m) }`, ['urn:g:c']);
    }
    const before = content(store);
    await store.close();

    const { store: reopened, warnings } = await openCollecting(dir);
    expect(warnings).to.deep.equal([]);
    expect(reopened.replayInfo.recordsReplayed).to.equal(601);
    expect(content(reopened)).to.deep.equal(before);
    expect(await reopened.ask(sparql`ASK { GRAPH <urn:g:c> { <urn:counter> <urn:count> ${integer(300)} } }`)).to.equal(true);
    expect(await reopened.ask(sparql`ASK { GRAPH <urn:g:t> { <urn:odd#s1> <urn:odd#p> 1 . <urn:even#s0> <urn:even#rel> <urn:based/rel> } }`)).to.equal(true);
    expect(await reopened.ask(sparql`ASK { GRAPH <urn:g:t> { <urn:even#s1> ?p ?o } }`)).to.equal(false);
    await reopened.close();
  });

  it('keeps apart the blank nodes of records that use the same label', async () => {
    const store = await openDurableStore(dir);
    for (let i = 0; i < 5; i++) {
      await store.update(sparql`INSERT DATA { GRAPH <urn:g:b> { _:x <urn:p:n> ${integer(i)} ; <urn:p:k> "kept" } }`, ['urn:g:b']);
    }
    const before = content(store);
    await store.close();

    const { store: reopened, warnings } = await openCollecting(dir);
    expect(warnings).to.deep.equal([]);
    expect(shape(content(reopened))).to.deep.equal(shape(before));
    const rows = await reopened.select(sparql`SELECT (COUNT(DISTINCT ?s) AS ?n) WHERE { GRAPH <urn:g:b> { ?s <urn:p:k> "kept" } }`);
    expect(Number(rows[0]!.n!.value)).to.equal(5);
    await reopened.close();
  });

  it('names the record that does not replay, among records joined with it', async () => {
    const store = await openDurableStore(dir);
    for (let i = 0; i < 10; i++) await store.update(sparql`INSERT DATA { GRAPH <urn:g:t> { <urn:s> <urn:p> ${integer(i)} } }`, ['urn:g:t']);
    const lastSeq = store.replayInfo.lastSeq + 10;
    await store.close();
    // A record the engine refuses (an IRI it does not accept), followed by good ones: as if written by a broken version.
    const journal = join(dir, (await readdir(dir)).filter((f) => f.startsWith('journal-')).sort().at(-1)!);
    const bad = { kind: 'update' as const, sparql: sparql`INSERT DATA { GRAPH <urn:g:t> { <http://example.org/a%zz> <urn:p> 1 } }`, graphs: ['urn:g:t'] };
    const good = { kind: 'update' as const, sparql: sparql`INSERT DATA { GRAPH <urn:g:t> { <urn:s> <urn:p> 99 } }`, graphs: ['urn:g:t'] };
    await appendFile(journal, Buffer.concat([encodeRecord(lastSeq + 1, [good]), encodeRecord(lastSeq + 2, [bad]), encodeRecord(lastSeq + 3, [good])]));

    let error: Error | undefined;
    await openDurableStore(dir).then((s) => s.close(), (e: Error) => (error = e));
    expect(error?.message).to.contain(`record ${lastSeq + 2} does not replay`);
  });
});
