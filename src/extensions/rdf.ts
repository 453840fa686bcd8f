import type { Graphs } from '../rdf/graphs.js';
import { prefixes } from '../rdf/vocab.js';
import { sparql, iri, literal, dateTime, boolean, raw, type Sparql, type SparqlFragment } from '../rdf/sparql.js';
import { req, str, bool, time } from '../rdf/bindings.js';
import { updateOp, type Binding, type WriteOp } from '../store/store.js';
import type { Extension } from './schema.js';

/**
 * JSON <-> RDF of extension records (docs/rdf-model.md, "Extensions"):
 *
 *   <base>workspaces/W/extensions      <id/extension/X> a wsm:Extension ; wsm:id ; wsm:label ;
 *                                        wsm:targetMatrix <matrixUri> ; wsm:active ; wsm:owner <id/user/U> ;
 *                                        wsm:content "Turtle text" ; wsm:lastCommand <id/command/C>? ;
 *                                        wsm:workspace ; wsm:createdAt ; wsm:updatedAt .
 *   <base>workspaces/W/extensions/X    the parsed Turtle content, as triples.
 *
 * The Turtle text is kept verbatim in the record (X1 gives it back as sent,
 * comments and prefixes included); the triples in the content graph are what
 * re-deployments merge into the target matrix.
 */
export class ExtensionRdf {
  constructor(private readonly graphs: Graphs) {}

  extensionIri(id: string): string { return this.graphs.resource('extension', id); }
  commandIri(id: string): string { return this.graphs.resource('command', id); }

  /** SELECT of records; `filter` narrows `?x` (code-built SPARQL). */
  selectQuery(workspaceId: string, filter: string, withContent: boolean): Sparql {
    const g = iri(this.graphs.extensions(workspaceId));
    const sys = iri(this.graphs.system);
    const content = withContent ? sparql`OPTIONAL { ?x wsm:content ?content }` : '';
    return sparql`${prefixes}SELECT ?id ?label ?target ?active ?ownerId ?ownerUsername ?content ?lastCommandId ?createdAt ?updatedAt WHERE {
      GRAPH ${g} {
        ?x a wsm:Extension ; wsm:id ?id ; wsm:label ?label ; wsm:targetMatrix ?target ; wsm:active ?active ;
           wsm:owner ?owner ; wsm:createdAt ?createdAt ; wsm:updatedAt ?updatedAt .
        OPTIONAL { ?x wsm:lastCommand ?cmd . BIND (REPLACE(STR(?cmd), "^.*/", "") AS ?lastCommandId) }
        ${raw(content)}
        ${raw(filter)}
      }
      OPTIONAL { GRAPH ${sys} { ?owner wsm:id ?ownerId ; wsm:username ?ownerUsername } }
    } ORDER BY ?createdAt ?id`;
  }

  fromBinding(b: Binding, withContent: boolean): Extension {
    const ownerId = str(b, 'ownerId') ?? '00000000-0000-0000-0000-000000000000';
    const ownerUsername = str(b, 'ownerUsername') ?? '';
    const target = req(b, 'target');
    return {
      id: req(b, 'id'),
      label: req(b, 'label'),
      targetMatrixUri: target,
      active: bool(b, 'active') ?? false,
      ownerId,
      ownerUsername,
      content: withContent ? (str(b, 'content') ?? '') : null,
      createdAt: time(b, 'createdAt'),
      updatedAt: time(b, 'updatedAt'),
      lastCommandId: str(b, 'lastCommandId'),
      targetMatrix: { uri: target },
      owner: { id: ownerId, username: ownerUsername },
    };
  }

  /** Inserts a new record (inactive). */
  insertRecord(input: {
    workspaceId: string; workspaceIri: string; id: string; label: string; targetMatrixUri: string;
    ownerIri: string; content: string; now: Date;
  }): WriteOp {
    const g = iri(this.graphs.extensions(input.workspaceId));
    const x = iri(this.extensionIri(input.id));
    const t = dateTime(input.now);
    return updateOp(sparql`${prefixes}INSERT DATA { GRAPH ${g} {
      ${x} a wsm:Extension ; wsm:id ${literal(input.id)} ; wsm:label ${literal(input.label)} ;
        wsm:targetMatrix ${iri(input.targetMatrixUri)} ; wsm:active ${boolean(false)} ; wsm:owner ${iri(input.ownerIri)} ;
        wsm:content ${literal(input.content)} ; wsm:workspace ${iri(input.workspaceIri)} ;
        wsm:createdAt ${t} ; wsm:updatedAt ${t} . } }`, [this.graphs.extensions(input.workspaceId)]);
  }

  /** Replaces one property of a record (only when the record exists). */
  setProperty(workspaceId: string, id: string, property: string, value: SparqlFragment): WriteOp {
    const g = iri(this.graphs.extensions(workspaceId));
    const x = iri(this.extensionIri(id));
    const p = iri(property);
    return updateOp(sparql`${prefixes}DELETE { GRAPH ${g} { ${x} ${p} ?old } } INSERT { GRAPH ${g} { ${x} ${p} ${value} } }
      WHERE { GRAPH ${g} { ${x} a wsm:Extension . OPTIONAL { ${x} ${p} ?old } } }`, [this.graphs.extensions(workspaceId)]);
  }

  /** Removes a record and its content graph. */
  deleteRecord(workspaceId: string, id: string): WriteOp[] {
    const g = iri(this.graphs.extensions(workspaceId));
    const x = iri(this.extensionIri(id));
    return [
      updateOp(sparql`${prefixes}DELETE WHERE { GRAPH ${g} { ${x} ?p ?o } }`, [this.graphs.extensions(workspaceId)]),
      this.clearContent(workspaceId, id),
    ];
  }

  clearContent(workspaceId: string, id: string): WriteOp {
    return updateOp(sparql`DROP SILENT GRAPH ${iri(this.graphs.extension(workspaceId, id))}`, [this.graphs.extension(workspaceId, id)]);
  }
}
