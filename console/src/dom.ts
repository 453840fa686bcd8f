import { message } from './api.js';

/** A tiny element builder: strings become text nodes (never HTML), `on*` keys listen. */
export type Child = Node | string | number | null | undefined | false;
export type Attrs = Record<string, unknown>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs | null, ...children: Array<Child | Child[]>): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2).toLowerCase(), value as EventListener);
    } else if (key === 'value' || key === 'checked' || key === 'disabled' || key === 'selected') {
      (el as unknown as Record<string, unknown>)[key] = value;
    } else {
      el.setAttribute(key === 'className' ? 'class' : key, value === true ? '' : String(value as string | number | boolean));
    }
  }
  append(el, children);
  return el;
}

export function append(el: Node, children: Array<Child | Child[]>): void {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.appendChild(typeof child === 'string' || typeof child === 'number' ? document.createTextNode(String(child)) : child);
  }
}

/** Replaces the children of `el`. */
export function fill(el: Element, ...children: Array<Child | Child[]>): void {
  el.replaceChildren();
  append(el, children);
}

/**
 * A table from column headers and rows of cells, in a box that scrolls
 * sideways when the table is wider than the page (a phone), so the page
 * itself never does. `attrs` go on the table.
 */
export function table(headers: string[], rows: Array<Array<Child | Child[]>>, attrs: Attrs = {}): HTMLElement {
  return h('div', { class: 'table-scroll' }, h('table', attrs,
    h('thead', null, h('tr', null, headers.map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', null, rows.map((cells) => h('tr', null, cells.map((c) => h('td', null, ...(Array.isArray(c) ? c : [c]))))))));
}

/** Says that something is being fetched (`.loading`, `aria-busy`), until the answer replaces it. */
export const loading = (what = 'Loading…'): HTMLElement =>
  h('p', { class: 'loading', role: 'status', 'aria-live': 'polite', 'aria-busy': 'true' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), what);

/** The service's message, in place of what could not be loaded. */
export const failed = (err: unknown): HTMLElement => h('p', { class: 'notice error', role: 'alert' }, message(err));

/**
 * Shows a loading indicator in `box` while `work` fetches and fills it; on
 * a failure the box shows the service's message instead. Answers whether
 * it worked.
 */
export async function loadInto(box: HTMLElement, what: string, work: () => Promise<void>): Promise<boolean> {
  fill(box, loading(what));
  box.setAttribute('aria-busy', 'true');
  try {
    await work();
    return true;
  } catch (err) {
    fill(box, failed(err));
    return false;
  } finally {
    box.removeAttribute('aria-busy');
  }
}

/** A status message area: `show(text, kind)` replaces its text. */
export function notice(): HTMLElement & { show(text: string, kind?: 'error' | 'ok' | 'info'): void; clear(): void } {
  const el = h('p', { class: 'notice', role: 'status', 'aria-live': 'polite', hidden: true }) as unknown as HTMLElement & { show(text: string, kind?: 'error' | 'ok' | 'info'): void; clear(): void };
  el.show = (text, kind = 'info') => { el.textContent = text; el.className = `notice ${kind}`; el.hidden = false; };
  el.clear = () => { el.textContent = ''; el.hidden = true; };
  return el;
}

export const field = (label: string, control: HTMLElement, hint?: string): HTMLElement =>
  h('label', { class: 'field' }, h('span', null, label), control, hint ? h('small', { class: 'muted' }, hint) : null);

export const when = (iso: string | null | undefined): string => (iso ? new Date(iso).toLocaleString() : '');

export const statusBadge = (status: string | null | undefined): HTMLElement =>
  h('span', { class: `badge status-${String(status ?? 'none').toLowerCase()}`, 'data-status': status ?? '' }, status ?? '—');

export const link = (href: string, text: string, attrs: Attrs = {}): HTMLAnchorElement => h('a', { href, ...attrs }, text);
