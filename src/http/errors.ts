import type { ErrorRequestHandler, RequestHandler } from 'express';
import { AppError, type ErrorCode } from '../errors.js';
import type { Logger } from '../logger.js';
import { StoreUnavailableError, StoreUnreachableError } from '../store/store.js';

/** The one place error codes become HTTP statuses. */
export const STATUS_OF: Record<ErrorCode, number> = {
  BAD_REQUEST: 400,
  ENGINE_INCOMPATIBLE: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  NOT_ACCEPTABLE: 406,
  CONFLICT: 409,
  VALIDATION_FAILED: 422,
  PAYLOAD_TOO_LARGE: 413,
  TOO_MANY_REQUESTS: 429,
  UNSUPPORTED_MEDIA_TYPE: 415,
  INTERNAL: 500,
  SERVICE_UNAVAILABLE: 503,
  STORE_UNAVAILABLE: 503,
  QUERY_TIMEOUT: 503,
  QUERY_MEMORY_LIMIT: 503,
};

/** The store's "cannot make this durable" error, where a service passed it on or wrapped it (as `cause`). */
function storeUnavailable(err: unknown): StoreUnavailableError | undefined {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof StoreUnavailableError) return e;
  }
  return undefined;
}

/** The answer when the store could not make a write durable (nothing changed) or cannot be reached: 503, retry later. */
export function storeUnavailableError(err: StoreUnavailableError): AppError {
  // Nothing about the engine (address, error) goes to the client; the cause is logged.
  if (err instanceof StoreUnreachableError) {
    return new AppError('STORE_UNAVAILABLE', 'The service cannot reach its storage right now. Try again later.');
  }
  return new AppError('STORE_UNAVAILABLE',
    `The service cannot save changes right now: its storage cannot be written${err.errno ? ` (${err.errno})` : ''}. ` +
      'Nothing was changed; reads still work. Try again later.');
}

/** Errors raised by body parsers and multer, recognised by their shape. */
function fromLibraryError(err: unknown): AppError | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as { type?: string; status?: number; code?: string; field?: string; message?: string };
  if (e.type === 'entity.parse.failed') return new AppError('BAD_REQUEST', 'The request body is not valid JSON');
  if (e.type === 'entity.too.large') return new AppError('PAYLOAD_TOO_LARGE', 'The request body is larger than the service accepts');
  if (e.type === 'encoding.unsupported' || e.type === 'charset.unsupported') {
    return new AppError('UNSUPPORTED_MEDIA_TYPE', 'The request body uses an unsupported encoding or charset');
  }
  if (typeof e.code === 'string' && e.code.startsWith('LIMIT_')) {
    if (e.code === 'LIMIT_FILE_SIZE') return new AppError('PAYLOAD_TOO_LARGE', 'The uploaded file is larger than the service accepts');
    return new AppError('BAD_REQUEST', `Upload refused: ${e.message ?? e.code}${e.field ? ` (field ${e.field})` : ''}`);
  }
  if (err instanceof URIError || (e.status === 400 && typeof e.message === 'string' && e.message.startsWith('Failed to decode param'))) {
    return new AppError('BAD_REQUEST', 'A path segment is not valid percent-encoded UTF-8');
  }
  if ((err as { name?: string }).name === 'MulterError') {
    if (e.code === 'MISSING_FIELD_NAME') return new AppError('BAD_REQUEST', 'Malformed multipart body: a part has no field name');
    return new AppError('BAD_REQUEST', `Malformed multipart body: ${e.message ?? e.code}`);
  }
  // busboy's own errors (not MulterErrors): a cut body, no boundary, a part header past its 16 KiB limit.
  if (e.message === 'Unexpected end of form' || e.message === 'Multipart: Boundary not found' || e.message === 'Malformed part header' || e.message === 'Malformed content type') {
    return new AppError('BAD_REQUEST', `Malformed multipart body: ${e.message}`);
  }
  // body-parser passes a body that does not decode as its Content-Encoding says (zlib's and brotli's errors) as a 400 without a type.
  if (e.status === 400 && typeof e.code === 'string' && /^(Z_|ERR__ERROR_|ERR_BROTLI)/.test(e.code)) {
    return new AppError('BAD_REQUEST', 'The request body could not be decoded as its Content-Encoding says');
  }
  if (typeof e.status === 'number' && e.status >= 400 && e.status < 500 && e.type) {
    return new AppError('BAD_REQUEST', 'The request body could not be read');
  }
  return undefined;
}

/** Longest message, and longest text inside details, an error answer carries. */
export const MAX_MESSAGE_CHARS = 1000;
const MAX_DETAIL_CHARS = 300;
const MAX_DETAIL_ITEMS = 50;

/** A message cut to a bounded length: an error quotes at most an excerpt of what the client sent. */
export function boundedMessage(message: string, max = MAX_MESSAGE_CHARS): string {
  if (message.length <= max) return message;
  // Never cut a surrogate pair in two.
  let end = max;
  if (/[\uD800-\uDBFF]/.test(message[end - 1]!)) end--;
  return `${message.slice(0, end)}... (${message.length - end} more characters not shown)`;
}

function boundedDetails(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return boundedMessage(value, MAX_DETAIL_CHARS);
  if (value === null || typeof value !== 'object' || depth > 4) return depth > 4 ? null : value;
  if (Array.isArray(value)) return value.slice(0, MAX_DETAIL_ITEMS).map((v) => boundedDetails(v, depth + 1));
  return Object.fromEntries(Object.entries(value).slice(0, MAX_DETAIL_ITEMS).map(([k, v]) => [k, boundedDetails(v, depth + 1)]));
}

/** Serializes an error as the envelope (docs/api.md, "Conventions"), its texts bounded. */
export function errorBody(err: AppError): Record<string, unknown> {
  const body: Record<string, unknown> = {
    success: false,
    error: { code: err.code, message: boundedMessage(err.message), ...(err.details ? { details: boundedDetails(err.details) } : {}) },
  };
  return body;
}

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    const unwritable = err instanceof AppError ? undefined : storeUnavailable(err);
    if (unwritable instanceof StoreUnreachableError) logger.warn({ err: unwritable, requestId: req.id }, 'the store cannot be reached');
    let appError = err instanceof AppError ? err : unwritable ? storeUnavailableError(unwritable) : fromLibraryError(err);
    if (!appError) {
      logger.error({ err, requestId: req.id }, 'unexpected error');
      appError = new AppError('INTERNAL', `An unexpected error occurred; quote request id ${String(req.id)} when reporting it`);
    }
    const status = STATUS_OF[appError.code];
    if (res.headersSent) {
      res.end();
      return;
    }
    if (status === 401) res.setHeader('WWW-Authenticate', 'Bearer');
    const retryAfter = unwritable?.retryAfterSeconds ?? appError.retryAfterSeconds;
    if (retryAfter !== undefined) res.setHeader('Retry-After', String(retryAfter));
    const body = errorBody(appError);
    // The 409 of P1/P6 also carries its details at the top level.
    if (appError.code === 'CONFLICT' && appError.details && 'existing' in appError.details) Object.assign(body, boundedDetails(appError.details));
    res.status(status).json(body);
  };
}

export const notFoundHandler: RequestHandler = (req, _res, next) => {
  next(new AppError('NOT_FOUND', `No endpoint ${req.method} ${req.path}`));
};
