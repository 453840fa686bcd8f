import type { Quad, Term } from '@rdfjs/types';
import { WSM } from './vocab.js';

/**
 * Terms a package or an extension may not use (issue 12, acceptance 1): the
 * service's own vocabulary (`wsm:`, which also holds the built-in
 * administrator role `wsm:WorkspaceAdministrator`) and the IRIs of the
 * service's resources and graphs (everything under WSM_BASE_IRI). Content
 * that used them could pass for one of the service's records (a forged
 * lifecycle command, role or assignment) wherever a query is not confined to
 * the service's own graphs; refusing it at validation closes that door for
 * good, and the record queries are confined as well.
 */
export interface ReservedUse {
  /** The statement, as N-Triples-like text (bounded). */
  statement: string;
  quad: Quad;
  subject: string;
  predicate: string;
  object: string;
  /** The reserved IRI it uses. */
  term: string;
  /** What the reserved IRI belongs to. */
  reason: string;
}

const MAX_TERM_TEXT = 200;

function bounded(text: string): string {
  return text.length > MAX_TERM_TEXT ? `${text.slice(0, MAX_TERM_TEXT)}...` : text;
}

function termText(term: Term): string {
  switch (term.termType) {
    case 'NamedNode': return `<${bounded(term.value)}>`;
    case 'BlankNode': return `_:${bounded(term.value)}`;
    case 'Literal': return JSON.stringify(bounded(term.value));
    default: return bounded(term.value);
  }
}

export class ReservedTerms {
  private readonly prefixes: Array<{ prefix: string; reason: string }>;

  constructor(baseIri: string) {
    this.prefixes = [
      { prefix: WSM.ns, reason: "the service's own vocabulary (wsm:)" },
      { prefix: baseIri.endsWith('/') ? baseIri : `${baseIri}/`, reason: `the service's resource IRIs (under ${baseIri})` },
    ];
  }

  /** Why an IRI is reserved, or null when it is not. */
  reasonFor(value: string): string | null {
    for (const { prefix, reason } of this.prefixes) if (value.startsWith(prefix)) return reason;
    return null;
  }

  /** Statements of `quads` that use a reserved IRI (as subject, predicate, object or datatype), at most `limit`. */
  uses(quads: Iterable<Quad>, limit = 20): ReservedUse[] {
    const out: ReservedUse[] = [];
    for (const q of quads) {
      const terms: Term[] = [q.subject, q.predicate, q.object];
      if (q.object.termType === 'Literal') terms.push(q.object.datatype);
      for (const term of terms) {
        if (term.termType !== 'NamedNode') continue;
        const reason = this.reasonFor(term.value);
        if (!reason) continue;
        out.push({
          statement: `${termText(q.subject)} ${termText(q.predicate)} ${termText(q.object)} .`,
          quad: q, subject: q.subject.value, predicate: q.predicate.value, object: q.object.value,
          term: term.value, reason,
        });
        break;
      }
      if (out.length >= limit) break;
    }
    return out;
  }

  /** The message for one reserved use. */
  static message(use: ReservedUse): string {
    return `The statement ${use.statement} uses <${bounded(use.term)}>, which belongs to ${use.reason}; packages and extensions may not use it`;
  }
}
