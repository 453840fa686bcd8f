import { expect } from 'chai';
import { serviceMetrics } from '../../src/metrics.js';

/** The value of wsm_store_quads in a scrape of `registry`. */
async function scrapeQuads(registry: ReturnType<typeof serviceMetrics>): Promise<number> {
  const text = await registry.metrics();
  return Number(/^wsm_store_quads (\S+)$/m.exec(text)![1]);
}

describe('service metrics: the store\'s quad count', () => {
  it('a scrape answers the last count while a recount after a write runs, instead of waiting for it', async () => {
    let version = 1;
    let calls = 0;
    let release: ((n: number) => void) | undefined;
    const registry = serviceMetrics({
      quads: () => { calls++; return calls === 1 ? 10 : new Promise<number>((resolve) => { release = resolve; }); },
      storeVersion: () => version,
      sandbox: () => ({ workers: 0, timeouts: 0, synced: { knowledge: 0, all: 0 } }),
      quadsRefreshMs: 0,
      // A clock that stands still: every count takes no time, so only the write decides.
      now: () => 1_000,
    });
    expect(await scrapeQuads(registry), 'the first scrape waits for a count').to.equal(10);
    version = 2;
    // The recount has not finished (release not called): the scrape still answers, with the last count.
    expect(await scrapeQuads(registry)).to.equal(10);
    expect(calls).to.equal(2);
    // Scrapes meanwhile do not start another count.
    expect(await scrapeQuads(registry)).to.equal(10);
    expect(calls).to.equal(2);
    release!(25);
    await new Promise((resolve) => setImmediate(resolve));
    expect(await scrapeQuads(registry)).to.equal(25);
    // Nothing written since: no count.
    expect(calls).to.equal(2);
  });

  it('waits a hundred times a count\'s duration before the next one, so a slow count takes at most 1% of the engine', async () => {
    let version = 1;
    let calls = 0;
    let clock = 0;
    const registry = serviceMetrics({
      // Each count takes 60 ms on this clock: the next may start no sooner than 6 s after the last one started.
      quads: () => { calls++; clock += 60; return calls; },
      storeVersion: () => version,
      sandbox: () => ({ workers: 0, timeouts: 0, synced: { knowledge: 0, all: 0 } }),
      quadsRefreshMs: 0,
      now: () => clock,
    });
    expect(await scrapeQuads(registry)).to.equal(1);
    version = 2;
    clock = 5_900;
    expect(await scrapeQuads(registry)).to.equal(1);
    expect(calls, 'written since, but the last count started less than 6 s ago').to.equal(1);
    clock = 6_000;
    expect(await scrapeQuads(registry), 'the recount runs behind this scrape').to.equal(1);
    expect(calls).to.equal(2);
    await new Promise((resolve) => setImmediate(resolve));
    expect(await scrapeQuads(registry)).to.equal(2);
  });
});
