import { expect } from 'chai';
import { blankNodeSafeSlices } from '../../src/store/ntriples-slices.js';

/** A report-like text: `results` results, each a blank node with a blank-node path, and lines without blank nodes between. */
function reportText(results: number): { data: string; lines: number } {
  let data = '<urn:report> <urn:p:type> <urn:c:Report> .\n';
  for (let i = 0; i < results; i++) {
    data += `<urn:report> <urn:p:result> _:r${i} .\n_:r${i} <urn:p:focus> <urn:f:${i}> .\n_:r${i} <urn:p:path> _:p${i} .\n`;
    data += `_:p${i} <urn:p:inverse> <urn:p:hasRole> .\n<urn:f:${i}> <urn:p:label> "plain line ${i}" .\n`;
  }
  return { data, lines: 1 + results * 5 };
}

describe('N-Triples slices that keep blank nodes whole', () => {
  it('gives every line once, and each result with its path in one piece', async () => {
    const { data, lines } = reportText(3000);
    const pieces: string[] = [];
    for await (const piece of blankNodeSafeSlices(data, 4096, async () => {})) pieces.push(piece);
    expect(pieces.length).to.be.greaterThan(10);
    const all = pieces.join('').split('\n').filter(Boolean);
    expect(all).to.have.length(lines);
    expect([...all].sort()).to.deep.equal(data.split('\n').filter(Boolean).sort());
    for (let i = 0; i < 3000; i += 97) {
      const holding = pieces.filter((p) => p.includes(`_:r${i} `) || p.includes(`_:p${i} `));
      expect(holding, `result ${i}`).to.have.length(1);
    }
  });

  it('lets the event loop turn while it sorts blank nodes into their groups, not only while it scans', async () => {
    const { data, lines } = reportText(20_000);
    let pauses = 0;
    let beforeFirstBlankPiece = -1;
    for await (const piece of blankNodeSafeSlices(data, 64 * 1024, async () => { pauses++; })) {
      if (beforeFirstBlankPiece < 0 && piece.includes('_:')) beforeFirstBlankPiece = pauses;
    }
    const scanPauses = Math.floor(lines / 4096);
    const linkedLines = 20_000 * 4;
    // The scan pauses every 4,096 lines; sorting the 80,000 blank-node lines into groups must pause as often.
    expect(beforeFirstBlankPiece).to.be.at.least(scanPauses + Math.floor(linkedLines / 4096));
  });
});
