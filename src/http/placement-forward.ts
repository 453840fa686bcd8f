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

/** How long the server keeps an idle connection open (`server.keepAliveTimeout`, src/server.ts): also what an owner does with the connections of forwarded requests. */
export const KEEP_ALIVE_MS = 5000;
/** How long an idle connection to an owner is kept for the next forward: below `KEEP_ALIVE_MS`, so the forwarder closes it before the owner does. */
const FREE_SOCKET_MS = 4000;
/** Idle connections kept per owner (more are closed once their request ends). */
const MAX_FREE_SOCKETS = 16;
/** Request bodies of a declared length up to this go on a kept connection (kept until the answer begins, to be sent again); larger or chunked ones on a new connection. */
const REPLAYABLE_BYTES = 1 << 20;

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
  /** Connections opened to owners (kept open and reused between forwards). */
  connections: number;
  /** Forwards sent again on a new connection after a reused one was found closed (no answer had begun). */
  retries: number;
  /** Workspaces released because their requests all came forwarded from one other instance. */
  handovers: number;
}

/**
 * The front of the server's request listener: `serve` when this instance
 * serves the request, else the request is forwarded to the workspace's
 * owner, over connections kept open to it. An owner that cannot be reached
 * (no connection: nothing was sent) or whose lease ended is taken over,
 * and the request served here.
 */
export function placementRouter(routing: PlacementRouting): {
  route: (req: IncomingMessage, res: ServerResponse, serve: () => void) => void;
  stats: ForwardStats;
  /** Closes the connections kept open to owners. */
  close: () => void;
} {
  const { placement, logger } = routing;
  const stats: ForwardStats = { forwarded: 0, failed: 0, connections: 0, retries: 0, handovers: 0 };
  /** The connections kept to each owner, by its URL. */
  const agents = new Map<string, http.Agent>();
  const agentFor = (url: string): http.Agent => {
    let agent = agents.get(url);
    if (!agent) {
      // Owners that went away (their connections all closed since) are forgotten.
      for (const [other, idle] of agents) {
        if (Object.keys(idle.sockets).length === 0 && Object.keys(idle.freeSockets).length === 0 && Object.keys(idle.requests).length === 0) {
          idle.destroy();
          agents.delete(other);
        }
      }
      agent = ownerAgent();
      agents.set(url, agent);
    }
    return agent;
  };

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
        return forward(req, res, target.url, agentFor(target.url), placement.instance, logger, stats).then(async (how) => {
          if (how === 'sent') return;
          // Nothing was sent: the owner is down (or cannot be reached). Its lease is taken over at the epoch seen, and the request served here.
          const got = await placement.acquire(target.stream, target.epoch).catch(() => undefined);
          const taken = got !== undefined && 'epoch' in got;
          logger.warn({ stream: target.stream, owner: target.url, takenOver: taken }, 'the owner of a workspace could not be reached');
          // Sent on a kept connection that broke, and the owner is gone: it may have taken the request before it died.
          if (how === 'lost') return badGateway(res, stats);
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
  const close = (): void => {
    for (const agent of agents.values()) agent.destroy();
    agents.clear();
  };
  return { route, stats, close };
}

/** 502: the owner failed under a forwarded request (after it was sent); what it did with it is unknown. */
function badGateway(res: ServerResponse, stats: ForwardStats): void {
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return;
  }
  stats.failed++;
  const body = JSON.stringify({ success: false, error: { code: 'BAD_GATEWAY', message: 'The instance that holds this workspace did not answer. A change sent may or may not have been made: read before sending it again.' } });
  res.writeHead(502, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) }).end(body);
}

/** Methods that change nothing (RFC 9110, section 9.2.1): one sent to an owner that then died can be served again elsewhere. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** How a forward ended: the answer (or a 502) was sent; no connection could be made and nothing of the request was sent (or only a safe request, to an owner found gone); or a request sent on a kept connection that broke, to an owner then found gone (it may have taken it). */
type Forwarded = 'sent' | 'unreachable' | 'lost';

/** An error of a request sent on a connection the other end had closed or reset (no answer came). */
const resetCodes = new Set(['ECONNRESET', 'EPIPE']);

/**
 * The connections to one owner: kept open between requests (keep-alive),
 * at most `MAX_FREE_SOCKETS` idle ones, each closed after `FREE_SOCKET_MS`
 * unused, before the owner's server would close it (`KEEP_ALIVE_MS`).
 */
function ownerAgent(): http.Agent {
  return new http.Agent({ keepAlive: true, maxFreeSockets: MAX_FREE_SOCKETS, timeout: FREE_SOCKET_MS, scheduling: 'lifo' });
}

/**
 * Sends `req` to the instance at `target` and streams its answer back.
 *
 * A connection the agent kept open is used when the request's body can be
 * sent again (none, or a declared length up to `REPLAYABLE_BYTES`, kept
 * until the answer begins). When such a request fails with ECONNRESET or
 * EPIPE before any byte of the answer came, on a connection that was
 * reused, it is sent once more on a new connection. When that connection
 * is made the owner is alive and had closed the kept one without taking
 * the request (an idle connection it let go as the request came): the
 * request goes on as on a first connection. When it cannot be made the
 * owner is gone, and may have taken the request before it went: a safe
 * request (GET, HEAD, OPTIONS) is 'unreachable' (served here), any other
 * 'lost' (taken over, 502). Any other request goes on a new connection,
 * opened before its body is read: 'unreachable' when none can be made
 * (nothing was sent: served here). Otherwise 'sent', once the answer has
 * been passed on or the exchange failed after the request was sent (502
 * when no answer had begun: its outcome is unknown).
 */
function forward(req: IncomingMessage, res: ServerResponse, target: string, agent: http.Agent, me: string, logger: Logger, stats: ForwardStats): Promise<Forwarded> {
  const url = new URL(target);
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const port = Number(url.port || 80);
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(req.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
  headers[HOP_HEADER] = me;
  const from = req.socket.remoteAddress;
  if (from) headers['x-forwarded-for'] = req.headers['x-forwarded-for'] ? `${String(req.headers['x-forwarded-for'])}, ${from}` : from;
  const chunked = req.headers['transfer-encoding'] !== undefined;
  if (chunked) headers['transfer-encoding'] = 'chunked';
  const length = Number(req.headers['content-length'] ?? 0);
  const bodyless = !chunked && length === 0;
  const replayable = !chunked && length <= REPLAYABLE_BYTES;

  return new Promise((resolve) => {
    let outcome: Forwarded | undefined;
    const settle = (how: Forwarded): void => {
      if (outcome !== undefined) return;
      outcome = how;
      resolve(how);
    };
    let counted = false;
    let answered = false;
    let retried = false;
    /** Where the body goes (the attempt under way once it was sent); the latest attempt. */
    let current: http.ClientRequest | undefined;
    let latest: http.ClientRequest | undefined;
    /** The body read so far, while it may have to be sent again. */
    const kept: Buffer[] = [];
    let reading = false;
    let bodyEnded = false;
    let bodyRead = false;
    const onData = (chunk: Buffer): void => {
      bodyRead = true;
      if (!answered && replayable) kept.push(chunk);
      const out = current;
      if (out && !out.write(chunk)) {
        req.pause();
        out.once('drain', () => { if (current === out) req.resume(); });
      }
    };
    /** Sends the request's body on `out`: what was read before, then the rest as it comes. */
    const sendBody = (out: http.ClientRequest): void => {
      current = out;
      if (bodyless) {
        out.end();
        return;
      }
      for (const chunk of kept) out.write(chunk);
      if (bodyEnded) {
        out.end();
        return;
      }
      if (!reading) {
        reading = true;
        req.on('data', onData);
        req.once('end', () => { bodyEnded = true; current?.end(); });
        req.once('error', (err) => current?.destroy(err));
      }
      req.resume();
    };
    const failed = (err: unknown): void => {
      if (outcome !== undefined && outcome !== 'sent') return;
      settle('sent');
      if (res.headersSent || res.destroyed) {
        res.destroy();
        return;
      }
      logger.warn({ err, owner: target }, 'the owner of a workspace failed under a forwarded request');
      badGateway(res, stats);
    };

    const attempt = (fresh: boolean): void => {
      const out = http.request({ host, port, method: req.method, path: req.url, headers, agent: fresh ? false : agent });
      latest = out;
      let connected = false;
      let timer: NodeJS.Timeout | undefined;
      let answerBytesBefore = 0;
      let socket: net.Socket | undefined;
      const start = (): void => {
        connected = true;
        if (!counted) {
          counted = true;
          stats.forwarded++;
        }
        // A new connection: committed to this owner (it may take the request from here on).
        if (!out.reusedSocket) settle('sent');
        sendBody(out);
      };
      out.on('socket', (s) => {
        socket = s;
        answerBytesBefore = s.bytesRead;
        if (!out.reusedSocket) stats.connections++;
        if (!s.connecting) return start();
        timer = setTimeout(() => out.destroy(Object.assign(new Error('connect timeout'), { code: 'ETIMEDOUT' })), CONNECT_TIMEOUT_MS);
        s.once('connect', () => {
          clearTimeout(timer);
          start();
        });
      });
      out.on('error', (err: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        if (answered) return;
        if (!connected) {
          // No connection. A first one: nothing of the request reached the owner. After a kept one broke under it: the owner is gone, and may have taken it.
          settle(!retried || (SAFE_METHODS.has(req.method ?? '') && !bodyRead) ? 'unreachable' : 'lost');
          return;
        }
        if (out.reusedSocket && !retried && resetCodes.has(err.code ?? '') && socket?.bytesRead === answerBytesBefore && outcome === undefined) {
          // An idle connection the owner closed as the request came (it took nothing), or the owner died (it may have): once more, on a new connection.
          retried = true;
          stats.retries++;
          // The body read meanwhile is kept for the new connection.
          current = undefined;
          logger.debug({ err, owner: target }, 'a reused connection to the owner of a workspace was closed: sending the request again on a new one');
          attempt(true);
          return;
        }
        failed(err);
      });
      out.on('response', (answer) => {
        answered = true;
        kept.length = 0;
        settle('sent');
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
    };
    // The client went away: so does the forwarded request.
    res.on('close', () => {
      if (res.writableFinished) return;
      settle('sent');
      latest?.destroy();
    });
    attempt(!replayable);
  });
}
