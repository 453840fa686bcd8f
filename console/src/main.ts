import { credential, onUnauthorized, setCredential, message } from './api.js';
import { go, setRouter } from './nav.js';
import { finishSignIn } from './oauth.js';
import { h, fill, loading, failed } from './dom.js';
import { signInPage } from './pages/signin.js';
import { workspacesPage } from './pages/workspaces.js';
import { packagesPage } from './pages/packages.js';
import { commandPage } from './pages/command.js';
import { iamPage } from './pages/iam.js';
import { slashPage } from './pages/slash.js';
import { extensionsPage } from './pages/extensions.js';
import { sparqlPage } from './pages/sparql.js';

/**
 * Hash routes: `#/sign-in`, `#/workspaces`, `#/w/{slug}/packages`,
 * `#/w/{slug}/commands/{id}`, `#/w/{slug}/iam`, `#/w/{slug}/slash[/{id}]`,
 * `#/w/{slug}/extensions[/{id}]`, `#/w/{slug}/sparql`.
 */
export interface PageContext {
  main: HTMLElement;
  workspace: string;
  /** Further path segments after the page name. */
  rest: string[];
  /** Aborted when the user leaves the page (stops live logs and polling). */
  signal: AbortSignal;
}

type Page = (ctx: PageContext) => Promise<void> | void;
const PAGES: Record<string, { title: string; page: Page }> = {
  packages: { title: 'Packages', page: packagesPage },
  commands: { title: 'Packages', page: commandPage },
  iam: { title: 'Roles and agents', page: iamPage },
  slash: { title: 'Slash commands', page: slashPage },
  extensions: { title: 'Extensions', page: extensionsPage },
  sparql: { title: 'SPARQL', page: sparqlPage },
};
const NAV = ['packages', 'iam', 'slash', 'extensions', 'sparql'] as const;


let current: AbortController | undefined;

async function route(): Promise<void> {
  current?.abort();
  const controller = new AbortController();
  current = controller;
  const main = document.getElementById('main')!;
  const nav = document.getElementById('nav')!;
  const who = document.getElementById('who')!;
  const parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  const signedIn = credential() !== null;
  fill(who, signedIn ? h('button', { type: 'button', class: 'link', onclick: () => { setCredential(null); go('#/sign-in'); } }, 'Sign out') : null);
  // Every page says it is loading until its first answer replaces this.
  fill(main, loading());
  if (!signedIn || parts[0] === 'sign-in') {
    fill(nav);
    document.title = 'Sign in · Workspace console';
    await signInPage(main);
    return;
  }
  if (parts[0] !== 'w' || !parts[1]) {
    fill(nav);
    document.title = 'Workspaces · Workspace console';
    try {
      await workspacesPage(main);
    } catch (err) {
      if (!controller.signal.aborted) fill(main, h('h1', null, 'Workspaces'), failed(err));
    }
    return;
  }
  const workspace = parts[1];
  const name = parts[2] && PAGES[parts[2]] ? parts[2] : 'packages';
  const { title, page } = PAGES[name]!;
  fill(nav,
    h('a', { href: '#/workspaces', class: 'ws', title: 'Pick another workspace' }, workspace),
    NAV.map((n) => h('a', { href: `#/w/${encodeURIComponent(workspace)}/${n}`, 'aria-current': n === name || (n === 'packages' && name === 'commands') ? 'page' : undefined }, PAGES[n]!.title)));
  document.title = `${title} · ${workspace} · Workspace console`;
  try {
    await page({ main, workspace, rest: parts.slice(3), signal: controller.signal });
  } catch (err) {
    if (controller.signal.aborted) return;
    fill(main, h('h1', null, title), failed(err));
  }
}

onUnauthorized.push(() => {
  setCredential(null);
  sessionStorage.setItem('wsm-console-reason', 'The service refused the credential (expired or revoked): sign in again.');
  go('#/sign-in');
});

setRouter(route);
window.addEventListener('hashchange', () => { void route(); });
// A return from the sign-in page first: its code becomes the credential, or its error is shown on the sign-in page.
void finishSignIn().catch((err: unknown) => `Sign-in failed: ${message(err)}`).then((outcome) => {
  if (outcome) sessionStorage.setItem('wsm-console-reason', outcome);
  return route();
});
