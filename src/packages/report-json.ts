import { GraphCache } from '../store/graph-cache.js';
import type { Binding, QuadStore } from '../store/store.js';
import { iri, sparql } from '../rdf/sparql.js';
import { reportFromResultBindings, type StoredResultBindings } from './validation.js';
import type { ValidationReportJson } from './reads.js';

/**
 * P9 as JSON, read from the stored report graph: one SELECT of every
 * result's values (IRIs and literals used as the strings they are), then
 * one CONSTRUCT of the few blank nodes they point at (paths, blank focus
 * nodes). Never a query per result, never a parse of the whole graph.
 *
 * Kept in the one read cache keyed on the report graph's revision: a
 * report of 15,000 results costs that one read, later requests get the kept
 * answer until the graph changes. Few are kept (a large one is megabytes).
 */
export class ReportReader {
  private readonly cache: GraphCache<ValidationReportJson>;

  constructor(private readonly store: QuadStore) {
    this.cache = new GraphCache(store, 16);
  }

  /** The JSON of the report stored in `graph`. */
  json(graph: string): Promise<ValidationReportJson> {
    return this.cache.get(graph, [graph], () => this.read(graph));
  }

  private async read(graph: string): Promise<ValidationReportJson> {
    const g = iri(graph);
    const rows: Binding[] = await this.store.select(sparql`PREFIX sh: <http://www.w3.org/ns/shacl#>
      SELECT ?r ?severity ?focus ?path ?inverse ?value ?message ?shape WHERE { GRAPH ${g} {
        ?report sh:result ?r .
        OPTIONAL { ?r sh:resultSeverity ?severity } OPTIONAL { ?r sh:focusNode ?focus } OPTIONAL { ?r sh:resultPath ?path }
        OPTIONAL { ?r sh:resultPath ?path . ?path sh:inversePath ?inverse FILTER (isBlank(?path) && isIRI(?inverse)) }
        OPTIONAL { ?r sh:value ?value } OPTIONAL { ?r sh:resultMessage ?message } OPTIONAL { ?r sh:sourceShape ?shape } } }`);
    const byResult = new Map<string, StoredResultBindings>();
    for (const b of rows) {
      const key = b.r!.value;
      let row = byResult.get(key);
      if (!row) {
        row = { severity: b.severity, focusNode: b.focus, path: b.path, inversePathOf: b.inverse, value: b.value, messages: [], sourceShape: b.shape };
        byResult.set(key, row);
      }
      const message = b.message;
      if (message && !row.messages.some((m) => m.value === message.value && m['xml:lang'] === message['xml:lang'] && m.datatype === message.datatype)) row.messages.push(message);
    }
    // Blank nodes the results point at, and every blank node below them (a path's list, a node's label).
    // Not the inverse paths of one IRI read above: a report of 15,000 "role held by nobody" infos has one each,
    // and looking them up here would hold the event loop (docs/figures.md).
    const blanks = await this.store.construct(sparql`PREFIX sh: <http://www.w3.org/ns/shacl#>
      CONSTRUCT { ?s ?p ?o } WHERE {
        { SELECT DISTINCT ?b WHERE { GRAPH ${g} {
          { ?r sh:focusNode|sh:value ?b } UNION { ?r sh:resultPath ?b FILTER NOT EXISTS { ?b sh:inversePath ?inverse FILTER isIRI(?inverse) } }
          FILTER isBlank(?b) } } }
        GRAPH ${g} { ?b (<urn:wsm:any>|!<urn:wsm:any>)* ?s . ?s ?p ?o FILTER isBlank(?s) } }`);
    const r = reportFromResultBindings([...byResult.values()], blanks);
    const entries = (severity: string) => r.results.filter((x) => x.severity === severity)
      .map((x) => ({ focusNode: x.focusNode, path: x.path, value: x.value, message: x.message }));
    return {
      conforms: r.conforms, violationCount: r.violationCount, warningCount: r.warningCount, infoCount: r.infoCount,
      violations: entries('VIOLATION'), warnings: entries('WARNING'), infos: entries('INFO'),
    };
  }
}
