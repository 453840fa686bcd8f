import { BlankNodeGroups } from '../rdf/blank-node-groups.js';

/**
 * Cutting N-Triples text into pieces that can be loaded one call at a time.
 *
 * Each load call of the engine reads blank node labels afresh: `_:a` in two
 * calls is two different nodes. So a piece may end at any line end only
 * while no blank node has triples on both sides of the cut.
 */

/** N-Triples text cut at line ends into pieces of about `size` characters (a triple never spans lines). */
export function* nTriplesSlices(data: string, size: number): Generator<string> {
  let start = 0;
  while (start < data.length) {
    let end = start + size;
    if (end >= data.length) end = data.length;
    else {
      const newline = data.indexOf('\n', end);
      end = newline === -1 ? data.length : newline + 1;
    }
    yield data.slice(start, end);
    start = end;
  }
}

const isSpace = (c: string | undefined) => c === ' ' || c === '\t' || c === '\n' || c === '\r';

function skipSpaces(line: string, at: number): number {
  while (isSpace(line[at])) at++;
  return at;
}

/** The label of the blank node starting at `at` (`_:x`), without a final `.` (a label cannot end with one). */
function labelAt(line: string, at: number): string {
  let end = at + 2;
  while (end < line.length && !isSpace(line[end]) && line[end] !== '<' && line[end] !== '"' && line[end] !== '#') end++;
  while (end > at + 2 && line[end - 1] === '.') end--;
  return line.slice(at, end);
}

/**
 * The blank node labels of one line of N-Triples: its subject's and its
 * object's (a predicate is always an IRI). A `_:` inside an IRI or a
 * literal is not one.
 */
export function blankNodesOfLine(line: string): string[] {
  const out: string[] = [];
  let at = skipSpaces(line, 0);
  if (line.startsWith('_:', at)) {
    const label = labelAt(line, at);
    out.push(label);
    at += label.length;
  } else if (line[at] === '<') {
    const close = line.indexOf('>', at);
    if (close === -1) return out;
    at = close + 1;
  } else {
    return out; // empty, a comment, or not N-Triples (the engine answers for that)
  }
  at = skipSpaces(line, at);
  if (line[at] !== '<') return out;
  const close = line.indexOf('>', at);
  if (close === -1) return out;
  at = skipSpaces(line, close + 1);
  if (line.startsWith('_:', at)) out.push(labelAt(line, at));
  return out;
}

/**
 * N-Triples text cut into pieces of about `size` characters, each a whole
 * number of lines, such that all the lines of a blank node, and of every
 * blank node linked to it, are in one piece: loaded one piece per call, the
 * text gives the same graph as loaded in one call. Lines without a blank
 * node come first, in their order; then the blank nodes' lines, a group of
 * linked ones at a time (a group larger than `size` is one piece of its
 * own). `pause` is awaited every few thousand lines of the scan and of the
 * sorting of blank nodes' lines into their groups, so a caller on the event
 * loop can let it turn.
 */
export async function* blankNodeSafeSlices(data: string, size: number, pause: () => Promise<void>): AsyncGenerator<string> {
  let mark = data.indexOf('_:');
  if (mark === -1) {
    yield* nTriplesSlices(data, size);
    return;
  }
  const groups = new BlankNodeGroups();
  const linked: Array<{ line: string; label: string }> = [];
  // Lines without a blank node, as runs of the text between the lines taken out.
  let plain: string[] = [];
  let plainChars = 0;
  let runStart = 0;
  const endRun = (at: number) => {
    if (at > runStart) {
      plain.push(data.slice(runStart, at));
      plainChars += at - runStart;
    }
  };
  let lines = 0;
  for (let start = 0; start < data.length;) {
    const newline = data.indexOf('\n', start);
    const end = newline === -1 ? data.length : newline + 1;
    // The next `_:` is looked for again only once it is behind: one pass over the text in all.
    if (mark !== -1 && mark < start) mark = data.indexOf('_:', start);
    // Every line taken out ends with a newline: lines are put together again in another order.
    const labels = mark !== -1 && mark < end ? blankNodesOfLine(data.slice(start, end)) : [];
    if (labels.length > 0) {
      endRun(start);
      runStart = end;
      groups.link(labels);
      linked.push({ line: newline === -1 ? `${data.slice(start)}\n` : data.slice(start, end), label: labels[0]! });
    } else if (plainChars + (end - runStart) >= size) {
      endRun(end);
      runStart = end;
      yield plain.join('');
      plain = [];
      plainChars = 0;
    }
    start = end;
    if (++lines % 4096 === 0) await pause();
  }
  endRun(data.length);
  if (plain.length) yield plain.join('');
  // Sorted into their groups with pauses too: a validation report has about eight lines per result, and a large
  // one sorted in one stretch holds the event loop (docs/figures.md).
  const byGroup = new Map<string, string[]>();
  for (const [i, { line, label }] of linked.entries()) {
    const group = groups.group(label);
    const members = byGroup.get(group);
    if (members) members.push(line); else byGroup.set(group, [line]);
    if ((i + 1) % 4096 === 0) await pause();
  }
  let piece: string[] = [];
  let pieceChars = 0;
  for (const group of byGroup.values()) {
    const chars = group.reduce((n, line) => n + line.length, 0);
    if (pieceChars > 0 && pieceChars + chars > size) {
      yield piece.join('');
      piece = [];
      pieceChars = 0;
    }
    piece.push(...group);
    pieceChars += chars;
  }
  if (piece.length) yield piece.join('');
}
