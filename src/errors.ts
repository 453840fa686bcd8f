/**
 * One error family for the whole service. Services throw AppErrors and know
 * nothing of HTTP; `http/errors.ts` maps each code to a status in one place.
 */
export type ErrorCode =
  | 'BAD_REQUEST'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  /** The path has routes, none for this method; the answer's `Allow` names theirs. */
  | 'METHOD_NOT_ALLOWED'
  | 'CONFLICT'
  | 'PAYLOAD_TOO_LARGE'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'NOT_ACCEPTABLE'
  | 'ENGINE_INCOMPATIBLE'
  /** A registry publish whose archive fails its checks; details hold the validation report. */
  | 'VALIDATION_FAILED'
  /** A per-user limit of concurrent requests (event streams) is reached; Retry-After says when to try again. */
  | 'TOO_MANY_REQUESTS'
  | 'QUERY_TIMEOUT'
  | 'QUERY_MEMORY_LIMIT'
  | 'SERVICE_UNAVAILABLE'
  /** The store cannot make changes durable (its journal cannot be written: a full disk); nothing was changed. */
  | 'STORE_UNAVAILABLE'
  | 'INTERNAL';

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;
  /** Seconds after which the request may succeed (answered as Retry-After). */
  readonly retryAfterSeconds: number | undefined;
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, options?: { cause?: unknown; retryAfterSeconds?: number }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.details = details;
    this.retryAfterSeconds = options?.retryAfterSeconds;
  }
}

export const badRequest = (message: string, details?: Record<string, unknown>) => new AppError('BAD_REQUEST', message, details);
export const unauthorized = (message: string) => new AppError('UNAUTHORIZED', message);
export const forbidden = (message: string) => new AppError('FORBIDDEN', message);
export const notFound = (message: string, details?: Record<string, unknown>) => new AppError('NOT_FOUND', message, details);
export const conflict = (message: string, details?: Record<string, unknown>) => new AppError('CONFLICT', message, details);
export const payloadTooLarge = (message: string) => new AppError('PAYLOAD_TOO_LARGE', message);
export const unsupportedMediaType = (message: string) => new AppError('UNSUPPORTED_MEDIA_TYPE', message);
export const tooManyRequests = (message: string, retryAfterSeconds: number) => new AppError('TOO_MANY_REQUESTS', message, undefined, { retryAfterSeconds });
export const notAcceptable = (message: string) => new AppError('NOT_ACCEPTABLE', message);
