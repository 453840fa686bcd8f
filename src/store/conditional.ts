/**
 * The shape of an invariant site kept by a conditional write
 * (docs/store.md, "Invariant sites"): an attempt runs its checks
 * (which throw the answer a request gets when the invariant forbids it: 404,
 * 409, ...), then `writeIf` with a condition that says those checks still
 * hold. When the condition failed, another request changed the state in
 * between: the attempt runs again, and its checks now see that change and
 * answer exactly what a request made after it would. Should the checks keep
 * passing while the condition keeps failing (the state moving back and
 * forth), `exhausted` answers after a few attempts.
 */
export const NOT_APPLIED: unique symbol = Symbol('not applied');

const ATTEMPTS = 8;

/**
 * `attempts`: a site whose checks cannot refuse (an optimistic update that
 * every request may make, like X2) gives the number of writers it may
 * race: each failed attempt means another request's write applied, seen by
 * the next attempt's read.
 */
export async function untilApplied<T>(attempt: () => Promise<T | typeof NOT_APPLIED>, exhausted: () => Error, attempts = ATTEMPTS): Promise<T> {
  for (let i = 0; i < attempts; i++) {
    const result = await attempt();
    if (result !== NOT_APPLIED) return result;
  }
  throw exhausted();
}
