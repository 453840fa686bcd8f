import type { RequestHandler, Response } from 'express';
import type { Logger } from '../logger.js';

declare module 'http' {
  interface IncomingMessage {
    /** The request id (X-Request-Id), set by `requestLogger`. */
    id: string;
  }
}

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

/**
 * One log line per request, as pino-http wrote it with the options the app
 * used (same fields, messages and levels), plus the request id (`req.id`,
 * answered as X-Request-Id). pino-http built a child logger per request,
 * serializing the request up front even when the line's level was off;
 * here the line is built only when its level is enabled.
 *
 * Line: `req` {id, method, url}, `res` {statusCode}, `err` (when the request
 * errored), `responseTime` in ms; message "request completed", "request
 * aborted" or "request errored".
 */
export function requestLogger(logger: Logger, levelOf: (res: Response, err?: Error) => Level): RequestHandler {
  return (req, res, next) => {
    const id = crypto.randomUUID();
    res.setHeader('X-Request-Id', id);
    req.id = id;
    const started = Date.now();
    const line = { id, method: req.method, url: req.originalUrl || req.url };
    let logged = false;
    const done = (err?: Error) => {
      if (logged) return;
      logged = true;
      const level = levelOf(res, err);
      if (level === 'silent' || !logger.isLevelEnabled(level)) return;
      const responseTime = Date.now() - started;
      // As pino's response serializer: no status when nothing was sent.
      const status = { statusCode: res.headersSent ? res.statusCode : null };
      const failure = err ?? (res as Response & { err?: Error }).err;
      if (failure || res.statusCode >= 500) {
        const error = failure ?? new Error(`failed with status code ${res.statusCode}`);
        logger[level]({ req: line, res: status, err: error, responseTime }, 'request errored');
        return;
      }
      logger[level]({ req: line, res: status, responseTime },
        !req.readableAborted && res.writableEnded ? 'request completed' : 'request aborted');
    };
    // A response emits 'close' once it is sent or its connection is gone: one line then. 'error' stays
    // listened to for the response's life (an error event nobody listens to would stop the process).
    res.once('close', () => done());
    res.on('error', done);
    next();
  };
}
