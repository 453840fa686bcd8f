import { randomUUID } from 'node:crypto';
import { StoreUnavailableError } from '../store.js';
import { SERVICE_STREAM } from '../../rdf/graphs.js';
import type { Fence, Owner, PgLog } from './log.js';

/**
 * Placement (WSM_CLUSTER_PLACEMENT=lease, docs/cluster.md "Placement"):
 * the workspaces' streams are owned by instances through leases kept in
 * PostgreSQL (`wsm_owners`). An instance writes a workspace's stream only
 * under its lease on it, and the log refuses an append whose lease was
 * taken over or ended (fencing, `PgLog.append`). The `service` stream has
 * no owner: every instance writes it.
 */

/** The stream is a workspace's: owned through a lease. */
export const owned = (stream: string): boolean => stream !== SERVICE_STREAM && stream.startsWith('ws:');

/**
 * Another instance holds the lease on a workspace's stream this instance
 * was to write: nothing was appended. Answered 503 with Retry-After (the
 * request goes to the owner when sent again, or the lease has ended and is
 * taken here).
 */
export class NotOwnerError extends StoreUnavailableError {
  constructor(readonly stream: string, readonly owner: Owner) {
    super(`the workspace's stream ${stream} is owned by another instance (${owner.instance}, lease epoch ${owner.epoch}): this instance may not write it`, undefined);
    this.name = 'NotOwnerError';
    this.retryAfterSeconds = 1;
  }
}

export interface PlacementOptions {
  /** How long a lease lasts unless renewed (renewed every third of it). */
  leaseMs: number;
  /** A lease on a stream no write or request used for this long is released at the next renewal. */
  idleMs: number;
  onWarning?: (message: string) => void;
}

interface Held {
  epoch: number;
  /** By this instance's monotonic clock: before it the lease holds for sure (it was taken or renewed by a statement sent at `sent`, lasting `leaseMs` from PostgreSQL's clock after that). */
  validUntil: number;
  usedAt: number;
}

/** What /metrics and tests see of placement. */
export interface PlacementStats {
  /** Workspace streams whose lease this instance holds. */
  held: number;
  /** Leases taken (first use, a free or ended lease, or a takeover). */
  acquired: number;
  /** Leases taken over from an owner that could not be reached while its lease still ran. */
  takeovers: number;
  /** Appends the log refused because this instance's lease had been taken over or had ended (nothing appended). */
  fenced: number;
  /** Leases let go (idle, the workspace let go, close). */
  released: number;
}

/** This instance's leases on workspace streams: taken on first use, renewed every third of their length, released when idle and at close. */
export class Placement {
  /** This instance's id in `wsm_owners` (new at each start). */
  readonly instance = randomUUID();
  private url: string | null = null;
  private readonly held = new Map<string, Held>();
  private timer: NodeJS.Timeout | undefined;
  private renewing: Promise<void> | undefined;
  private closed = false;
  readonly stats: Omit<PlacementStats, 'held'> = { acquired: 0, takeovers: 0, fenced: 0, released: 0 };
  /**
   * Streams whose lease is not let go while this says so (work under way
   * here that is not a request: a lifecycle command running in the
   * workspace), whatever asks (idle, residency, a hand-over).
   */
  keep: (stream: string) => boolean = () => false;
  /**
   * Called when this instance takes a lease it did not hold (not at a
   * renewal): what the workspace's previous holder left unfinished is this
   * instance's to settle (a lifecycle command claimed there). Not awaited.
   */
  onAcquired: (stream: string) => void = () => {};
  /** Called when a lease this instance held is found taken over or ended (not when it lets it go). Not awaited. */
  onLost: (stream: string) => void = () => {};

  constructor(private readonly log: PgLog, readonly options: PlacementOptions) {}

  /** Starts renewing every third of the lease. */
  start(): void {
    if (this.timer || this.closed) return;
    this.timer = setInterval(() => { void this.renew(); }, Math.max(50, Math.floor(this.options.leaseMs / 3)));
    this.timer.unref();
  }

  /** The URL other instances forward this one's workspaces' requests to (known once the server listens); recorded with every lease. */
  async setUrl(url: string): Promise<void> {
    this.url = url;
    // A previous process at this address was killed holding leases: they are this instance's now (no one else takes requests here).
    const sent = performance.now();
    const adopted = await this.log.adoptLeases(this.instance, url, this.options.leaseMs);
    for (const [stream, epoch] of adopted) this.record(stream, epoch, sent);
    if (adopted.size > 0) this.options.onWarning?.(`took back ${adopted.size} workspace lease(s) a previous process at ${url} held`);
    await this.renew();
  }

  get advertisedUrl(): string | null {
    return this.url;
  }

  counts(): PlacementStats {
    return { held: this.held.size, ...this.stats };
  }

  /** Whether this instance holds the lease on `stream` for sure now (by its own clock, with a margin). */
  holds(stream: string): boolean {
    const held = this.held.get(stream);
    return held !== undefined && performance.now() < held.validUntil;
  }

  /** The workspace streams whose lease this instance holds. */
  streams(): string[] {
    return [...this.held.keys()];
  }

  /** Marks `stream` used now (its lease is not released as idle). */
  touch(stream: string): void {
    const held = this.held.get(stream);
    if (held) held.usedAt = performance.now();
  }

  private record(stream: string, epoch: number, sent: number): void {
    const validUntil = sent + this.options.leaseMs * 0.9;
    const had = this.held.get(stream);
    this.held.set(stream, { epoch, validUntil, usedAt: performance.now() });
    if (!had || had.epoch !== epoch) {
      this.stats.acquired++;
      this.notify(this.onAcquired, stream);
    }
  }

  /** Calls a hook without letting it throw into the lease's bookkeeping. */
  private notify(hook: (stream: string) => void, stream: string): void {
    try {
      hook(stream);
    } catch (err) {
      this.options.onWarning?.(`a placement hook failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  /** Drops a lease this instance held that was taken over or ended. */
  private drop(stream: string): void {
    if (this.held.delete(stream)) this.notify(this.onLost, stream);
  }

  /**
   * Takes the lease on `stream` when it is free, has ended, or is this
   * instance's; with `takeOverEpoch` (the owner at that epoch cannot be
   * reached), takes it over even though it still runs. Answers the
   * epoch, or the owner that keeps it.
   */
  async acquire(stream: string, takeOverEpoch?: number): Promise<{ epoch: number } | { owner: Owner }> {
    if (this.closed) throw new Error('store is closed');
    const sent = performance.now();
    const got = await this.log.acquireLease(stream, this.instance, this.url, this.options.leaseMs, takeOverEpoch);
    if ('epoch' in got) {
      if (takeOverEpoch !== undefined && this.held.get(stream)?.epoch !== got.epoch) this.stats.takeovers++;
      this.record(stream, got.epoch, sent);
    } else {
      this.drop(stream);
    }
    return got;
  }

  /** Who holds the lease on `stream` now (this instance's own leases without asking PostgreSQL). */
  async owner(stream: string): Promise<Owner | undefined> {
    const held = this.held.get(stream);
    if (held && this.holds(stream)) return { instance: this.instance, epoch: held.epoch, url: this.url, live: true };
    return this.log.owner(stream);
  }

  /**
   * The leases a write changing `streams` is appended under: the
   * workspace streams among them, each taken first when this instance does
   * not hold it for sure. `NotOwnerError` when another instance holds one.
   */
  async fence(streams: readonly string[]): Promise<Fence> {
    const epochs = new Map<string, number>();
    for (const stream of streams) {
      if (!owned(stream)) continue;
      if (!this.holds(stream)) {
        const got = await this.acquire(stream);
        if ('owner' in got) throw new NotOwnerError(stream, got.owner);
      }
      const held = this.held.get(stream)!;
      held.usedAt = performance.now();
      epochs.set(stream, held.epoch);
    }
    return { instance: this.instance, epochs };
  }

  /** The log refused an append under the lease on `stream` (`LeaseLostError`): it is no longer held. */
  lost(stream: string): void {
    this.stats.fenced++;
    this.drop(stream);
  }

  /**
   * Renews the leases in use; releases those idle for `idleMs`. A lease
   * taken over or ended meanwhile is dropped (the next write takes it
   * again, or finds its owner).
   */
  renew(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.renewing ??= (async () => {
      try {
        const now = performance.now();
        const idle = new Map<string, number>();
        const keep = new Map<string, number>();
        for (const [stream, held] of this.held) (now - held.usedAt >= this.options.idleMs && !this.keep(stream) ? idle : keep).set(stream, held.epoch);
        if (idle.size > 0) await this.releaseEpochs(idle);
        const sent = performance.now();
        const renewed = await this.log.renewLeases(this.instance, keep, this.url, this.options.leaseMs);
        for (const [stream, epoch] of keep) {
          const held = this.held.get(stream);
          if (!held || held.epoch !== epoch) continue;
          if (renewed.has(stream)) held.validUntil = sent + this.options.leaseMs * 0.9;
          else this.drop(stream);
        }
      } catch (err) {
        if (!this.closed) this.options.onWarning?.(`renewing this instance's workspace leases failed: ${err instanceof Error ? err.message : String(err)}`);
      } finally {
        this.renewing = undefined;
      }
    })();
    return this.renewing;
  }

  /** Lets go of the leases on `streams` (the workspaces were let go): another instance takes them at once. */
  async release(streams: Iterable<string>): Promise<void> {
    const epochs = new Map<string, number>();
    for (const stream of streams) {
      const held = this.held.get(stream);
      if (held && !this.keep(stream)) epochs.set(stream, held.epoch);
    }
    await this.releaseEpochs(epochs);
  }

  private async releaseEpochs(epochs: Map<string, number>): Promise<void> {
    if (epochs.size === 0) return;
    for (const [stream, epoch] of epochs) if (this.held.get(stream)?.epoch === epoch) this.held.delete(stream);
    this.stats.released += epochs.size;
    await this.log.releaseLeases(this.instance, epochs);
  }

  /** Stops renewing and releases every lease (the others take the workspaces at once). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    await this.renewing;
    await this.releaseEpochs(new Map([...this.held].map(([stream, held]) => [stream, held.epoch])))
      .catch((err: unknown) => this.options.onWarning?.(`releasing this instance's workspace leases failed: ${err instanceof Error ? err.message : String(err)}`));
  }
}
