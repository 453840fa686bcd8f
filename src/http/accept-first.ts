/**
 * Accepting connections goes before answering the API's requests. Node
 * (libuv 1.45 and later) accepts one connection per turn of its event
 * loop, so in a flood of connections (2,000 event streams opened at once)
 * a client connecting meanwhile, a health probe, waits in the listen queue
 * until every connection ahead of it was accepted; when each turn also
 * answers a request, that is the whole flood's work. Here an API request
 * waits in a queue of its own while the turn it would run in also accepted
 * a connection, so the listen queue empties at the pace of accepting
 * alone; the queue is answered in the turns that accept nothing, a batch
 * per turn (while connections come, the queue looks again every
 * millisecond). What the app answers outside the API (`/health`,
 * `/metrics`) is answered as soon as it is read.
 *
 * A batch lasts about `sliceMs`: its size doubles while a batch takes less
 * than half of it and halves when one takes longer. A request never waits
 * more than `maxWaitMs` for accepting: past it, a batch runs in every turn.
 * Without a flood a request runs in the turn after it was read.
 */
export class AcceptFirst {
  private readonly waiting: Array<{ task: () => void; since: number } | undefined> = [];
  private head = 0;
  private size = 4;
  private scheduled = false;
  private accepts = 0;
  private seen = 0;

  constructor(private readonly sliceMs = 5, private readonly maxWaitMs = 2000, private readonly maxBatch = 64) {}

  /** To be called on each accepted connection (the server's `connection` event). */
  accepted(): void {
    this.accepts++;
  }

  /** Runs `task` in its turn; it must not throw. */
  run(task: () => void): void {
    this.waiting.push({ task, since: performance.now() });
    if (!this.scheduled) {
      this.scheduled = true;
      this.seen = this.accepts;
      setImmediate(this.turn);
    }
  }

  /** How many requests wait for their turn. */
  get length(): number { return this.waiting.length - this.head; }

  /** In the check phase of a turn: a batch for the next turn, or nothing while connections are being accepted. */
  private readonly turn = (): void => {
    const accepting = this.accepts !== this.seen;
    this.seen = this.accepts;
    if (accepting && performance.now() - this.waiting[this.head]!.since < this.maxWaitMs) {
      // Asked again in a millisecond, the loop waiting for I/O meanwhile: an immediate would spin the loop
      // without waiting, and take the CPU from the threads and processes the flood's end waits for.
      setTimeout(this.turn, 1);
      return;
    }
    const n = Math.min(this.size, this.length);
    let started = 0;
    for (let i = 0; i < n; i++) {
      const { task } = this.waiting[this.head]!;
      this.waiting[this.head++] = undefined;
      // Each in an immediate of its own, so what it awaits without I/O runs before the next one starts.
      setImmediate(i === 0 ? () => { started = performance.now(); task(); } : task);
    }
    if (this.head === this.waiting.length) {
      this.waiting.length = 0;
      this.head = 0;
    } else if (this.head >= 1024) {
      this.waiting.splice(0, this.head);
      this.head = 0;
    }
    setImmediate(() => {
      const took = performance.now() - started;
      if (took > this.sliceMs) this.size = Math.max(1, this.size >> 1);
      else if (took < this.sliceMs / 2 && n === this.size) this.size = Math.min(this.maxBatch, this.size * 2);
      if (this.length > 0) this.turn();
      else this.scheduled = false;
    });
  };
}
