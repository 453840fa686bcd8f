import { expect } from 'chai';
import fc from 'fast-check';
import { openDurableStore, type DurableStore } from '../../src/store/embedded/durable.js';
import { sparql, iri, integer } from '../../src/rdf/sparql.js';
import { tempDir } from './helpers.js';

/*
 * A snapshot worker replays the journal told which conditional records the
 * live store skipped, and applies the others without asking their condition
 * again (docs/decisions.md, Durability). Whatever the mix of conditions that
 * held and failed, and of snapshots taken between and during the writes,
 * the worker's store must come out as the live one was (else the main thread
 * takes the snapshot: counted apart), and a restart must give it back.
 */

type Step =
  | { kind: 'claim'; key: number; value: number } // applied only while the key is free (as a unique alias)
  | { kind: 'edit'; key: number; value: number } // applied only while the key is taken
  | { kind: 'release'; key: number } // unconditional
  | { kind: 'snapshot'; racing: boolean };

const G = 'urn:g:keys';
const key = (k: number) => iri(`urn:key:${k}`);
const taken = (k: number) => sparql`ASK { GRAPH <urn:g:keys> { ${key(k)} <urn:p:v> ?v } }`;

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('claim' as const), key: fc.nat(5), value: fc.nat(3) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('edit' as const), key: fc.nat(5), value: fc.nat(3) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('release' as const), key: fc.nat(5) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('snapshot' as const), racing: fc.boolean() }) },
);

/** The store's keys and values. */
async function contentOf(store: DurableStore): Promise<Record<number, number>> {
  const rows = await store.select(sparql`SELECT ?k ?v WHERE { GRAPH <urn:g:keys> { ?k <urn:p:v> ?v } }`);
  return Object.fromEntries(rows.map((r) => [Number(r.k!.value.slice('urn:key:'.length)), Number(r.v!.value)]));
}

describe('store: snapshot workers and conditional records', () => {
  it('rebuild the live store whatever conditions held or failed, with snapshots between and during the writes', async function () {
    this.timeout(120_000);
    await fc.assert(fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 40 }), async (steps) => {
      const { dir, cleanup } = await tempDir();
      try {
        const store = await openDurableStore(dir);
        // The model, in call order: the order the journal takes the writes in, and applies them in.
        const model = new Map<number, number>();
        const expected: boolean[] = [];
        const outcomes: Promise<boolean>[] = [];
        const snapshots: Promise<void>[] = [];
        for (const s of steps) {
          if (s.kind === 'snapshot') {
            const taking = store.snapshot();
            snapshots.push(taking);
            if (!s.racing) await taking;
            continue;
          }
          if (s.kind === 'release') {
            model.delete(s.key);
            expected.push(true);
            outcomes.push(store.update(sparql`DELETE WHERE { GRAPH <urn:g:keys> { ${key(s.key)} <urn:p:v> ?v } }`, [G]).then(() => true));
            continue;
          }
          const holds = s.kind === 'claim' ? !model.has(s.key) : model.has(s.key);
          expected.push(holds);
          if (holds) model.set(s.key, s.value);
          const write = sparql`DELETE { GRAPH <urn:g:keys> { ${key(s.key)} <urn:p:v> ?old } }
            INSERT { GRAPH <urn:g:keys> { ${key(s.key)} <urn:p:v> ${integer(s.value)} } }
            WHERE { OPTIONAL { GRAPH <urn:g:keys> { ${key(s.key)} <urn:p:v> ?old } } }`;
          outcomes.push(store.writeIf({ ask: taken(s.key), expect: s.kind === 'edit' }, [{ kind: 'update', sparql: write, graphs: [G] }]));
        }
        expect(await Promise.all(outcomes)).to.deep.equal(expected);
        await Promise.all(snapshots);
        await store.snapshot();
        const want = Object.fromEntries([...model].sort((a, b) => a[0] - b[0]));
        expect(await contentOf(store)).to.deep.equal(want);
        const stats = store.stats();
        expect(stats.snapshotsByWorker, 'every snapshot was written by its worker: the rebuilt store matched the live one').to.equal(stats.snapshots);
        if (steps.some((s) => s.kind !== 'snapshot')) expect(stats.snapshots).to.be.at.least(1);
        await store.close();
        const reopened = await openDurableStore(dir);
        try {
          expect(await contentOf(reopened)).to.deep.equal(want);
        } finally {
          await reopened.close();
        }
      } finally {
        await cleanup();
      }
    }), { numRuns: 12 });
  });
});
