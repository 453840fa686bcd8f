/**
 * The sign-in pages: plain HTML forms in the console's look (its
 * stylesheet), with no script at all, so they work under a policy that
 * allows none. Every text from a request is escaped.
 */
const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>${escapeHtml(title)} · Workspace console</title>
  <link rel="stylesheet" href="/console/style.css">
</head>
<body>
  <header class="top"><span class="brand">Workspace console</span></header>
  <main>${body}</main>
</body>
</html>
`;
}

export interface SignInForm {
  /** Where the form posts (`/sign-in/{uid}`). */
  action: string;
  /** The client the person signs in to, as people know it. */
  client: string;
  username?: string;
  error?: string;
  /** Who is signed in in this browser already: they may continue as themselves, or sign in as someone else. */
  signedInAs?: string | undefined;
}

export function renderSignInPage(form: SignInForm): string {
  return page('Sign in', `<form class="card narrow" method="post" action="${escapeHtml(form.action)}">
    <h1>Sign in</h1>
    <p class="muted">to continue to ${escapeHtml(form.client)}</p>
    ${form.error ? `<p class="notice error" role="alert" id="sign-in-error">${escapeHtml(form.error)}</p>` : ''}
    ${form.signedInAs ? `<p>You are signed in as <strong id="signed-in-as">${escapeHtml(form.signedInAs)}</strong>.</p>
    <div class="buttons"><button type="submit" id="continue" name="continue" value="1" formnovalidate>Continue as ${escapeHtml(form.signedInAs)}</button></div>
    <h2>Or sign in as someone else</h2>` : ''}
    <label class="field"><span>User name</span>
      <input id="username" name="username" autocomplete="username" required maxlength="256"${form.signedInAs ? '' : ' autofocus'} value="${escapeHtml(form.username ?? '')}"></label>
    <label class="field"><span>Password</span>
      <input id="password" name="password" type="password" autocomplete="current-password" required maxlength="1024"></label>
    <div class="buttons">
      <button type="submit" id="sign-in">Sign in</button>
      <button type="submit" class="danger" name="cancel" value="1" formnovalidate>Cancel</button>
    </div>
  </form>`);
}

/** A page that says what went wrong (a sign-in that expired, a request the provider refused). */
export function renderMessagePage(title: string, message: string, detail?: string): string {
  return page(title, `<div class="card narrow">
    <h1>${escapeHtml(title)}</h1>
    <p class="notice error" role="alert" id="sign-in-error">${escapeHtml(message)}</p>
    ${detail ? `<p class="muted">${escapeHtml(detail)}</p>` : ''}
  </div>`);
}

/** The provider's error page (a request it cannot redirect back: an unknown client, an unregistered redirect). */
export function renderProviderError(out: { error: string; error_description?: string }): string {
  return renderMessagePage('Sign-in refused', `${out.error}: ${out.error_description ?? 'the request was refused'}`,
    'The application that sent you here made a request this service does not accept. Nothing was signed in.');
}
