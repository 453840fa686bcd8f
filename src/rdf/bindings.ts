import type { Binding } from '../store/store.js';

/** Small readers for SPARQL JSON bindings. */
export const str = (b: Binding, name: string): string | null => b[name]?.value ?? null;
export const req = (b: Binding, name: string): string => {
  const v = b[name]?.value;
  if (v === undefined) throw new Error(`binding ?${name} missing`);
  return v;
};
export const int = (b: Binding, name: string): number => Number(b[name]?.value ?? 0);
export const bool = (b: Binding, name: string): boolean | null => {
  const v = b[name]?.value;
  return v === undefined ? null : v === 'true' || v === '1';
};

/** An xsd:dateTime binding as ISO 8601 in UTC with milliseconds and a Z (docs/api.md, "Conventions"). */
export const time = (b: Binding, name: string): string => {
  const v = b[name]?.value;
  if (v === undefined) throw new Error(`binding ?${name} missing`);
  return new Date(v).toISOString();
};
export const optTime = (b: Binding, name: string): string | null => (b[name] ? time(b, name) : null);
