import type { Request } from 'express';
import { notAcceptable } from '../errors.js';

/**
 * Content negotiation: the best of `offered` for the request's Accept
 * header (the first one when there is none, or for `*\/*`); 406 naming the
 * offered media types otherwise.
 */
export function negotiate<T extends string>(req: Request, offered: readonly T[]): T {
  const chosen = req.accepts([...offered]);
  if (!chosen) {
    throw notAcceptable(`Cannot answer in ${JSON.stringify(req.headers.accept ?? '')}; this endpoint answers ${offered.join(', ')}`);
  }
  return chosen as T;
}
