import { get } from '../api.js';
import { fill, h, table } from '../dom.js';
import type { Workspace } from '../types.js';

/** The caller's workspaces (all of them for a system administrator). */
export async function workspacesPage(main: HTMLElement): Promise<void> {
  const list = await get<Workspace[]>('/api/v1/workspaces');
  fill(main,
    h('h1', null, 'Workspaces'),
    list.length === 0
      ? h('p', { class: 'muted' }, 'You are not a member of any workspace yet.')
      : table(['Workspace', 'Name', 'Owner', 'Engine'], list.map((w) => [
        h('a', { href: `#/w/${encodeURIComponent(w.slug)}/packages`, class: 'workspace-link' }, w.slug),
        w.name, w.owner?.username ?? '', w.engineVersion,
      ]), { id: 'workspaces' }));
}
