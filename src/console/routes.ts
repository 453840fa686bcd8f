import express, { type Router } from 'express';
import { consoleAssets } from './assets.js';
import { pagePolicy } from '../http/security-headers.js';

// CodeMirror and cytoscape set style attributes and style elements.
const POLICY = pagePolicy("style-src 'self' 'unsafe-inline'");

/**
 * Serves the web console at `/console`. The files hold no data and need no
 * token; the page asks for a token or API key and sends it, like any script,
 * to the public API. The policy keeps the page to this origin: scripts and
 * connections go nowhere else.
 */
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
