import { message, send, seg } from '../api.js';
import { fill, h, loading, notice } from '../dom.js';
import type { PageContext } from '../main.js';

const TEMPLATE = `SELECT ?graph (COUNT(*) AS ?triples)
WHERE { GRAPH ?graph { ?s ?p ?o } }
GROUP BY ?graph
ORDER BY DESC(?triples)
LIMIT 20
`;

/** The administrators' read-only SPARQL endpoint: SELECT and ASK as a table, CONSTRUCT and DESCRIBE as a table and a graph. */
export async function sparqlPage(ctx: PageContext): Promise<void> {
  const { createEditor } = await import('../editor.js');
  const status = notice();
  const result = h('div', { id: 'result' });
  const KEY = `wsm-console-sparql-${ctx.workspace}`;
  const run = async () => {
    sessionStorage.setItem(KEY, editor.value);
    status.clear();
    fill(result, loading('Running the query…'));
    try {
      const res = await send('POST', `/api/v1/sparql/${seg(ctx.workspace)}`, {
        body: editor.value, contentType: 'application/sparql-query',
        accept: 'application/sparql-results+json, application/n-triples;q=0.9',
      });
      const type = (res.headers.get('content-type') ?? '').split(';')[0]!.trim();
      const { showBindings, showTriples } = await import('../results.js');
      status.clear();
      if (type === 'application/sparql-results+json') showBindings(result, await res.json() as Parameters<typeof showBindings>[1]);
      else {
        const truncated = res.headers.get('X-Result-Truncated') === 'true';
        const text = await res.text();
        await showTriples(result, text, `Graph answer${truncated ? ' (truncated at the limit)' : ''}.`);
      }
    } catch (err) {
      fill(result);
      status.show(message(err), 'error');
    }
  };
  const editor = createEditor('sparql', sessionStorage.getItem(KEY) ?? TEMPLATE, { id: 'sparql-query', label: 'SPARQL query', onRun: () => { void run(); } });
  fill(ctx.main,
    h('h1', null, 'SPARQL'),
    h('p', { class: 'muted' }, 'Read-only queries over every graph of this workspace, for its administrators. Ctrl+Enter runs.'),
    h('div', { class: 'card' }, editor.dom, h('div', { class: 'buttons' }, h('button', { type: 'button', id: 'sparql-run', onclick: () => { void run(); } }, 'Run'))),
    status, result);
}
