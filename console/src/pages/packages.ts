import { all, api, get, message, send, seg } from '../api.js';
import { field, fill, h, loadInto, loading, notice, statusBadge, table, when } from '../dom.js';
import { go, wsPath } from '../nav.js';
import type { PageContext } from '../main.js';
import type { Installation, LifecycleCommand } from '../types.js';

export interface OfferedVersion { version: string; engineVersion?: string; yanked?: boolean }

/** Orders semantic versions: numeric parts, then a release after its pre-releases. */
export function compareVersions(a: string, b: string): number {
  const [coreA = '', preA] = a.split(/-(.*)/s);
  const [coreB = '', preB] = b.split(/-(.*)/s);
  const pa = coreA.split('.').map(Number);
  const pb = coreB.split('.').map(Number);
  for (let i = 0; i < 3; i++) if ((pa[i] ?? 0) !== (pb[i] ?? 0)) return (pa[i] ?? 0) - (pb[i] ?? 0);
  if (preA === preB) return 0;
  if (preA === undefined) return 1;
  if (preB === undefined) return -1;
  return preA.localeCompare(preB, 'en', { numeric: true });
}

/**
 * Versions of a registry package, newest first, from the service's hosted
 * registry (`GET /api/v1/registry/packages/{publisher}/{name}`); null when
 * the service offers no listing (or does not know the package), so the
 * picker falls back to a free-text version.
 */
export async function registryVersions(publisher: string, name: string): Promise<OfferedVersion[] | null> {
  try {
    const res = await send('GET', `/api/v1/registry/packages/${seg(publisher)}/${seg(name)}`);
    const body = (await res.json()) as { data?: unknown; versions?: unknown };
    const data = body.data as { versions?: unknown } | unknown[] | undefined;
    const raw = Array.isArray(data) ? data : (data as { versions?: unknown })?.versions ?? body.versions;
    if (!Array.isArray(raw)) return null;
    const versions = raw
      .map((v): OfferedVersion | null => (typeof v === 'string' ? { version: v } : typeof (v as OfferedVersion)?.version === 'string' ? (v as OfferedVersion) : null))
      .filter((v): v is OfferedVersion => v !== null)
      .sort((x, y) => compareVersions(y.version, x.version));
    return versions.length ? versions : null;
  } catch {
    return null;
  }
}

function installForm(ctx: PageContext): HTMLElement {
  const publisher = h('input', { id: 'install-publisher', value: 'examples', required: true, autocomplete: 'off' });
  const name = h('input', { id: 'install-name', required: true, autocomplete: 'off', placeholder: 'project-tracking' });
  const versionBox = h('span', { class: 'version-box' });
  const autoUpdate = h('input', { id: 'install-auto-update', type: 'checkbox' });
  const status = notice();
  let versionControl: HTMLInputElement | HTMLSelectElement = h('input', { id: 'install-version-text', placeholder: 'latest compatible', autocomplete: 'off' });
  fill(versionBox, versionControl);
  let lookup = 0;
  let looked = '';
  const refreshVersions = async () => {
    const key = `${publisher.value.trim()}/${name.value.trim()}`;
    if (!publisher.value.trim() || !name.value.trim() || key === looked) return;
    looked = key;
    const ticket = ++lookup;
    fill(versionBox, versionControl, loading('Looking up versions…'));
    const versions = await registryVersions(publisher.value.trim(), name.value.trim());
    if (ticket !== lookup) return;
    if (versions) {
      versionControl = h('select', { id: 'install-version' },
        h('option', { value: '' }, 'latest compatible'),
        versions.map((v) => h('option', { value: v.version, disabled: Boolean(v.yanked) },
          `${v.version}${v.engineVersion ? ` (engine ${v.engineVersion})` : ''}${v.yanked ? ' (yanked)' : ''}`)));
    } else {
      const typed = versionControl instanceof HTMLInputElement ? versionControl.value : '';
      versionControl = h('input', { id: 'install-version-text', placeholder: 'latest compatible', autocomplete: 'off', value: typed, title: 'The service lists no versions of this package: type one, or leave empty for the latest compatible' });
    }
    fill(versionBox, versionControl);
    versionBox.dataset.ready = versions ? 'list' : 'text';
  };
  name.addEventListener('change', () => { void refreshVersions(); });
  publisher.addEventListener('change', () => { void refreshVersions(); });
  return h('form', {
    class: 'card', id: 'install-form',
    onsubmit: async (e: Event) => {
      e.preventDefault();
      const version = versionControl.value.trim();
      status.show('Starting the install…');
      try {
        const command = await api<LifecycleCommand>('POST', `/api/v1/packages/${seg(ctx.workspace)}/registry/${seg(publisher.value.trim())}/${seg(name.value.trim())}/install`,
          { json: { ...(version ? { version } : {}), autoUpdate: autoUpdate.checked } });
        go(wsPath(ctx.workspace, 'commands', command.id));
      } catch (err) {
        status.show(message(err), 'error');
      }
    },
  },
  h('h2', null, 'Install from the registry'),
  h('div', { class: 'row' }, field('Publisher', publisher), field('Package', name), field('Version', versionBox), field('Auto-update', autoUpdate)),
  h('button', { type: 'submit', id: 'install' }, 'Install'),
  status);
}

function uploadForm(ctx: PageContext): HTMLElement {
  const file = h('input', { id: 'upload-file', type: 'file', accept: '.tgz,.tar.gz,application/gzip', required: true });
  const force = h('input', { id: 'upload-force', type: 'checkbox' });
  const status = notice();
  return h('form', {
    class: 'card', id: 'upload-form',
    onsubmit: async (e: Event) => {
      e.preventDefault();
      const chosen = file.files?.[0];
      if (!chosen) { status.show('Choose a .tgz package first.', 'error'); return; }
      const form = new FormData();
      form.append('file', chosen, chosen.name);
      status.show('Uploading…');
      try {
        const command = await api<LifecycleCommand>('POST', `/api/v1/packages/${seg(ctx.workspace)}/install${force.checked ? '?forceUpdate=true' : ''}`, { form });
        go(wsPath(ctx.workspace, 'commands', command.id));
      } catch (err) {
        status.show(message(err), 'error');
      }
    },
  },
  h('h2', null, 'Upload a package'),
  h('div', { class: 'row' }, field('Archive (.tgz with manifest.json)', file), field('Force update of existing matrices', force)),
  h('button', { type: 'submit', id: 'upload' }, 'Upload'),
  status);
}

async function history(ctx: PageContext, pkg: string, into: HTMLElement): Promise<void> {
  await loadInto(into, `Loading the commands of ${pkg}…`, async () => {
    const commands = await get<LifecycleCommand[]>(`/api/v1/packages/${seg(ctx.workspace)}/${seg(pkg)}/commands?size=100`);
    fill(into, table(['Command', 'Type', 'Version', 'Status', 'Updated'], commands.map((c) => [
      h('a', { href: wsPath(ctx.workspace, 'commands', c.id) }, c.id.slice(0, 8)), c.commandType, c.version, statusBadge(c.status), when(c.updatedAt),
    ])));
  });
}

export async function packagesPage(ctx: PageContext): Promise<void> {
  const status = notice();
  const listing = h('div', { id: 'packages' });
  const render = async () => {
    const packages = await all<Installation>(`/api/v1/packages/${seg(ctx.workspace)}`);
    if (!packages.length) { fill(listing, h('p', { class: 'muted' }, 'No package is installed in this workspace.')); return; }
    fill(listing, table(['Package', 'Version', 'Source', 'Latest', 'Matrices', 'Last command', 'Auto-update', ''], packages.map((p) => {
      const fromRegistry = Boolean(p.registryPublisher);
      const toggle = h('input', {
        type: 'checkbox', class: 'auto-update', 'data-package': p.name, checked: Boolean(p.autoUpdate), disabled: !fromRegistry,
        title: fromRegistry ? 'Update automatically to the latest compatible version' : 'Only registry installs update themselves',
        onchange: async () => {
          try {
            await api('PATCH', `/api/v1/packages/${seg(ctx.workspace)}/${seg(p.name)}/auto-update`, { json: { autoUpdate: toggle.checked } });
            status.show(`Auto-update of ${p.name} is ${toggle.checked ? 'on' : 'off'}.`, 'ok');
          } catch (err) {
            toggle.checked = !toggle.checked;
            status.show(message(err), 'error');
          }
        },
      });
      const more = h('div', { class: 'history' });
      return [
        h('strong', null, p.name),
        p.currentVersion,
        fromRegistry ? `${p.registryPublisher}/${p.registryName}` : 'upload',
        p.latestVersion ? [p.latestVersion, p.updateAvailable ? h('span', { class: 'badge update' }, 'update') : null] : '—',
        p.matrices.map((m) => h('div', { title: m.uri ?? '' }, m.name)),
        p.latestCommand ? [h('a', { href: wsPath(ctx.workspace, 'commands', p.latestCommand.id) }, p.latestCommand.commandType), ' ', statusBadge(p.latestCommand.status)] : '—',
        toggle,
        [
          h('button', { type: 'button', class: 'small', onclick: () => { void history(ctx, p.name, more); } }, 'History'),
          ' ',
          h('button', {
            type: 'button', class: 'small danger uninstall', 'data-package': p.name,
            onclick: async () => {
              try {
                const command = await api<LifecycleCommand>('DELETE', `/api/v1/packages/${seg(ctx.workspace)}/${seg(p.name)}`);
                go(wsPath(ctx.workspace, 'commands', command.id));
              } catch (err) {
                status.show(message(err), 'error');
              }
            },
          }, 'Uninstall'),
          more,
        ],
      ];
    })));
  };
  fill(ctx.main, h('h1', null, 'Packages'), status, listing, h('div', { class: 'grid2' }, installForm(ctx), uploadForm(ctx)));
  await loadInto(listing, 'Loading the packages…', render);
}
