import type { Request, Response } from 'express';
import type { CommandFeed, FeedUpdate } from './event-feeds.js';

/**
 * P10 as Server-Sent Events (docs/api.md, "Event stream"): each event of a
 * lifecycle command as one SSE message (`id:` the event id, `event: event`,
 * `data:` the event as JSON), from the one after `Last-Event-ID` when the
 * client resumes. Once the command has finished and every event of it was
 * sent, a last message `event: end` (no id) carries the command's status,
 * and the stream ends. Every event is sent once, in the order P10 lists
 * them as they become visible; one that becomes visible after a later one
 * (a remote engine may commit concurrent writes in any order) is sent when
 * it is found, never skipped. The command is read by its feed
 * (`event-feeds.ts`), shared by every stream following it; a comment line
 * every 15 s keeps idle connections open through proxies.
 */

const FINISHED = new Set(['completed', 'failed']);
const HEARTBEAT_MS = 15_000;

export function wantsEventStream(req: Request): boolean {
  return req.accepts(['application/json', 'text/event-stream']) === 'text/event-stream';
}

/**
 * Streams the command's progress as its `feed` reads it, until the command
 * finished or the client went away; resolves then (rejects with a read's
 * error, after ending the stream).
 */
export function streamEvents(req: Request, res: Response, feed: CommandFeed, presentStatus: (status: string) => string): Promise<void> {
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

  return new Promise<void>((resolve, reject) => {
    let done = false;
    let leave: (() => void) | null = null;
    const heartbeat = setInterval(() => { if (!done) res.write(': keep-alive\n\n'); }, HEARTBEAT_MS);
    const finish = (error?: unknown) => {
      if (done) return;
      done = true;
      leave?.();
      clearInterval(heartbeat);
      res.off('close', onClose);
      if (!res.writableEnded) res.end();
      if (error === undefined) resolve(); else reject(error instanceof Error ? error : new Error('an event stream\'s read failed', { cause: error }));
    };
    // The response's close, not the request's: a request closes once its (empty) body was read.
    const onClose = () => finish();
    res.on('close', onClose);
    const send = (update: FeedUpdate) => {
      if (done) return;
      if ('error' in update) { finish(update.error); return; }
      const { command, events } = update.progress;
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
        res.write(event.text);
        sent.add(event.id);
      }
      if (FINISHED.has(command.status)) {
        res.write(`event: end\ndata: ${JSON.stringify({ commandId: command.id, status: presentStatus(command.status) })}\n\n`);
        finish();
      }
    };
    leave = feed.join(send);
    if (done) leave();
  });
}
