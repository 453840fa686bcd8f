import { expect } from 'chai';
import oxigraph from 'oxigraph';
import { replaySteps } from '../../../src/sandbox/replay.js';

/**
 * A query worker rebuilds its graphs from the journal only where an
 * update's effect on them depends on its own text; anything else is left
 * to the service (the graph is "unreplayable").
 */
describe('sandbox: replaying journaled updates on some graphs', () => {
  const A = 'https://example.org/g/a';
  const B = 'https://example.org/g/b';
  const both = new Set([A, B]);

  it('replays DROP, CLEAR and INSERT/DELETE DATA, keeping only the quads of the graphs asked for', () => {
    const { steps, unreplayable } = replaySteps(`PREFIX ex: <https://example.org/>
      DROP SILENT GRAPH <${A}> ; CLEAR GRAPH <https://example.org/g/other> ;
      INSERT DATA { GRAPH <${A}> { ex:s ex:p _:x . _:x ex:q "1" } GRAPH <https://example.org/g/other> { ex:s ex:p ex:o } ex:d ex:d ex:d } ;
      DELETE DATA { GRAPH <${B}> { ex:s ex:p ex:o } }`, both);
    expect(unreplayable).to.deep.equal([]);
    expect(steps[0]).to.deep.equal({ clear: [A] });
    // Applied to a store holding B's quad: A gets the inserted quads (one blank node), B loses its quad, nothing else is written.
    const store = new oxigraph.Store();
    store.load(`<https://example.org/s> <https://example.org/p> <https://example.org/o> <${B}> .\n`, { format: 'application/n-quads' });
    for (const step of steps) {
      if ('clear' in step) for (const g of step.clear) store.update(`DROP SILENT GRAPH <${g}>`);
      else store.update(step.update);
    }
    const quads = store.match();
    expect(quads.map((q) => q.graph.value)).to.deep.equal([A, A]);
    expect(store.query(`ASK { GRAPH <${A}> { <https://example.org/s> <https://example.org/p> ?x . ?x <https://example.org/q> "1" } }`)).to.equal(true);
  });

  it('CLEAR ALL and DROP NAMED empty every graph asked for', () => {
    expect(replaySteps('CLEAR ALL', both).steps).to.deep.equal([{ clear: [A, B] }]);
    expect(replaySteps('DROP NAMED', new Set([A])).steps).to.deep.equal([{ clear: [A] }]);
  });

  it('does not replay what depends on other graphs: WHERE forms, ADD/MOVE/COPY, LOAD, a variable graph', () => {
    expect(replaySteps(`DELETE WHERE { GRAPH <${A}> { ?s ?p ?o } }`, both).unreplayable).to.deep.equal([A]);
    expect(replaySteps(`WITH <${B}> DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }`, both).unreplayable).to.deep.equal([B]);
    expect(replaySteps(`INSERT { GRAPH <${A}> { ?s ?p ?o } } WHERE { GRAPH <https://example.org/g/other> { ?s ?p ?o } }`, both).unreplayable).to.deep.equal([A]);
    expect(replaySteps(`ADD <https://example.org/g/other> TO <${A}>`, both).unreplayable).to.deep.equal([A]);
    expect(replaySteps(`MOVE <${B}> TO <https://example.org/g/other>`, both).unreplayable).to.deep.equal([B]);
    expect(replaySteps(`LOAD <https://example.org/data.ttl> INTO GRAPH <${A}>`, both).unreplayable).to.deep.equal([A]);
    expect(replaySteps('INSERT { GRAPH ?g { ?s ?p 1 } } WHERE { GRAPH ?g { ?s ?p ?o } }', both).unreplayable).to.have.members([A, B]);
  });

  it('replays nothing more for a graph once an operation of the same update made it unreplayable', () => {
    const { steps, unreplayable } = replaySteps(`DELETE WHERE { GRAPH <${A}> { ?s ?p ?o } } ; INSERT DATA { GRAPH <${A}> { <https://example.org/s> <https://example.org/p> 1 } GRAPH <${B}> { <https://example.org/s> <https://example.org/p> 2 } }`, both);
    expect(unreplayable).to.deep.equal([A]);
    expect(steps).to.have.length(1);
    expect((steps[0] as { update: string }).update).to.include(B).and.not.include(A);
  });
});
