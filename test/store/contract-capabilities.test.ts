import { expect } from 'chai';
import { iri, literal, sparql } from '../../src/rdf/sparql.js';
import { forEachBackend } from './contract/backends.js';
import { insert } from './contract/helpers.js';

/**
 * Store contract: a store's `capabilities` say what it is (docs/store.md,
 * "Capabilities"), and callers act on them: a cache syncs revisions only
 * where other instances write, the query sandbox lists a workspace's
 * graphs with a `GRAPH ?g { }` query only where it names them.
 */
forEachBackend('capabilities', (t) => {
  it('says what the backend promises: durability across a restart, whether other instances write', () => {
    expect(t.store.capabilities.durable).to.equal(t.backend.durable);
    expect(t.store.capabilities.otherInstancesWrite).to.equal(t.backend.otherInstancesWrite);
  });

  it('where it says `GRAPH ?g { }` names its graphs, a query names a graph just written, and one dropped no more', async function () {
    if (!t.store.capabilities.graphPatternNamesGraphs) {
      console.log(`      skipped: ${t.backend.name} lists graphs with graphNames only`);
      this.skip();
    }
    const [a, b] = [t.graph('cap/a'), t.graph('cap/b')];
    await t.store.write([insert(a, 'one', 1), insert(b, 'two', 2)]);
    await t.store.update(sparql`DROP SILENT GRAPH ${iri(b)}`, [b]);
    const rows = await t.store.select(sparql`SELECT DISTINCT ?g WHERE { GRAPH ?g { } FILTER(STRSTARTS(STR(?g), ${literal(t.graph('cap/'))})) }`);
    expect(rows.map((r) => r.g!.value).sort()).to.deep.equal([a]);
    expect((await t.store.graphNames()).filter((g) => g.startsWith(t.graph('cap/')))).to.deep.equal([a]);
  });

  it('where no other instance writes, syncRevisions has nothing to do: revisions stay as the writes left them', async function () {
    if (t.store.capabilities.otherInstancesWrite) {
      console.log(`      skipped: ${t.backend.name} is written by other instances too`);
      this.skip();
    }
    const a = t.graph('cap/sync');
    await t.store.write([insert(a, 'one', 1)]);
    const before = t.store.revision(a);
    await t.store.syncRevisions([a]);
    expect(t.store.revision(a)).to.equal(before);
  });
});
