import { all, api, get, message, seg } from '../api.js';
import { field, fill, h, notice, statusBadge, table, when } from '../dom.js';
import { go, wsPath } from '../nav.js';
import type { PageContext } from '../main.js';
import type { Extension, Installation } from '../types.js';

const TEMPLATE = (matrix: string) => `@prefix iam: <https://poliglot.io/os/spec/iam#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .

<${matrix || 'https://example.org/matrix'}#auditor> a iam:Role ;
  rdfs:label "Auditor" ;
  rdfs:comment "Reads everything, changes nothing." .
`;

/** Matrix extensions (administrators): list, a Turtle editor to create or replace one, delete. */
export async function extensionsPage(ctx: PageContext): Promise<void> {
  const { createEditor } = await import('../editor.js');
  const base = `/api/v1/extensions/${seg(ctx.workspace)}`;
  const id = ctx.rest[0];
  const [extensions, packages] = await Promise.all([get<Extension[]>(base), all<Installation>(`/api/v1/packages/${seg(ctx.workspace)}`).catch(() => [] as Installation[])]);
  const current = id ? await get<Extension>(`${base}/${seg(id)}`) : null;
  const matrixUris = [...new Set(packages.flatMap((p) => p.matrices.map((m) => m.uri)).filter((u): u is string => Boolean(u)))];
  const status = notice();
  const label = h('input', { id: 'extension-label', value: current?.label ?? '', placeholder: 'Audit roles', autocomplete: 'off' });
  const target = h('input', { id: 'extension-target', list: 'matrix-uris', required: true, value: current?.targetMatrixUri ?? matrixUris[0] ?? '', disabled: Boolean(current), placeholder: 'https://example.org/matrix', autocomplete: 'off' });
  const editor = createEditor('turtle', current?.content ?? TEMPLATE(target.value), { id: 'extension-turtle', label: 'Turtle' });
  const lastCommand = sessionStorage.getItem('wsm-console-extension-command');
  sessionStorage.removeItem('wsm-console-extension-command');

  const save = async (e: Event) => {
    e.preventDefault();
    const form = new FormData();
    form.append('file', new Blob([editor.value], { type: 'text/turtle' }), 'extension.ttl');
    const query = new URLSearchParams();
    if (label.value.trim()) query.set('label', label.value.trim());
    try {
      let saved: Extension;
      if (current) {
        saved = await api<Extension>('PUT', `${base}/${seg(current.id)}?${query}`, { form });
      } else {
        query.set('targetMatrix', target.value.trim());
        saved = await api<Extension>('POST', `${base}?${query}`, { form });
      }
      if (saved.lastCommandId) sessionStorage.setItem('wsm-console-extension-command', saved.lastCommandId);
      go(wsPath(ctx.workspace, 'extensions', saved.id));
    } catch (err) {
      status.show(message(err), 'error');
    }
  };
  const remove = async () => {
    if (!current) return;
    try {
      await api('DELETE', `${base}/${seg(current.id)}`);
      go(wsPath(ctx.workspace, 'extensions'));
    } catch (err) { status.show(message(err), 'error'); }
  };

  fill(ctx.main,
    h('h1', null, 'Extensions'),
    h('datalist', { id: 'matrix-uris' }, matrixUris.map((u) => h('option', { value: u }))),
    extensions.length
      ? table(['Extension', 'Target matrix', 'Deployed', 'Owner', 'Updated'], extensions.map((x) => [
        h('a', { href: wsPath(ctx.workspace, 'extensions', x.id), class: 'extension-link' }, x.label || x.id.slice(0, 8)), h('code', null, x.targetMatrixUri),
        statusBadge(x.active ? 'active' : 'inactive'), x.ownerUsername ?? '', when(x.updatedAt),
      ]), { id: 'extensions-list' })
      : h('p', { class: 'muted' }, 'No extensions yet.'),
    h('p', null, h('a', { href: wsPath(ctx.workspace, 'extensions'), id: 'extension-new' }, '+ New extension')),
    h('form', { class: 'card', id: 'extension-form', onsubmit: save },
      h('h2', null, current ? `Edit ${current.label || 'extension'}` : 'New extension'),
      current ? h('p', { id: 'extension-state' }, statusBadge(current.active ? 'active' : 'inactive'), current.active ? ' deployed into its matrix' : ' not deployed (its last redeploy failed or is running)') : null,
      lastCommand ? h('p', { id: 'extension-command' }, 'Redeploy started: ', h('a', { href: wsPath(ctx.workspace, 'commands', lastCommand) }, 'follow its log')) : null,
      h('div', { class: 'row' }, field('Label', label), field('Target matrix', target)),
      field('Turtle', editor.dom),
      h('div', { class: 'buttons' },
        h('button', { type: 'submit', id: 'extension-save' }, current ? 'Save' : 'Create'),
        current ? h('button', { type: 'button', class: 'danger', id: 'extension-delete', onclick: () => { void remove(); } }, 'Delete') : null),
      status));
}
