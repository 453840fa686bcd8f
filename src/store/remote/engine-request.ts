/**
 * One SPARQL Protocol request to the remote engine, as plain data, and the
 * code that sends it. Plain data so that a query worker can send a request
 * the main thread prepared: a workspace's graphs then travel from the engine
 * straight into the worker's copy, and the main thread never holds their
 * text (tens of megabytes at 100,000 quads, whose buffers the process kept).
 *
 * This module is bundled into the query worker: it imports nothing of the
 * service's.
 */

export interface EngineRequest {
  url: string;
  /** Content type, accepted media type and, when the engine needs it, credentials. */
  headers: Record<string, string>;
  /** The form-encoded body. */
  body: string;
  /** Milliseconds before the request is abandoned. */
  timeoutMs: number;
}

/** How often a transaction rolled back by a deadlock is sent again. */
export const DEADLOCK_RETRIES = 20;

/** Virtuoso's answer when serializable isolation rolled a transaction back (SR172, SQL state 40001). */
export function isDeadlock(engineText: string): boolean {
  return /\bSR172\b|\b40001\b|deadlock/i.test(engineText);
}

/** The engine could not be reached or dropped its answer (`unreachable`), or answered an error status (`answered`). */
export class EngineRequestError extends Error {
  constructor(message: string, readonly kind: 'unreachable' | 'answered', readonly status = 0, readonly engineText = '') {
    super(message);
    this.name = 'EngineRequestError';
  }
}

/**
 * Sends the request and gives the answer's text to `take` as it arrives,
 * in pieces decoded from UTF-8 (a piece never ends inside a character);
 * an error status is thrown with the engine's text instead.
 */
export async function sendEngineRequest(request: EngineRequest, take: (piece: string) => void): Promise<void> {
  const origin = new URL(request.url).origin;
  let res: Response;
  try {
    res = await fetch(request.url, {
      method: 'POST',
      headers: request.headers,
      body: request.body,
      signal: AbortSignal.timeout(request.timeoutMs),
    });
  } catch (err) {
    throw new EngineRequestError(`SPARQL engine unreachable at ${origin}: ${err instanceof Error ? err.message : String(err)}`, 'unreachable');
  }
  if (!res.ok) {
    let text = '';
    try {
      text = await res.text();
    } catch {
      // The status says enough.
    }
    throw new EngineRequestError(`SPARQL engine answered ${res.status}: ${text.slice(0, 500)}`, 'answered', res.status, text);
  }
  try {
    const decoder = new TextDecoder('utf-8');
    if (res.body) {
      for await (const chunk of res.body) {
        const piece = decoder.decode(chunk, { stream: true });
        if (piece) take(piece);
      }
    }
    const rest = decoder.decode();
    if (rest) take(rest);
  } catch (err) {
    throw new EngineRequestError(`SPARQL engine dropped its answer from ${origin}: ${err instanceof Error ? err.message : String(err)}`, 'unreachable');
  }
}

/**
 * The answer's text in the pieces it arrived in. A rollback by deadlock
 * (serializable isolation: a read may lose too) is sent again, at most
 * `retries` times, after a growing random pause.
 */
export async function engineAnswerPieces(request: EngineRequest, retries = DEADLOCK_RETRIES): Promise<string[]> {
  for (let attempt = 0; ; attempt++) {
    const pieces: string[] = [];
    try {
      await sendEngineRequest(request, (piece) => pieces.push(piece));
      return pieces;
    } catch (err) {
      if (!(err instanceof EngineRequestError) || err.kind !== 'answered' || !isDeadlock(err.engineText) || attempt >= retries) throw err;
      await new Promise((resolve) => setTimeout(resolve, 20 * 2 ** Math.min(attempt, 7) * (0.5 + Math.random())));
    }
  }
}
