import { api, get, message, send, seg } from '../api.js';
import { field, fill, h, loading, notice, table } from '../dom.js';
import { go, wsPath } from '../nav.js';
import type { PageContext } from '../main.js';
import type { SlashCommand } from '../types.js';

const TEMPLATE = `PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>

CONSTRUCT { ?thing rdfs:label ?label }
WHERE { ?thing rdfs:label ?label }
`;

/** Every command of the workspace when the service offers `?scope=all`, else the caller's own. */
async function listCommands(workspace: string): Promise<SlashCommand[]> {
  try {
    return await get<SlashCommand[]>(`/api/v1/commands/${seg(workspace)}?scope=all`);
  } catch {
    return get<SlashCommand[]>(`/api/v1/commands/${seg(workspace)}`);
  }
}

/** Slash commands: the list, an editor (create, update, delete) and a run whose result shows as a table and a graph. */
export async function slashPage(ctx: PageContext): Promise<void> {
  const { createEditor } = await import('../editor.js');
  const id = ctx.rest[0];
  const commands = await listCommands(ctx.workspace);
  const command = id ? await get<SlashCommand>(`/api/v1/commands/${seg(ctx.workspace)}/${seg(id)}`) : null;
  const status = notice();
  const result = h('div', { id: 'result' });

  const alias = h('input', { id: 'slash-alias', required: true, value: command?.alias ?? '', placeholder: 'team:members', autocomplete: 'off' });
  const description = h('input', { id: 'slash-description', value: command?.description ?? '' });
  const interpretation = h('textarea', { id: 'slash-interpretation', rows: 2, value: command?.interpretation ?? '' });
  const scriptType = h('select', { id: 'slash-type' }, ['CONSTRUCT', 'DESCRIBE'].map((t) => h('option', { value: t, selected: (command?.scriptType ?? 'CONSTRUCT') === t }, t)));
  const params = h('textarea', { id: 'slash-parameters', rows: 2, value: command?.parameters?.length ? JSON.stringify(command.parameters) : '', placeholder: '[{"name": "team", "kind": "iri", "required": true}] (optional)' });
  const args = h('textarea', { id: 'slash-arguments', rows: 2, placeholder: '{"name": "value"} (only for commands that declare parameters)' });
  const run = async () => {
    if (!command) { status.show('Save the command first, then run it.', 'error'); return; }
    let body: string | undefined;
    if (args.value.trim()) {
      try {
        body = JSON.stringify({ arguments: JSON.parse(args.value) as unknown });
      } catch {
        status.show('The arguments must be a JSON object.', 'error');
        return;
      }
    }
    status.clear();
    fill(result, loading(`Running /${command.alias}…`));
    try {
      const res = await send('POST', `/api/v1/commands/${seg(ctx.workspace)}/${seg(command.id)}/execute`, { accept: 'application/n-triples', ...(body ? { body, contentType: 'application/json' } : {}) });
      const text = await res.text();
      const count = res.headers.get('X-Triple-Count');
      const truncated = res.headers.get('X-Result-Truncated') === 'true';
      status.clear();
      const { showTriples } = await import('../results.js');
      await showTriples(result, text, `/${command.alias}: ${count ?? '?'} triples${truncated ? ' (truncated at the limit)' : ''}.`);
    } catch (err) {
      fill(result);
      status.show(message(err), 'error');
    }
  };
  const script = createEditor('sparql', command?.scriptContent ?? TEMPLATE, { id: 'slash-script', label: 'SPARQL script', onRun: () => { void run(); } });

  const save = async (e: Event) => {
    e.preventDefault();
    const body: Record<string, unknown> = { alias: alias.value.trim().replace(/^\//, ''), description: description.value, interpretation: interpretation.value, scriptType: scriptType.value, scriptContent: script.value };
    // Declared parameters are sent only when given, so a service without them still takes the body.
    if (params.value.trim() || command?.parameters?.length) {
      try {
        body.parameters = params.value.trim() ? JSON.parse(params.value) : [];
      } catch {
        status.show('The parameters must be a JSON array.', 'error');
        return;
      }
    }
    try {
      const saved = command
        ? await api<SlashCommand>('PUT', `/api/v1/commands/${seg(ctx.workspace)}/${seg(command.id)}`, { json: body })
        : await api<SlashCommand>('POST', `/api/v1/commands/${seg(ctx.workspace)}`, { json: body });
      sessionStorage.setItem('wsm-console-saved', `Saved /${saved.alias}.`);
      go(wsPath(ctx.workspace, 'slash', saved.id));
    } catch (err) {
      status.show(message(err), 'error');
    }
  };
  const saved = sessionStorage.getItem('wsm-console-saved');
  sessionStorage.removeItem('wsm-console-saved');
  if (saved) status.show(saved, 'ok');

  const remove = async () => {
    if (!command) return;
    try {
      await api('DELETE', `/api/v1/commands/${seg(ctx.workspace)}/${seg(command.id)}`);
      go(wsPath(ctx.workspace, 'slash'));
    } catch (err) { status.show(message(err), 'error'); }
  };

  const listing = commands.length
    ? table(['Alias', 'Description', 'Type', 'Owner'], commands.map((c) => [
      h('a', { href: wsPath(ctx.workspace, 'slash', c.id), class: 'slash-link' }, `/${c.alias}`), c.description ?? '', c.scriptType, c.owner?.username ?? '',
    ]), { id: 'slash-list' })
    : h('p', { class: 'muted' }, 'No slash commands yet.');

  fill(ctx.main,
    h('h1', null, 'Slash commands'),
    h('div', { class: 'split' },
      h('section', { class: 'side' }, h('h2', null, 'Commands'), listing, h('p', null, h('a', { href: wsPath(ctx.workspace, 'slash'), id: 'slash-new' }, '+ New command'))),
      h('section', { class: 'work' },
        h('form', { class: 'card', id: 'slash-form', onsubmit: save },
          h('h2', null, command ? `Edit /${command.alias}` : 'New command'),
          h('div', { class: 'row' }, field('Alias', alias), field('Type', scriptType), field('Description', description)),
          field('Interpretation (for agents reading the result)', interpretation),
          field('Script', script.dom, 'Ctrl+Enter runs the saved command'),
          field('Parameters (JSON: name, kind iri or literal, datatype, required, description)', params),
          command?.parameters?.length ? h('p', { class: 'muted', id: 'slash-parameter-list' }, 'Takes: ', command.parameters.map((p) => `${p.name} (${p.kind}${p.required ? ', required' : ''})`).join(', ')) : null,
          field('Arguments (JSON, optional)', args),
          h('div', { class: 'buttons' },
            h('button', { type: 'submit', id: 'slash-save' }, command ? 'Save' : 'Create'),
            command ? h('button', { type: 'button', id: 'slash-run', onclick: () => { void run(); } }, 'Run') : null,
            command ? h('button', { type: 'button', class: 'danger', id: 'slash-delete', onclick: () => { void remove(); } }, 'Delete') : null)),
        status,
        result)));
}
