import { createRequire } from 'node:module';

type Oxigraph = typeof import('oxigraph');

let loaded: Oxigraph | undefined;

/**
 * Oxigraph, loaded on first use. Loading its WebAssembly engine adds about
 * 18 MB to the process's RSS; on the remote store (`WSM_STORE=sparql`) the
 * main thread needs it only to check Turtle (an extension's, a registry
 * publication's) and, under the test suite, to parse each write. The
 * embedded store and the worker threads import it as usual.
 */
export function oxigraphEngine(): Oxigraph {
  return (loaded ??= createRequire(import.meta.url)('oxigraph') as Oxigraph);
}
