import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * A read session: the reads of one unit of work (an HTTP request) that
 * share one freshness check. A store whose replica may lag behind writes
 * made through other instances (the cluster store) checks the log's heads
 * before a read; within a session, the first read's check serves the
 * reads after it, so a request of five sequential reads waits for one
 * round trip to PostgreSQL, not five.
 *
 * What a read sees is unchanged at the level a client observes: every
 * write answered (on any instance) before the request began, since the
 * session's check starts after the request began. Writes made through
 * this instance during the request are in its replica at once. A check
 * older than `SESSION_CHECK_MAX_AGE_MS` is not reused, so a long-lived
 * context (an event stream, a timer set by a request) never reads from an
 * old check for longer than that.
 */
export interface ReadSession {
  /** Per store: the check the session's reads share, and when it began. */
  readonly checks: Map<object, { readonly startedAt: number; readonly done: Promise<void> }>;
}

export const SESSION_CHECK_MAX_AGE_MS = 1_000;

const sessions = new AsyncLocalStorage<ReadSession>();

/** Runs `fn` (and everything it starts) as one read session. */
export function inReadSession<T>(fn: () => T): T {
  return sessions.run({ checks: new Map() }, fn);
}

/**
 * The freshness check a read of `store` waits for: the session's, when one
 * began within `SESSION_CHECK_MAX_AGE_MS`, else a new one from `check`
 * (kept for the session's next reads).
 */
export function sessionCheck(store: object, check: () => Promise<void>, now = Date.now()): Promise<void> {
  const session = sessions.getStore();
  if (!session) return check();
  const kept = session.checks.get(store);
  if (kept && now - kept.startedAt < SESSION_CHECK_MAX_AGE_MS) return kept.done;
  const done = check();
  session.checks.set(store, { startedAt: now, done });
  return done;
}
