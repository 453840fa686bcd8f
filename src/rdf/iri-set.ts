/** A set of IRIs as far as its readers need: its size, membership, and its members. `ReadonlySet<string>` is one. */
export interface IriSet extends Iterable<string> {
  readonly size: number;
  has(iri: string): boolean;
}

/**
 * A set of IRIs as the UTF-8 bytes of its members, sorted and unique, with
 * the offset of each: what a thread hands another when the set is large. A
 * pipeline worker answers the IRIs a package mentions this way: 100,000 of
 * them as an array of strings took the receiving event loop about 50 ms to
 * deserialize and as much again to put in a `Set`, with the garbage after;
 * even as one string, about 30 ms to copy. Two buffers are transferred
 * (`transferList`), not copied.
 */
export interface PackedIris {
  bytes: Uint8Array;
  /** Bytes `offsets[i]` to `offsets[i + 1]` are member i; one more offset than members. */
  offsets: Uint32Array;
}

/** Packs `iris` (duplicates dropped), sorted by their UTF-8 bytes: the order `SortedIris` searches in. */
export function packIris(iris: Iterable<string>): PackedIris {
  const sorted = [...new Set(iris)].map((iri) => Buffer.from(iri)).sort(Buffer.compare);
  const offsets = new Uint32Array(sorted.length + 1);
  let at = 0;
  for (let i = 0; i < sorted.length; i++) {
    offsets[i] = at;
    at += sorted[i]!.length;
  }
  offsets[sorted.length] = at;
  // A buffer of its own (Buffer.concat may answer one of Node's shared pool): it is transferred whole.
  const bytes = new Uint8Array(at);
  for (let i = 0; i < sorted.length; i++) bytes.set(sorted[i]!, offsets[i]);
  return { bytes, offsets };
}

/** The buffers of `packed`, for a `postMessage` transfer list. */
export function packedBuffers(packed: PackedIris): ArrayBuffer[] {
  return [packed.bytes.buffer as ArrayBuffer, packed.offsets.buffer as ArrayBuffer];
}

/** A `PackedIris` read in place: membership by binary search over the bytes, no string made but those iterated. */
export class SortedIris implements IriSet {
  readonly size: number;
  private readonly bytes: Buffer;

  constructor(private readonly packed: PackedIris) {
    this.size = packed.offsets.length - 1;
    this.bytes = Buffer.from(packed.bytes.buffer, packed.bytes.byteOffset, packed.bytes.length);
  }

  has(iri: string): boolean {
    const key = Buffer.from(iri);
    const { offsets } = this.packed;
    let lo = 0;
    let hi = this.size - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const order = key.compare(this.bytes, offsets[mid], offsets[mid + 1]);
      if (order === 0) return true;
      if (order > 0) lo = mid + 1;
      else hi = mid - 1;
    }
    return false;
  }

  *[Symbol.iterator](): Iterator<string> {
    for (let i = 0; i < this.size; i++) yield this.bytes.toString('utf8', this.packed.offsets[i], this.packed.offsets[i + 1]);
  }
}

/** `a` with the members of `more` (a few) added; `a` itself when there are none. */
export function withIris(a: IriSet, more: Iterable<string>): IriSet {
  const extra = new Set([...more].filter((x) => !a.has(x)));
  if (extra.size === 0) return a;
  return {
    size: a.size + extra.size,
    has: (iri) => extra.has(iri) || a.has(iri),
    *[Symbol.iterator]() {
      yield* a;
      yield* extra;
    },
  };
}
