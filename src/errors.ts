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
  | 'QUERY_TIMEOUT'
  | 'QUERY_MEMORY_LIMIT'
  | 'SERVICE_UNAVAILABLE'
  /** The store cannot make changes durable (its journal cannot be written: a full disk); nothing was changed. */
  | 'STORE_UNAVAILABLE'
  | 'INTERNAL';

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AppError';
    this.code = code;
    this.details = details;
  }
}

export const badRequest = (message: string, details?: Record<string, unknown>) => new AppError('BAD_REQUEST', message, details);
export const unauthorized = (message: string) => new AppError('UNAUTHORIZED', message);
export const forbidden = (message: string) => new AppError('FORBIDDEN', message);
export const notFound = (message: string, details?: Record<string, unknown>) => new AppError('NOT_FOUND', message, details);
export const conflict = (message: string, details?: Record<string, unknown>) => new AppError('CONFLICT', message, details);
export const payloadTooLarge = (message: string) => new AppError('PAYLOAD_TOO_LARGE', message);
export const unsupportedMediaType = (message: string) => new AppError('UNSUPPORTED_MEDIA_TYPE', message);
export const notAcceptable = (message: string) => new AppError('NOT_ACCEPTABLE', message);
