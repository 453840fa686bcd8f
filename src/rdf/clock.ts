/**
 * Timestamps that strictly increase within the process, so "newest first" is
 * well defined for records written in the same millisecond (lifecycle
 * commands, published registry versions).
 */
export class Clock {
  private last = 0;
  now(): string {
    const t = Math.max(Date.now(), this.last + 1);
    this.last = t;
    return new Date(t).toISOString();
  }
}
