const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A matrix file's text from its bytes (UTF-8, checked by
 * `readPackageArchive`), without a byte order mark. Made where the text is
 * parsed (the pipeline worker), not on the event loop.
 */
export function matrixText(bytes: Uint8Array): string {
  return utf8.decode(bytes).replace(/^\uFEFF/, '');
}
