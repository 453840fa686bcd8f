/**
 * The buffer of `bytes` when it can be moved to another thread in place of
 * a copy: the bytes fill a buffer of their own, not yet in `moving` (a slice
 * of a shared buffer, such as Node's pool for small Buffers, must be copied:
 * moving it would empty everything else it holds). Null otherwise.
 */
export function movableBuffer(bytes: Uint8Array, moving: readonly ArrayBuffer[]): ArrayBuffer | null {
  const { buffer, byteOffset, byteLength } = bytes;
  if (!(buffer instanceof ArrayBuffer) || byteOffset !== 0 || byteLength !== buffer.byteLength || moving.includes(buffer)) return null;
  return buffer;
}
