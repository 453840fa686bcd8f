/**
 * Serializers of SPARQL query results (SPARQL 1.1 Query Results JSON, XML,
 * CSV and TSV Formats), from the JSON form Oxigraph produces. Used by the
 * query workers after truncating a result to the row limit.
 */

export interface JsonTerm {
  type: 'uri' | 'literal' | 'bnode' | 'triple';
  value: string | { subject: JsonTerm; predicate: JsonTerm; object: JsonTerm };
  datatype?: string;
  'xml:lang'?: string;
}
export type JsonRow = Record<string, JsonTerm | undefined>;
export interface JsonResults {
  head: { vars?: string[]; link?: string[] };
  results?: { bindings: JsonRow[] };
  boolean?: boolean;
}

const XSD_STRING = 'http://www.w3.org/2001/XMLSchema#string';

const xmlEscape = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')
    // XML 1.0 cannot carry most control characters at all; write them as U+FFFD.
    .replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F]/g, '\uFFFD');

function xmlTerm(term: JsonTerm): string {
  if (term.type === 'triple') {
    const t = term.value as { subject: JsonTerm; predicate: JsonTerm; object: JsonTerm };
    return `<triple><subject>${xmlTerm(t.subject)}</subject><predicate>${xmlTerm(t.predicate)}</predicate><object>${xmlTerm(t.object)}</object></triple>`;
  }
  const value = xmlEscape(term.value as string);
  if (term.type === 'uri') return `<uri>${value}</uri>`;
  if (term.type === 'bnode') return `<bnode>${value}</bnode>`;
  if (term['xml:lang']) return `<literal xml:lang="${xmlEscape(term['xml:lang'])}">${value}</literal>`;
  if (term.datatype && term.datatype !== XSD_STRING) return `<literal datatype="${xmlEscape(term.datatype)}">${value}</literal>`;
  return `<literal>${value}</literal>`;
}

export function toXml(results: JsonResults): string {
  const out = ['<?xml version="1.0" encoding="UTF-8"?>', '<sparql xmlns="http://www.w3.org/2005/sparql-results#">'];
  if (typeof results.boolean === 'boolean') {
    out.push('  <head/>', `  <boolean>${results.boolean}</boolean>`, '</sparql>');
    return `${out.join('\n')}\n`;
  }
  const vars = results.head.vars ?? [];
  out.push('  <head>', ...vars.map((v) => `    <variable name="${xmlEscape(v)}"/>`), '  </head>', '  <results>');
  for (const row of results.results?.bindings ?? []) {
    const cells = vars.filter((v) => row[v]).map((v) => `<binding name="${xmlEscape(v)}">${xmlTerm(row[v]!)}</binding>`);
    out.push(`    <result>${cells.join('')}</result>`);
  }
  out.push('  </results>', '</sparql>');
  return `${out.join('\n')}\n`;
}

function csvField(term: JsonTerm | undefined): string {
  if (!term) return '';
  const text = term.type === 'bnode' ? `_:${term.value as string}` : term.type === 'triple' ? tsvTerm(term) : (term.value as string);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function toCsv(results: JsonResults): string {
  const vars = results.head.vars ?? [];
  const lines = [vars.join(',')];
  for (const row of results.results?.bindings ?? []) lines.push(vars.map((v) => csvField(row[v])).join(','));
  return `${lines.join('\r\n')}\r\n`;
}

const tsvString = (s: string) =>
  `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n').replace(/\r/g, '\\r').replace(/\t/g, '\\t')}"`;

function tsvTerm(term: JsonTerm): string {
  if (term.type === 'triple') {
    const t = term.value as { subject: JsonTerm; predicate: JsonTerm; object: JsonTerm };
    return `<< ${tsvTerm(t.subject)} ${tsvTerm(t.predicate)} ${tsvTerm(t.object)} >>`;
  }
  const value = term.value as string;
  if (term.type === 'uri') return `<${value}>`;
  if (term.type === 'bnode') return `_:${value}`;
  if (term['xml:lang']) return `${tsvString(value)}@${term['xml:lang']}`;
  if (term.datatype && term.datatype !== XSD_STRING) return `${tsvString(value)}^^<${term.datatype}>`;
  return tsvString(value);
}

export function toTsv(results: JsonResults): string {
  const vars = results.head.vars ?? [];
  const lines = [vars.map((v) => `?${v}`).join('\t')];
  for (const row of results.results?.bindings ?? []) lines.push(vars.map((v) => (row[v] ? tsvTerm(row[v]!) : '')).join('\t'));
  return `${lines.join('\n')}\n`;
}
