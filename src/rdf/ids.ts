import { parse as parseUuid, v5 as uuidv5 } from 'uuid';

/** Namespace of the service's name-based (v5) UUIDs, as the bytes the hash takes. */
const NAMESPACE = parseUuid('6f4c7f0e-2d8b-5b8e-9a57-8d2f4b1c3e90');

/**
 * An id derived from stable keys (docs/decisions.md, "Identity"): the same keys give
 * the same UUID, so ids of roles, agents, principals and matrices survive a
 * reinstall and role assignments keep pointing at them.
 */
export function stableId(...keys: string[]): string {
  return idOfName(nameOf(keys));
}

/** The name the UUID of `keys` is made from (each key prefixed by its length, so no two lists of keys share one). */
const nameOf = (keys: readonly string[]): string => keys.map((k) => `${k.length}:${k}`).join('|');

function idOfName(name: string): string {
  // Given as UTF-8 bytes: the library's own encoding of a string
  // (`unescape(encodeURIComponent(...))`) was most of the cost, and an
  // install derives two ids per IRI it names (15,000 roles: 0.3 s).
  return uuidv5(Buffer.from(name, 'utf8'), NAMESPACE);
}

/** A fresh random id. */
export const newId = (): string => crypto.randomUUID();

export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const stableIds = new Map<string, string>();

/** `stableId(...keys)`, remembered (a name-based UUID hashes with SHA-1; requests derive the same few ids). */
export function cachedStableId(...keys: string[]): string {
  const key = nameOf(keys);
  let id = stableIds.get(key);
  if (id === undefined) {
    id = idOfName(key);
    if (stableIds.size >= 50_000) stableIds.clear();
    stableIds.set(key, id);
  }
  return id;
}
