/**
 * The console's only way to the service: the public API, with the same
 * credential a script would send. A token goes as `Authorization: Bearer`,
 * an API key as `X-Api-Key`. The credential lives in this tab's
 * sessionStorage and is forgotten on sign-out or when the tab closes.
 */
export type CredentialKind = 'token' | 'apiKey';
export interface Credential { kind: CredentialKind; value: string }

const KEY = 'wsm-console-credential';

export function credential(): Credential | null {
  try {
    const parsed = JSON.parse(sessionStorage.getItem(KEY) ?? 'null') as Credential | null;
    return parsed && (parsed.kind === 'token' || parsed.kind === 'apiKey') && typeof parsed.value === 'string' ? parsed : null;
  } catch {
    return null;
  }
}

export function setCredential(c: Credential | null): void {
  if (c) sessionStorage.setItem(KEY, JSON.stringify(c));
  else sessionStorage.removeItem(KEY);
}

/** A JWT has three base64url parts; anything else is taken as an API key. */
export const guessKind = (value: string): CredentialKind => (/^[\w-]+\.[\w-]+\.[\w-]*$/.test(value.trim()) ? 'token' : 'apiKey');

export function authHeaders(c: Credential | null = credential()): Record<string, string> {
  if (!c) return {};
  return c.kind === 'token' ? { Authorization: `Bearer ${c.value}` } : { 'X-Api-Key': c.value };
}

export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string, readonly details?: unknown) {
    super(message);
  }
}

export interface RequestOptions {
  json?: unknown;
  form?: FormData;
  body?: string;
  contentType?: string;
  accept?: string;
  signal?: AbortSignal;
  credential?: Credential | null;
}

/** Listeners told when the API answers 401 (the credential was refused or expired). */
export const onUnauthorized: Array<() => void> = [];

/** Sends a request; answers the Response when it is 2xx, else throws an ApiError with the service's message. */
export async function send(method: string, path: string, options: RequestOptions = {}): Promise<Response> {
  const headers: Record<string, string> = { ...authHeaders(options.credential === undefined ? credential() : options.credential) };
  let body: BodyInit | undefined;
  if (options.json !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(options.json);
  } else if (options.form) {
    body = options.form;
  } else if (options.body !== undefined) {
    body = options.body;
    if (options.contentType) headers['Content-Type'] = options.contentType;
  }
  headers.Accept = options.accept ?? 'application/json';
  const res = await fetch(path, { method, headers, body, signal: options.signal });
  if (res.ok) return res;
  let code = `HTTP_${res.status}`;
  let message = `${res.status} ${res.statusText}`;
  let details: unknown;
  try {
    const envelope = (await res.json()) as { error?: { code?: string; message?: string; details?: unknown } };
    if (envelope.error?.message) message = envelope.error.message;
    if (envelope.error?.code) code = envelope.error.code;
    details = envelope.error?.details;
  } catch {
    // not a JSON envelope: keep the status line
  }
  // A refused stored credential signs out; a credential being tried at sign-in does not.
  if (res.status === 401 && options.credential === undefined) for (const listener of onUnauthorized) listener();
  throw new ApiError(res.status, code, message, details);
}

/** Sends a request and answers the envelope's `data`. */
export async function api<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
  const res = await send(method, path, options);
  const envelope = (await res.json()) as { data: T };
  return envelope.data;
}

export const get = <T>(path: string, options?: RequestOptions) => api<T>('GET', path, options);

/** Path segment, encoded. */
export const seg = (s: string) => encodeURIComponent(s);

/** Items of a paged wrapper or of a bare array. */
export const itemsOf = <T>(data: T[] | { items: T[] }): T[] => (Array.isArray(data) ? data : data.items);

/** Every item of a 1-indexed paged list (P4, I5, I9, I12), page by page. */
export async function all<T>(path: string): Promise<T[]> {
  const out: T[] = [];
  for (let page = 1; page <= 1000; page++) {
    const sep = path.includes('?') ? '&' : '?';
    const data = await get<T[] | { items: T[]; totalPages: number }>(`${path}${sep}page=${page}&pageSize=100`);
    if (Array.isArray(data)) return data;
    out.push(...data.items);
    if (page >= data.totalPages) break;
  }
  return out;
}

export const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));
