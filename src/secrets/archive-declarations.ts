import { parseTurtle } from '../rdf/turtle.js';
import { matrixText } from '../packages/matrix-text.js';
import type { PackageArchive } from '../packages/archive.js';
import { extractDeclarations, type Declarations } from './declarations.js';

/**
 * What a package archive's matrices declare, read from its Turtle here (the
 * registry's declarations, an install request's bindings check). A matrix
 * file that does not parse declares nothing: the install's own checks
 * report it.
 */
export function declarationsOfArchive(archive: PackageArchive): Declarations {
  const quads = archive.manifest.matrices.flatMap((entry) => {
    const bytes = archive.files.get(entry.path);
    if (bytes === undefined) return [];
    try {
      return parseTurtle(matrixText(bytes), { baseIri: entry.uri, source: entry.path });
    } catch {
      return [];
    }
  });
  return extractDeclarations(quads, archive.manifest.matrices.map((m) => m.uri));
}
