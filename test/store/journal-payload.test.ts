import { expect } from 'chai';
import { ENCODE_SLICE_CHARS, encodeRecord, encodeRecordInSlices, scanJournal } from '../../src/store/journal.js';
import { HEADER_BYTES, loadText, payloadOps, recordTime, JournalGapError } from '../../src/store/journal-records.js';
import { untimedRecord } from './helpers.js';
import { updateOp, type WriteOp } from '../../src/store/store.js';
import { sparql } from '../../src/rdf/sparql.js';

/**
 * A query worker reads a journal record's ops without parsing the record
 * whole, and a load's text in pieces (`payloadOps`, `loadText`): what it
 * reads must be exactly what was written, whatever the text holds.
 */

/** A text that JSON escapes densely: quotes, backslashes, line breaks, tabs, control and non-ASCII characters, surrogate pairs. */
function awkwardText(lines: number): string {
  let out = '';
  for (let i = 0; i < lines; i++) {
    out += `<urn:s:${i}> <urn:p> "quote \\" backslash \\\\ tab\\t é ü 𝄞 ${'\u0001'} ${i % 7 === 0 ? '\\u00e9 \\n' : ''}" .\n`;
  }
  return out;
}

const payloadOf = (record: Buffer) => record.subarray(HEADER_BYTES);

describe('journal records: ops read out of a payload, loads piece by piece', () => {
  const update = updateOp(sparql`DROP SILENT GRAPH <urn:g:a>`, ['urn:g:a']);

  it('reads a conditional write\'s record: its condition first, then its ops; a condition anywhere else is refused', () => {
    const condition = { kind: 'condition' as const, ask: 'ASK { GRAPH <urn:g:a> { ?s ?p "x" } }', expect: false };
    const read = payloadOps(payloadOf(encodeRecord(3, [condition, update])), 'journal', 3);
    expect(read).to.deep.equal([condition, { ...update }]);
    expect(() => payloadOps(payloadOf(encodeRecord(4, [update, condition])), 'journal', 4)).to.throw(JournalGapError);
  });

  it('reads the ops of a record as written, a large load\'s text in pieces that join into it', async () => {
    const data = awkwardText(40_000);
    expect(data.length).to.be.above(2 * ENCODE_SLICE_CHARS);
    const ops: WriteOp[] = [update, { kind: 'load', graph: 'urn:g:a', format: 'application/n-triples', data }, { kind: 'load', graph: 'urn:g:b', format: 'text/turtle', data: '' }];
    for (const record of [encodeRecord(7, ops), Buffer.concat(await encodeRecordInSlices(7, ops))]) {
      const payload = payloadOf(record);
      const read = payloadOps(payload, 'journal', 7);
      expect(read.map((op) => op.kind)).to.deep.equal(['update', 'load', 'load']);
      expect(read[0]).to.deep.equal({ ...update });
      const load = read[1]!;
      if (load.kind !== 'load') throw new Error('not a load');
      expect(load.graph).to.equal('urn:g:a');
      expect(load.format).to.equal('application/n-triples');
      const pieces = [...loadText(payload, load.data)];
      expect(pieces.length).to.be.above(1);
      expect(pieces.join('')).to.equal(data);
      const empty = read[2]!;
      if (empty.kind !== 'load') throw new Error('not a load');
      expect([...loadText(payload, empty.data)].join('')).to.equal('');
    }
  });

  it('keeps a line longer than a piece whole', () => {
    const data = `<urn:s> <urn:p> "${'x\\"'.repeat(800_000)}" .\n<urn:s> <urn:p> "end" .\n`;
    const payload = payloadOf(encodeRecord(1, [{ kind: 'load', graph: 'urn:g', format: 'application/n-triples', data }]));
    const load = payloadOps(payload, 'journal', 1)[0]!;
    if (load.kind !== 'load') throw new Error('not a load');
    expect([...loadText(payload, load.data)].join('')).to.equal(data);
  });

  it('reads a record\'s commit time, and a record of the older form (no time) as before', async () => {
    const at = Date.UTC(2026, 11, 6, 22, 41, 5, 123);
    const load = { kind: 'load' as const, graph: 'urn:g:b', format: 'text/turtle' as const, data: '<urn:a> <urn:b> "é" .\n' };
    const ops: WriteOp[] = [update, load];
    const timed = encodeRecord(2, ops, at);
    const older = untimedRecord(1, ops);
    expect(Buffer.concat(await encodeRecordInSlices(2, ops, at)).equals(timed)).to.equal(true);
    expect(recordTime(payloadOf(timed))).to.equal(at);
    expect(recordTime(payloadOf(older))).to.equal(undefined);
    for (const record of [older, timed]) {
      const read = payloadOps(payloadOf(record), 'journal', 1);
      expect(read.map((op) => op.kind)).to.deep.equal(['update', 'load']);
      const text = read[1]!;
      if (text.kind !== 'load') throw new Error('not a load');
      expect([...loadText(payloadOf(record), text.data)].join('')).to.equal(load.data);
    }
    const scan = scanJournal(Buffer.concat([older, timed]));
    expect(scan.problem).to.equal(undefined);
    expect(scan.records).to.deep.equal([{ seq: 1, ops }, { seq: 2, ops, at }]);
  });

  it('refuses a payload that is not write ops', () => {
    for (const text of ['{"kind":"update"}', '{"at":1,"opz":[]}', '[{"kind":"load","graph":"urn:g"}]', '[{"kind":"update","sparql":"x"', 'not json']) {
      expect(() => payloadOps(Buffer.from(text), 'journal', 3)).to.throw(JournalGapError);
    }
  });
});
