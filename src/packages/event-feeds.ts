import type { CommandEvent, LifecycleCommand } from './commands.js';

/**
 * The reads behind P10's live streams, shared: one `CommandFeed` per
 * command, whatever the number of streams following it, reads the command
 * and its events after each store write that declared one of the command's
 * graphs (and once a second in any case: another service instance's writes
 * are not announced here), and hands every read to each of its streams. A
 * read asked for while one is under way runs once after it, for all the
 * writes it missed. Each event's SSE message is built once per feed.
 */

/** One event as its SSE message (`id:`, `event: event`, `data:`), built once. */
export interface EventMessage { id: string; text: string }

/** What a stream is handed: the command (its status says whether it finished) and its events, oldest first. */
export interface CommandProgress { command: LifecycleCommand; events: readonly EventMessage[] }

export type FeedUpdate = { progress: CommandProgress } | { error: unknown };

export interface CommandFeed {
  /**
   * Calls `listener` with every read from now on (first with the last one
   * made, when there is one); returns the leave.
   */
  join(listener: (update: FeedUpdate) => void): () => void;
}

export interface FeedSource {
  /** Reads the command (status first: events written with or before the final status are then in the events read after it). */
  read(): Promise<{ command: LifecycleCommand; events: CommandEvent[] }>;
  /** The graphs whose writes may change the command or its events. */
  graphs: readonly string[];
}

const POLL_MS = 1_000;

class Feed implements CommandFeed {
  private readonly listeners = new Set<(update: FeedUpdate) => void>();
  private latest: CommandProgress | null = null;
  private reading = false;
  private stale = true;
  private readonly messages = new Map<string, string>();
  private stopWrites: (() => void) | null = null;
  private poll: NodeJS.Timeout | null = null;

  constructor(
    private readonly source: FeedSource,
    private readonly onWrite: (listener: (graphs: ReadonlySet<string>) => void) => () => void,
    private readonly onIdle: () => void,
  ) {}

  join(listener: (update: FeedUpdate) => void): () => void {
    this.listeners.add(listener);
    if (this.listeners.size === 1) this.start();
    const latest = this.latest;
    if (latest) queueMicrotask(() => { if (this.listeners.has(listener)) listener({ progress: latest }); });
    return () => {
      if (!this.listeners.delete(listener) || this.listeners.size > 0) return;
      this.stop();
      this.onIdle();
    };
  }

  private start(): void {
    const graphs = new Set(this.source.graphs);
    this.stopWrites = this.onWrite((written) => {
      for (const g of written) if (graphs.has(g)) { this.refresh(); return; }
    });
    this.poll = setInterval(() => this.refresh(), POLL_MS);
    this.refresh();
  }

  private stop(): void {
    this.stopWrites?.();
    this.stopWrites = null;
    if (this.poll) clearInterval(this.poll);
    this.poll = null;
  }

  private refresh(): void {
    this.stale = true;
    if (!this.reading) void this.readWhileStale();
  }

  private async readWhileStale(): Promise<void> {
    this.reading = true;
    try {
      while (this.stale && this.listeners.size > 0) {
        this.stale = false;
        let update: FeedUpdate;
        try {
          const { command, events } = await this.source.read();
          update = { progress: { command, events: events.map((e) => ({ id: e.id, text: this.message(e) })) } };
          this.latest = update.progress;
        } catch (error) {
          update = { error };
        }
        for (const listener of [...this.listeners]) listener(update);
      }
    } finally {
      this.reading = false;
    }
  }

  private message(event: CommandEvent): string {
    let text = this.messages.get(event.id);
    if (text === undefined) {
      text = `id: ${event.id}\nevent: event\ndata: ${JSON.stringify(event)}\n\n`;
      this.messages.set(event.id, text);
    }
    return text;
  }
}

/** The feeds of the commands being followed, one per command, dropped when its last stream leaves. */
export class CommandFeeds {
  private readonly feeds = new Map<string, Feed>();

  constructor(private readonly onWrite: (listener: (graphs: ReadonlySet<string>) => void) => () => void) {}

  /** The feed of the command `key` names (made from `source` when no stream follows it yet). */
  feed(key: string, source: FeedSource): CommandFeed {
    let feed = this.feeds.get(key);
    if (!feed) {
      const made: Feed = new Feed(source, this.onWrite, () => { if (this.feeds.get(key) === made) this.feeds.delete(key); });
      feed = made;
      this.feeds.set(key, feed);
    }
    return feed;
  }

  /** How many commands are followed now. */
  get size(): number { return this.feeds.size; }
}

/**
 * Concurrent streams per user (every bearer token and API key of one user
 * counts together, so more keys do not lift it): `take` answers the release
 * of a slot, or null when the user already holds `max`; `full` asks the
 * same without taking one.
 */
export class StreamSlots {
  private readonly held = new Map<string, number>();

  constructor(readonly max: number) {}

  /** Whether `user` holds `max` streams now (`take` would answer null). */
  full(user: string): boolean {
    return (this.held.get(user) ?? 0) >= this.max;
  }

  take(user: string): (() => void) | null {
    const n = this.held.get(user) ?? 0;
    if (n >= this.max) return null;
    this.held.set(user, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.held.get(user) ?? 1) - 1;
      if (left > 0) this.held.set(user, left); else this.held.delete(user);
    };
  }
}
