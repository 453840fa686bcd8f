import express, { type Router } from 'express';
import { consoleAssets } from './assets.js';

/**
 * Serves the web console at `/console`. The files hold no data and need no
 * token; the page asks for a token or API key and sends it, like any script,
 * to the public API. The policy keeps the page to this origin: scripts and
 * connections go nowhere else.
 */
const POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  // CodeMirror and cytoscape set style attributes and style elements.
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

export function consoleRouter(): Router {
  const router = express.Router({ strict: true });
  router.get('/console', (_req, res) => { res.redirect(301, '/console/'); });
  router.get(['/console/', '/console/:file'], async (req, res, next) => {
    try {
      const name = (req.params as { file?: string }).file ?? 'index.html';
      const file = (await consoleAssets()).get(name);
      if (!file) { next(); return; }
      res.set({
        'Content-Type': file.contentType,
        'Content-Security-Policy': POLICY,
        'X-Content-Type-Options': 'nosniff',
        'Referrer-Policy': 'no-referrer',
        // The page always asks again (it names the scripts); the scripts are revalidated by ETag.
        'Cache-Control': 'no-cache',
        ETag: file.etag,
      });
      if (req.fresh) { res.status(304).end(); return; }
      res.send(file.body);
    } catch (err) {
      next(err);
    }
  });
  return router;
}
