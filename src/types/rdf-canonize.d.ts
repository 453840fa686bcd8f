/** The part of rdf-canonize (no types of its own) the tests use: RDF dataset canonicalization of N-Quads. */
declare module 'rdf-canonize' {
  export function canonize(input: string, options: { algorithm: 'RDFC-1.0'; inputFormat: 'application/n-quads' }): Promise<string>;
}
