/**
 * Failed sign-ins, counted per user name and per client address over a
 * window: past a limit, further attempts are refused without checking the
 * password until the oldest failure leaves the window. A success clears the
 * user's count (not the address's). Counts live in this process: each
 * instance limits what it sees.
 */
export interface AttemptLimits {
  perUser: number;
  perAddress: number;
  windowMs: number;
}

export const DEFAULT_LIMITS: AttemptLimits = { perUser: 5, perAddress: 20, windowMs: 15 * 60_000 };

/** Most keys remembered per kind; the oldest are forgotten first. */
const MAX_KEYS = 10_000;

class FailureLog {
  private readonly failures = new Map<string, number[]>();
  constructor(private readonly limit: number, private readonly windowMs: number) {}

  /** Milliseconds until another attempt is allowed; 0 when it is allowed now. */
  waitFor(key: string, now: number): number {
    const recent = this.recent(key, now);
    return recent.length < this.limit ? 0 : recent[recent.length - this.limit]! + this.windowMs - now;
  }

  fail(key: string, now: number): void {
    const recent = this.recent(key, now);
    recent.push(now);
    this.failures.delete(key);
    this.failures.set(key, recent);
    if (this.failures.size > MAX_KEYS) this.failures.delete(this.failures.keys().next().value!);
  }

  clear(key: string): void { this.failures.delete(key); }

  private recent(key: string, now: number): number[] {
    return (this.failures.get(key) ?? []).filter((at) => at > now - this.windowMs);
  }
}

export class SignInAttempts {
  private readonly users: FailureLog;
  private readonly addresses: FailureLog;

  constructor(limits: AttemptLimits = DEFAULT_LIMITS, private readonly clock: () => number = Date.now) {
    this.users = new FailureLog(limits.perUser, limits.windowMs);
    this.addresses = new FailureLog(limits.perAddress, limits.windowMs);
  }

  /** Milliseconds to wait before this user may try again from this address (0: go ahead). */
  waitFor(username: string, address: string): number {
    const now = this.clock();
    return Math.max(this.users.waitFor(username.toLowerCase(), now), this.addresses.waitFor(address, now));
  }

  failed(username: string, address: string): void {
    const now = this.clock();
    this.users.fail(username.toLowerCase(), now);
    this.addresses.fail(address, now);
  }

  succeeded(username: string): void {
    this.users.clear(username.toLowerCase());
  }
}
