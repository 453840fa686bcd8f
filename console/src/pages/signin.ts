import { ApiError, get, guessKind, message, setCredential, type Credential, type CredentialKind } from '../api.js';
import { field, fill, h, notice } from '../dom.js';
import { go } from '../nav.js';
import type { Workspace } from '../types.js';
import { beginSignIn, discovery } from '../oauth.js';

/**
 * Sign in with a password on the service's sign-in page (when the service
 * runs its own provider), or paste a bearer token or an API key; a pasted
 * credential is checked against GET /api/v1/workspaces.
 */
export async function signInPage(main: HTMLElement): Promise<void> {
  const value = h('textarea', { id: 'credential', rows: 4, required: true, autocomplete: 'off', spellcheck: 'false', placeholder: 'eyJhbGciOi… or an API key' });
  const kind = h('select', { id: 'credential-kind' },
    h('option', { value: 'auto' }, 'Recognise it'),
    h('option', { value: 'token' }, 'Bearer token (Authorization: Bearer)'),
    h('option', { value: 'apiKey' }, 'API key (X-Api-Key)'));
  const status = notice();
  const reason = sessionStorage.getItem('wsm-console-reason');
  sessionStorage.removeItem('wsm-console-reason');
  if (reason) status.show(reason, 'error');
  const form = h('form', {
    class: 'card narrow',
    onsubmit: async (e: Event) => {
      e.preventDefault();
      const text = value.value.trim();
      if (!text) { status.show('Paste a token or an API key.', 'error'); return; }
      const chosen: CredentialKind = kind.value === 'auto' ? guessKind(text) : (kind.value as CredentialKind);
      const candidate: Credential = { kind: chosen, value: text };
      status.show('Checking…');
      try {
        const workspaces = await get<Workspace[]>('/api/v1/workspaces', { credential: candidate });
        setCredential(candidate);
        go(workspaces.length === 1 ? `#/w/${encodeURIComponent(workspaces[0]!.slug)}/packages` : '#/workspaces');
      } catch (err) {
        status.show(err instanceof ApiError && err.status === 401 ? `Not accepted: ${err.message}` : message(err), 'error');
      }
    },
  },
  h('h1', null, 'Sign in'),
  h('p', { class: 'muted' }, 'Use the same credential a script would: a bearer token (for example from ', h('code', null, 'npm run wsm -- token <user>'), ') or an API key. It stays in this tab only.'),
  field('Token or API key', value),
  field('Kind', kind),
  h('button', { type: 'submit', id: 'sign-in' }, 'Sign in'),
  status);
  const endpoints = await discovery();
  const withPassword = endpoints
    ? h('div', { class: 'card narrow' },
      h('h1', null, 'Sign in'),
      h('p', { class: 'muted' }, 'With your user name and password, on the service\'s sign-in page.'),
      h('button', { type: 'button', id: 'sign-in-oauth', onclick: () => beginSignIn(endpoints) }, 'Sign in'))
    : null;
  if (withPassword) form.querySelector('h1')!.textContent = 'Or paste a credential';
  fill(main, withPassword, form);
  if (!withPassword) value.focus();
}
