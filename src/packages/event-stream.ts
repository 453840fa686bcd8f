import type { Request, Response } from 'express';
import type { CommandEvent, LifecycleCommand } from './commands.js';

/**
 * P10 as Server-Sent Events (docs/api.md, "Event stream"): each event of a
 * lifecycle command as one SSE message (`id:` the event id, `event: event`,
 * `data:` the event as JSON), from the one after `Last-Event-ID` when the
 * client resumes. Once the command has finished and every event of it was
 * sent, a last message `event: end` (no id) carries the command's status,
 * and the stream ends. Every event is sent once, in the order P10 lists
 * them as they become visible; one that becomes visible after a later one
 * (a remote engine may commit concurrent writes in any order) is sent when
 * it is found, never skipped. New events are looked for after every write to the
 * store, and once a second in any case; a comment line every 15 s keeps
 * idle connections open through proxies.
 */

export interface EventSource {
  /** The command (its status says whether it finished). */
  command(): Promise<LifecycleCommand>;
  /** Every event of the command, oldest first. */
  events(): Promise<CommandEvent[]>;
  /** Calls `listener` after each store write; returns the unsubscribe. */
  subscribe(listener: () => void): () => void;
  /** The status as answered (WSM_STATUS_CASE). */
  presentStatus(status: string): string;
}

const FINISHED = new Set(['completed', 'failed']);
const POLL_MS = 1_000;
const HEARTBEAT_MS = 15_000;

export function wantsEventStream(req: Request): boolean {
  return req.accepts(['application/json', 'text/event-stream']) === 'text/event-stream';
}

/** Streams until the command finished or the client went away; resolves then. */
export async function streamEvents(req: Request, res: Response, source: EventSource): Promise<void> {
  // Read once before answering, so a missing command is still a plain 404.
  await source.command();
  const lastEventId = req.headers['last-event-id'];
  let resumeAfter = typeof lastEventId === 'string' && lastEventId.trim() !== '' ? lastEventId.trim() : null;
  const sent = new Set<string>();

  res.status(200);
  res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
  res.setHeader('Cache-Control', 'no-cache, no-transform');
  res.setHeader('Connection', 'keep-alive');
  res.setHeader('X-Accel-Buffering', 'no');
  res.flushHeaders();
  res.write('retry: 1000\n\n');

  let closed = false;
  let wake: (() => void) | null = null;
  let pending = true;
  const poke = () => {
    pending = true;
    const w = wake;
    wake = null;
    w?.();
  };
  const unsubscribe = source.subscribe(poke);
  const poll = setInterval(poke, POLL_MS);
  const heartbeat = setInterval(() => { if (!closed) res.write(': keep-alive\n\n'); }, HEARTBEAT_MS);
  const onClose = () => { closed = true; poke(); };
  // The response's close, not the request's: a request closes once its (empty) body was read.
  res.on('close', onClose);
  try {
    while (!closed) {
      if (!pending) await new Promise<void>((resolve) => { wake = resolve; });
      if (closed) break;
      pending = false;
      // Status first: events written with (or before) the final status are then all in the read below.
      const command = await source.command();
      const events = await source.events();
      if (resumeAfter !== null) {
        // Resuming: the events up to the client's last one (in the order P10 lists them) count as sent.
        // An id this command never had: everything, from the first event.
        const at = events.findIndex((e) => e.id === resumeAfter);
        for (const e of events.slice(0, at + 1)) sent.add(e.id);
        resumeAfter = null;
      }
      // Every event not sent yet, not only those after the last one sent: an event may become
      // visible after a later one (a remote engine commits concurrent writes in any order).
      for (const event of events) {
        if (sent.has(event.id)) continue;
        res.write(`id: ${event.id}\nevent: event\ndata: ${JSON.stringify(event)}\n\n`);
        sent.add(event.id);
      }
      if (FINISHED.has(command.status)) {
        res.write(`event: end\ndata: ${JSON.stringify({ commandId: command.id, status: source.presentStatus(command.status) })}\n\n`);
        break;
      }
    }
  } finally {
    unsubscribe();
    clearInterval(poll);
    clearInterval(heartbeat);
    res.off('close', onClose);
    if (!res.writableEnded) res.end();
  }
}
