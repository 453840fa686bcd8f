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
 * own). `pause` is awaited every few thousand lines of the scan, so a
 * caller on the event loop can let it turn.
 */
export async function* blankNodeSafeSlices(data: string, size: number, pause: () => Promise<void>): AsyncGenerator<string> {
  if (!data.includes('_:')) {
    yield* nTriplesSlices(data, size);
    return;
  }
  const parent = new Map<string, string>();
  const root = (label: string): string => {
    let r = label;
    for (let up = parent.get(r)!; up !== r; up = parent.get(r)!) r = up;
    for (let at = label, up = parent.get(at)!; up !== r; at = up, up = parent.get(at)!) parent.set(at, r);
    return r;
  };
  const linked: Array<{ line: string; label: string }> = [];
  let plain: string[] = [];
  let plainChars = 0;
  let lines = 0;
  for (let start = 0; start < data.length;) {
    const newline = data.indexOf('\n', start);
    const end = newline === -1 ? data.length : newline + 1;
    // Every line ends with a newline here: lines are put together again in another order.
    const text = newline === -1 ? `${data.slice(start)}\n` : data.slice(start, end);
    const mark = data.indexOf('_:', start);
    const labels = mark !== -1 && mark < end ? blankNodesOfLine(text) : [];
    if (labels.length === 0) {
      plain.push(text);
      plainChars += end - start;
      if (plainChars >= size) {
        yield plain.join('');
        plain = [];
        plainChars = 0;
      }
    } else {
      for (const label of labels) if (!parent.has(label)) parent.set(label, label);
      if (labels.length === 2) {
        const a = root(labels[0]!);
        const b = root(labels[1]!);
        if (a !== b) parent.set(a, b);
      }
      linked.push({ line: text, label: labels[0]! });
    }
    start = end;
    if (++lines % 4096 === 0) await pause();
  }
  if (plain.length) yield plain.join('');
  const groups = new Map<string, string[]>();
  for (const { line, label } of linked) {
    const r = root(label);
    const group = groups.get(r);
    if (group) group.push(line); else groups.set(r, [line]);
  }
  let piece: string[] = [];
  let pieceChars = 0;
  for (const group of groups.values()) {
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
