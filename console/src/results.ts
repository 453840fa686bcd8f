import { fill, h, table } from './dom.js';

/** Largest number of triples drawn as a graph; the table shows them all. */
export const GRAPH_LIMIT = 600;

const termCell = (t: { kind: string; value: string; datatype?: string; language?: string }) =>
  t.kind === 'literal'
    ? h('span', { class: 'literal', title: t.datatype ?? '' }, JSON.stringify(t.value), t.language ? `@${t.language}` : '')
    : h('code', { class: t.kind }, t.kind === 'iri' ? `<${t.value}>` : t.value);

/**
 * A graph answer (N-Triples text) shown as a table and as a graph, with
 * tabs; the graph libraries load on first use.
 */
export async function showTriples(into: HTMLElement, ntriples: string, summary: string): Promise<void> {
  const { parseNTriples } = await import('./rdf.js');
  const triples = parseNTriples(ntriples);
  const tableView = h('div', { class: 'result-table', id: 'result-table' },
    triples.length ? table(['Subject', 'Predicate', 'Object'], triples.map((t) => [termCell(t.s), termCell(t.p), termCell(t.o)])) : h('p', { class: 'muted' }, 'No triples.'));
  const graphView = h('div', { class: 'result-graph', id: 'result-graph', hidden: true });
  let drawn = false;
  const tabs = h('div', { class: 'tabs', role: 'tablist' });
  const select = async (which: 'table' | 'graph') => {
    tableView.hidden = which !== 'table';
    graphView.hidden = which !== 'graph';
    for (const b of tabs.querySelectorAll('button')) b.setAttribute('aria-selected', String(b.dataset.tab === which));
    if (which === 'graph' && !drawn) {
      drawn = true;
      const { drawGraph } = await import('./graph.js');
      drawGraph(graphView, triples.slice(0, GRAPH_LIMIT));
      graphView.dataset.ready = 'true';
    }
  };
  fill(tabs,
    h('button', { type: 'button', role: 'tab', 'data-tab': 'table', id: 'tab-table', 'aria-selected': 'true', onclick: () => { void select('table'); } }, 'Table'),
    h('button', { type: 'button', role: 'tab', 'data-tab': 'graph', id: 'tab-graph', 'aria-selected': 'false', onclick: () => { void select('graph'); } }, 'Graph'));
  fill(into,
    h('p', { id: 'result-summary', 'data-count': triples.length }, summary, triples.length > GRAPH_LIMIT ? ` The graph shows the first ${GRAPH_LIMIT}.` : ''),
    tabs, tableView, graphView);
}

/** SPARQL JSON results (SELECT or ASK) as a table. */
export function showBindings(into: HTMLElement, json: { head: { vars?: string[] }; results?: { bindings: Array<Record<string, { type: string; value: string; datatype?: string; 'xml:lang'?: string }>> }; boolean?: boolean }): void {
  if (typeof json.boolean === 'boolean') {
    fill(into, h('p', { id: 'result-summary', class: 'boolean' }, `ASK: ${json.boolean}`));
    return;
  }
  const vars = json.head.vars ?? [];
  const rows = json.results?.bindings ?? [];
  fill(into,
    h('p', { id: 'result-summary', 'data-count': rows.length }, `${rows.length} row${rows.length === 1 ? '' : 's'}.`),
    h('div', { class: 'result-table', id: 'result-table' },
      table(vars, rows.map((b) => vars.map((v) => {
        const cell = b[v];
        if (!cell) return '';
        return termCell({ kind: cell.type === 'uri' ? 'iri' : cell.type === 'bnode' ? 'blank' : 'literal', value: cell.type === 'bnode' ? `_:${cell.value}` : cell.value, datatype: cell.datatype, language: cell['xml:lang'] });
      })))));
}
