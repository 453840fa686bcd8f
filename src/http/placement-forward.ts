import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import net from 'node:net';
import { pipeline } from 'node:stream';
import { workspaceStream } from '../rdf/graphs.js';
import type { Placement } from '../store/cluster/placement.js';
import type { Logger } from '../logger.js';

/**
 * Placement over HTTP (WSM_CLUSTER_PLACEMENT=lease, docs/cluster.md
 * "Placement"): a request naming a workspace is served by the instance
 * holding the lease on the workspace's stream. Any other instance forwards
 * it there, marked with `HOP_HEADER` so that it is never forwarded again
 * (the instance it reaches serves it: reads from its replica, and a write
 * refused for want of the lease answers 503 with Retry-After rather than
 * going round).
 */

/** Set on a forwarded request (the forwarding instance's id): served where it arrives. */
export const HOP_HEADER = 'x-wsm-forwarded-by';
/** Set on the answer to a forwarded request: the URL of the instance that served it. */
export const SERVED_BY_HEADER = 'x-wsm-owner';

/** Requests in a row forwarded from one other instance after which a workspace is released for it. */
export const HANDOVER_AFTER = 8;

/** Milliseconds to open a connection to the owner before it counts as unreachable (nothing sent then). */
const CONNECT_TIMEOUT_MS = 2000;

/** Areas whose second segment is not a workspace (as the balancer's rule, scripts/balancer.ts). */
const NO_WORKSPACE = new Set(['registry', 'users']);

/** The {workspace} segment a request names (the segment after `/api/v1/<area>/`, or after `/mcp/`), decoded; undefined when none. */
export function workspaceSegment(url: string | undefined): string | undefined {
  const path = (url ?? '/').split('?')[0]!;
  const parts = path.split('/');
  let segment: string | undefined;
  if (parts[1] === 'api' && parts[2] === 'v1' && parts[3] && !NO_WORKSPACE.has(parts[3])) segment = parts[4];
  else if (parts[1] === 'mcp') segment = parts[2];
  if (!segment || (parts[3] === 'workspaces' && segment === 'import' && parts.length === 5)) return undefined;
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** Headers of one connection, not passed on (RFC 9110, section 7.6.1). */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'upgrade', 'te', 'trailer', 'transfer-encoding']);

export interface PlacementRouting {
  placement: Placement;
  /** The id of the workspace a segment names (slug or id), if there is one. */
  resolve: (segment: string) => Promise<string | undefined>;
  /** Whether PostgreSQL can be used: while it cannot, every request is served where it arrives (reads from the replica, writes 503). */
  available: () => boolean;
  logger: Logger;
}

/** Counts for /metrics. */
export interface ForwardStats {
  forwarded: number;
  failed: number;
  /** Workspaces released because their requests all came forwarded from one other instance. */
  handovers: number;
}

/**
 * The front of the server's request listener: `serve` when this instance
 * serves the request, else the request is forwarded to the workspace's
 * owner. An owner that cannot be reached (no connection: nothing was sent)
 * or whose lease ended is taken over, and the request served here.
 */
export function placementRouter(routing: PlacementRouting): { route: (req: IncomingMessage, res: ServerResponse, serve: () => void) => void; stats: ForwardStats } {
  const { placement, logger } = routing;
  const stats: ForwardStats = { forwarded: 0, failed: 0, handovers: 0 };

  /** Where the request goes: served here (with the workspace's stream, when it names one), or forwarded to the owner's URL. */
  type Decision = { here: string | undefined } | { url: string; epoch: number; stream: string };
  const decide = async (req: IncomingMessage): Promise<Decision> => {
    if (req.headers.upgrade !== undefined) return { here: undefined };
    const segment = workspaceSegment(req.url);
    if (segment === undefined) return { here: undefined };
    const id = await routing.resolve(segment);
    if (id === undefined) return { here: undefined };
    const stream = workspaceStream(id);
    // Forwarded once already, or no owner can be asked (PostgreSQL out of reach): served here, whoever holds the workspace.
    if (req.headers[HOP_HEADER] !== undefined || !routing.available()) return { here: stream };
    if (placement.holds(stream)) {
      placement.touch(stream);
      return { here: stream };
    }
    for (let attempt = 0; attempt < 2; attempt++) {
      const owner = await placement.owner(stream);
      if (!owner?.live || owner.instance === placement.instance) {
        // Free, ended or ours: taken on first use, so this instance serves the workspace from now on.
        const got = await placement.acquire(stream);
        if ('epoch' in got) return { here: stream };
        continue;
      }
      // A previous process at this instance's own address (killed): taken over.
      if (owner.url !== null && owner.url === placement.advertisedUrl) {
        const got = await placement.acquire(stream, owner.epoch);
        if ('epoch' in got) return { here: stream };
        continue;
      }
      // An owner that has not said where it listens yet (starting): served here (a write then answers 503).
      return owner.url ? { url: owner.url, epoch: owner.epoch, stream } : { here: stream };
    }
    return { here: stream };
  };

  /**
   * Following the requests: a workspace whose last `HANDOVER_AFTER`
   * requests all came forwarded from one other instance (the balancer sends
   * them there) is released once none is under way here, so that instance
   * takes it on its next request.
   */
  const streaks = new Map<string, { from: string; count: number }>();
  const underWay = new Map<string, number>();
  const served = (req: IncomingMessage, res: ServerResponse, stream: string | undefined, serve: () => void): void => {
    if (stream === undefined) return serve();
    const from = req.headers[HOP_HEADER];
    const streak = streaks.get(stream);
    if (typeof from !== 'string') streaks.delete(stream);
    else if (streak?.from === from) streak.count++;
    else streaks.set(stream, { from, count: 1 });
    underWay.set(stream, (underWay.get(stream) ?? 0) + 1);
    res.once('close', () => {
      const left = (underWay.get(stream) ?? 1) - 1;
      if (left > 0) {
        underWay.set(stream, left);
        return;
      }
      underWay.delete(stream);
      const last = streaks.get(stream);
      if (!last || last.count < HANDOVER_AFTER || !placement.holds(stream) || placement.keep(stream)) return;
      streaks.delete(stream);
      stats.handovers++;
      placement.release([stream]).catch((err: unknown) => logger.warn({ err, stream }, 'releasing a workspace\'s lease for the instance its requests come from failed'));
    });
    serve();
  };

  const route = (req: IncomingMessage, res: ServerResponse, serve: () => void): void => {
    const attempt = (left: number): void => {
      decide(req).then((target) => {
        if ('here' in target) return served(req, res, target.here, serve);
        return forward(req, res, target.url, placement.instance, logger, stats).then(async (sent) => {
          if (sent) return;
          // Nothing was sent: the owner is down (or cannot be reached). Its lease is taken over at the epoch seen, and the request served here.
          const got = await placement.acquire(target.stream, target.epoch).catch(() => undefined);
          const taken = got !== undefined && 'epoch' in got;
          logger.warn({ stream: target.stream, owner: target.url, takenOver: taken }, 'the owner of a workspace could not be reached');
          // Another instance took it over first: the request goes there (nothing of it was read yet).
          if (!taken && got && left > 0) return attempt(left - 1);
          served(req, res, target.stream, serve);
        });
      }).catch((err: unknown) => {
        // PostgreSQL cannot tell the owner (out of reach): served here, as the store answers (reads from the replica, writes 503).
        logger.debug({ err }, 'the owner of the request\'s workspace could not be looked up: serving it here');
        if (!res.headersSent && !req.readableDidRead) serve();
        else res.destroy();
      });
    };
    attempt(2);
  };
  return { route, stats };
}

/**
 * Sends `req` to the instance at `target` and streams its answer back.
 * Resolves false when no connection could be made (nothing of the request
 * was read or sent: it can be served elsewhere), true once the answer
 * has been passed on (or the exchange failed after the request was sent:
 * 502 when no answer had begun, its outcome unknown).
 */
function forward(req: IncomingMessage, res: ServerResponse, target: string, me: string, logger: Logger, stats: ForwardStats): Promise<boolean> {
  const url = new URL(target);
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const port = Number(url.port || 80);
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const timer = setTimeout(() => socket.destroy(new Error('connect timeout')), CONNECT_TIMEOUT_MS);
    const unreachable = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    socket.once('error', unreachable);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.off('error', unreachable);
      stats.forwarded++;
      resolve(true);
      const headers: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(req.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
      headers[HOP_HEADER] = me;
      const from = req.socket.remoteAddress;
      if (from) headers['x-forwarded-for'] = req.headers['x-forwarded-for'] ? `${String(req.headers['x-forwarded-for'])}, ${from}` : from;
      if (req.headers['transfer-encoding'] !== undefined) headers['transfer-encoding'] = 'chunked';
      const outgoing = http.request({ method: req.method, path: req.url, headers, createConnection: () => socket });
      let ended = false;
      const failed = (err: unknown): void => {
        if (ended) return;
        ended = true;
        if (res.headersSent) {
          res.destroy();
          return;
        }
        stats.failed++;
        logger.warn({ err, owner: target }, 'the owner of a workspace failed under a forwarded request');
        const body = JSON.stringify({ success: false, error: { code: 'BAD_GATEWAY', message: 'The instance that holds this workspace did not answer. A change sent may or may not have been made: read before sending it again.' } });
        res.writeHead(502, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) }).end(body);
      };
      outgoing.on('response', (answer) => {
        const raw: string[] = [];
        for (let i = 0; i < answer.rawHeaders.length; i += 2) {
          if (!HOP_BY_HOP.has(answer.rawHeaders[i]!.toLowerCase())) raw.push(answer.rawHeaders[i]!, answer.rawHeaders[i + 1]!);
        }
        raw.push(SERVED_BY_HEADER, target);
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, raw);
        // At once: an event stream's headers go before its first event.
        res.flushHeaders();
        pipeline(answer, res, (err) => { if (err) res.destroy(); });
      });
      // The client went away: so does the forwarded request.
      res.on('close', () => { if (!res.writableFinished) outgoing.destroy(); });
      pipeline(req, outgoing, (err) => { if (err) failed(err); });
      outgoing.on('error', failed);
    });
  });
}
