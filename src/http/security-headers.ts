import type { ServerResponse } from 'node:http';

/**
 * Headers every answer carries: a browser must not guess a type other than
 * the one sent (`nosniff`), and an answer that is not a page of ours loads,
 * runs and embeds nothing (`default-src 'none'`), so user strings in a JSON,
 * text or Turtle answer cannot become a page's script even when opened
 * directly. The HTML pages (the console, the API docs) replace the policy
 * with their own, which lets them load their own files and nothing else.
 */
export const API_POLICY = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/** The policy of an HTML page served from this origin: its own scripts, styles and connections only. */
export const pagePolicy = (...extra: string[]): string => [
  "default-src 'self'",
  "script-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  ...extra,
].join('; ');

/** Sets the headers of every answer; a page sets its own policy afterwards. */
export function setSecurityHeaders(res: ServerResponse): void {
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Content-Security-Policy', API_POLICY);
}
