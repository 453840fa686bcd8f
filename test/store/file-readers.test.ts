import { expect } from 'chai';
import oxigraph from 'oxigraph';
import { readJournalRecords, type JournalReadOp } from '../../src/store/journal-records.js';
import { snapshotGraphBlocks } from '../../src/store/embedded/snapshot-file.js';
import { openDurableStore } from '../../src/store/embedded/durable.js';
import { updateOp } from '../../src/store/store.js';
import { sparql } from '../../src/rdf/sparql.js';
import { tempDir } from './helpers.js';

/**
 * The store's readers of its own files, the only code outside the writers
 * that knows their layout (docs/store.md, "Reading the files"): query
 * workers and the snapshot worker read journal records and snapshot graph
 * blocks through them. What they read is what the store wrote.
 */
describe('store file readers: journal records and snapshot graph blocks', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => ({ dir, cleanup } = await tempDir()));
  afterEach(async () => cleanup());

  const describeOp = (op: JournalReadOp) => op.kind === 'load' ? `load ${op.graph} ${[...op.text()].join('')}` : op.kind === 'update' ? `update ${op.graphs?.join(',') ?? ''}` : `condition ${String(op.expect)}`;

  it('reads the records of a range in order, a load\'s text as written, leaving out skipped records and, when asked, those without an update', async () => {
    const store = await openDurableStore(dir);
    const text = '<urn:s> <urn:p> "line \\"one\\" é" .\n<urn:s> <urn:p> "two" .\n';
    await store.write([updateOp(sparql`INSERT DATA { GRAPH <urn:g:a> { <urn:s> <urn:p> 1 } }`, ['urn:g:a'])]); // 1
    await store.write([{ kind: 'load', graph: 'urn:g:b', format: 'application/n-triples', data: text }]); // 2
    expect(await store.writeIf({ ask: sparql`ASK { GRAPH <urn:g:a> { <urn:s> <urn:p> 2 } }`, expect: true }, [updateOp(sparql`DROP SILENT GRAPH <urn:g:a>`, ['urn:g:a'])])).to.equal(false); // 3
    await store.write([updateOp(sparql`DROP SILENT GRAPH <urn:g:b>`, ['urn:g:b'])]); // 4
    const sources = await store.graphSources(['urn:g:a']);
    await store.close();
    expect(sources?.journal.skipped).to.deep.equal([3]);

    const all = [...readJournalRecords(dir, 0, 4)].map((r) => [r.seq, ...r.ops.map(describeOp)]);
    expect(all).to.deep.equal([
      [1, 'update urn:g:a'],
      [2, `load urn:g:b ${text}`],
      [3, 'condition true', 'update urn:g:a'],
      [4, 'update urn:g:b'],
    ]);
    expect([...readJournalRecords(dir, 1, 4, { skip: [3] })].map((r) => r.seq)).to.deep.equal([2, 4]);
    expect([...readJournalRecords(dir, 0, 4, { skip: [3], holdingUpdates: true })].map((r) => r.seq)).to.deep.equal([1, 4]);
    expect([...readJournalRecords(dir, 4, 4)]).to.deep.equal([]);
    expect(() => [...readJournalRecords(dir, 0, 5)]).to.throw(/records 5 to 5 were not found/);
  });

  it('reads the blocks of the graphs asked for from a snapshot, which load as the store held them', async () => {
    const store = await openDurableStore(dir);
    await store.write([
      { kind: 'load', graph: 'urn:g:a', format: 'text/turtle', data: '<urn:s> <urn:p> [ <urn:q> "blank in a" ] ; <urn:r> "a" .' },
      { kind: 'load', graph: 'urn:g:b', format: 'text/turtle', data: '<urn:s> <urn:p> "b" .' },
      { kind: 'load', graph: 'urn:g:c', format: 'text/turtle', data: '<urn:s> <urn:p> "c", "}" .' },
    ]);
    await store.snapshot();
    const expected = await Promise.all(['urn:g:a', 'urn:g:c'].map((g) => store.dumpGraph(g)));
    const file = (await store.unchangedInSnapshot([]))!.file;
    await store.close();

    const copy = new oxigraph.Store();
    copy.load(snapshotGraphBlocks(file, new Set(['urn:g:a', 'urn:g:c'])), { format: 'application/trig' });
    const graphs = (copy.query('SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }') as Map<string, { value: string }>[]).map((b) => b.get('g')!.value).sort();
    expect(graphs).to.deep.equal(['urn:g:a', 'urn:g:c']);
    const shape = (nt: string) => nt.split('\n').filter(Boolean).map((l) => l.replace(/_:[0-9a-z]+/g, '_:b')).sort();
    for (const [i, g] of ['urn:g:a', 'urn:g:c'].entries()) {
      expect(shape(copy.dump({ format: 'application/n-triples', from_graph_name: oxigraph.namedNode(g) }))).to.deep.equal(shape(expected[i]!));
    }
  });
});
