import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { bearer, removeDir, seedWorkspace, startTestServer, type TestServer, type Tokens } from '../helpers/server.js';

interface SseMessage { id?: string; event?: string; data: string }

/** An open SSE response, read as it arrives. */
interface OpenStream {
  status: number;
  headers: Headers;
  messages: SseMessage[];
  /** Resolves once the server ended the stream (or it was aborted). */
  ended: Promise<void>;
  /** Resolves once `check` holds of the messages received so far. */
  until(check: (messages: SseMessage[]) => boolean): Promise<void>;
  abort(): void;
}

async function openStream(url: string, headers: Record<string, string>): Promise<OpenStream> {
  const controller = new AbortController();
  const res = await fetch(url, { headers: { Accept: 'text/event-stream', ...headers }, signal: controller.signal });
  const messages: SseMessage[] = [];
  const waiters: Array<{ check: (m: SseMessage[]) => boolean; resolve: () => void }> = [];
  const wake = () => {
    for (const w of [...waiters]) if (w.check(messages)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(); }
  };
  const read = async () => {
    if (!res.body || res.status !== 200) return;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const message: SseMessage = { data: '' };
          let hasData = false;
          for (const line of block.split('\n')) {
            if (line.startsWith(':') || line === '') continue;
            const colon = line.indexOf(':');
            const field = line.slice(0, colon);
            const value = line.slice(colon + 1).replace(/^ /, '');
            if (field === 'id') message.id = value;
            else if (field === 'event') message.event = value;
            else if (field === 'data') { message.data += (hasData ? '\n' : '') + value; hasData = true; }
          }
          if (hasData) messages.push(message);
        }
        wake();
      }
    } catch (err) {
      if ((err as Error).name !== 'AbortError') throw err;
    }
  };
  const ended = read();
  return {
    status: res.status,
    headers: res.headers,
    messages,
    ended,
    until: (check) => (check(messages) ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ check, resolve }))),
    abort: () => controller.abort(),
  };
}

/**
 * Sends `raw` (one or more HTTP requests) on a connection of its own and
 * answers everything the server sent until it closed the connection.
 */
function rawExchange(url: string, raw: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(raw));
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => { received += d; });
    socket.on('error', reject);
    socket.on('end', () => { socket.end(); resolve(received); });
  });
}

const eventIds = (messages: SseMessage[]) => messages.filter((m) => m.event === 'event').map((m) => m.id!);

/**
 * P10 streams at scale: one user holds at most WSM_MAX_EVENT_STREAMS at once
 * (429 with Retry-After beyond, a slot freed when a stream closes), and the
 * streams of one command share one reader. The commands here are records
 * written through the store's interface, so the test makes every write.
 */
describe('P10 streams: the per-user cap and the shared reader', function () {
  this.timeout(120_000);
  const MAX = 3;
  let t: TestServer;
  let tokens: Tokens;
  let workspaceId: string;
  const streams: OpenStream[] = [];
  const url = (id: string) => `${t.url}/api/v1/packages/acme/commands/${id}/events`;

  before(async () => {
    t = await startTestServer({ WSM_MAX_EVENT_STREAMS: String(MAX) });
    const seeded = await seedWorkspace(t, 'acme');
    tokens = seeded.tokens;
    workspaceId = seeded.workspace.id;
  });
  afterEach(() => { for (const s of streams.splice(0)) s.abort(); });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  const commands = () => t.server.services.packages.commands;
  const now = () => new Date().toISOString();
  /** A pending command record that no runner runs. */
  const newCommand = async (): Promise<string> => {
    const id = randomUUID();
    await t.server.services.store.write([commands().createOp({ workspaceId, id, packageName: `driven-${id.slice(0, 8)}`, version: '1.0.0', commandType: 'INSTALL', packageInstallationId: null, now: now() })]);
    return id;
  };
  const addEvents = (ids: string[], sequence: number) => t.server.services.store.write(
    ids.map((id) => commands().eventOp(workspaceId, id, sequence, 'INFO', `step ${sequence} of ${id}`, now())));
  const finish = (id: string) => t.server.services.store.write(commands().statusOps(workspaceId, id, 'completed', now()));
  const open = async (id: string, token: string) => {
    const s = await openStream(url(id), bearer(token));
    streams.push(s);
    return s;
  };
  /** Opens MAX streams of `token` on `id`: slots of streams closed just before may not be free yet. */
  const fill = async (id: string, token: string) => {
    let opened = 0;
    for (let attempt = 0; attempt < 400 && opened < MAX; attempt++) {
      const s = await open(id, token);
      if (s.status === 200) opened++;
      else await new Promise((r) => setTimeout(r, 25));
    }
    expect(opened).to.equal(MAX);
  };
  const jsonIds = async (id: string) => ((await t.http.get(`/api/v1/packages/acme/commands/${id}/events`).set(bearer(tokens.owner))).body.data as Array<{ id: string }>).map((e) => e.id);

  it('beyond the cap a user gets 429 with Retry-After, whichever token; other users and JSON answers are not held back', async () => {
    const id = await newCommand();
    for (let i = 0; i < MAX; i++) expect((await open(id, tokens.member)).status).to.equal(200);
    // Another token of the same user: the cap is the user's.
    const again = await fetch(url(id), { headers: { Accept: 'text/event-stream', ...bearer(await t.token('acme-member')) } });
    expect(again.status).to.equal(429);
    expect(Number(again.headers.get('retry-after'))).to.be.greaterThan(0);
    const body = await again.json() as { success: boolean; error: { code: string; message: string } };
    expect(body.success).to.equal(false);
    expect(body.error.code).to.equal('TOO_MANY_REQUESTS');
    expect(body.error.message).to.match(/event streams/);
    expect((await open(id, tokens.owner)).status).to.equal(200);
    expect((await t.http.get(`/api/v1/packages/acme/commands/${id}/events`).set(bearer(tokens.member))).status).to.equal(200);
  });

  it('beyond the cap the 429 closes its connection: a request sent after it on the same connection is not answered', async () => {
    const id = await newCommand();
    await fill(id, tokens.member);
    const request = `GET /api/v1/packages/acme/commands/${id}/events HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n`
      + `Authorization: Bearer ${tokens.member}\r\nConnection: keep-alive\r\n\r\n`;
    // Two requests at once on one keep-alive connection: one answer, then the server closes it.
    const received = await rawExchange(t.url, request + request);
    expect(received.match(/HTTP\/1\.1 /g)).to.have.length(1);
    const [head, body] = received.split('\r\n\r\n') as [string, string];
    expect(head).to.match(/^HTTP\/1\.1 429 /);
    expect(head).to.match(/\r\nconnection: close\r\n/i);
    expect(head).to.match(/\r\nretry-after: [1-9]\d*\r\n/i);
    expect(head).to.match(/\r\ncontent-type: application\/json; charset=utf-8\r\n/i);
    // The headers every answer carries, and its own request id.
    expect(head).to.match(/\r\nx-content-type-options: nosniff\r\n/i);
    expect(head).to.match(/\r\nx-request-id: [0-9a-f-]{36}\r\n/i);
    const error = JSON.parse(body) as { success: boolean; error: { code: string; message: string } };
    expect(error.success).to.equal(false);
    expect(error.error.code).to.equal('TOO_MANY_REQUESTS');
    expect(error.error.message).to.contain(`${MAX} event streams`);
  });

  it('at the cap, a bad token is still 401; the 429 is answered before the workspace is looked at, so any workspace gets it', async () => {
    const id = await newCommand();
    await fill(id, tokens.member);
    const unauthenticated = await fetch(url(id), { headers: { Accept: 'text/event-stream', Authorization: 'Bearer not-a-token' } });
    expect(unauthenticated.status).to.equal(401);
    const elsewhere = await fetch(`${t.url}/api/v1/packages/no-such-workspace/commands/${id}/events`, { headers: { Accept: 'text/event-stream', ...bearer(tokens.member) } });
    expect(elsewhere.status).to.equal(429);
    expect(elsewhere.headers.get('connection')).to.equal('close');
    expect(((await elsewhere.json()) as { error: { code: string } }).error.code).to.equal('TOO_MANY_REQUESTS');
    // Without a stream asked for, the same request is answered as before: a 404 for a workspace that does not exist.
    expect((await fetch(`${t.url}/api/v1/packages/no-such-workspace/commands/${id}/events`, { headers: bearer(tokens.member) })).status).to.equal(404);
    // HEAD: the same status and headers, no body.
    const head = await fetch(url(id), { method: 'HEAD', headers: { Accept: 'text/event-stream', ...bearer(tokens.member) } });
    expect(head.status).to.equal(429);
    expect(await head.text()).to.equal('');
  });

  it('closing streams frees their slots: a stream the client closed, and streams the end of their command closed', async () => {
    const id = await newCommand();
    const mine = [];
    for (let i = 0; i < MAX; i++) mine.push(await open(id, tokens.member));
    expect((await fetch(url(id), { headers: { Accept: 'text/event-stream', ...bearer(tokens.member) } })).status).to.equal(429);
    // The client closes one: its slot is free once the server saw the connection close.
    mine[0]!.abort();
    let reopened: OpenStream | null = null;
    for (let attempt = 0; attempt < 200 && !reopened; attempt++) {
      const s = await open(id, tokens.member);
      if (s.status === 200) reopened = s;
      else await new Promise((r) => setTimeout(r, 25));
    }
    expect(reopened?.status).to.equal(200);
    // The command finishes: every stream ends, and the user can open as many again.
    await finish(id);
    await Promise.all([mine[1]!, mine[2]!, reopened!].map((s) => s.ended));
    const next = await newCommand();
    for (let i = 0; i < MAX; i++) expect((await open(next, tokens.member)).status).to.equal(200);
  });

  it('streams of one command, opened early or late, each get every event once, in order, then the end', async () => {
    const id = await newCommand();
    const early = [await open(id, tokens.member), await open(id, tokens.owner), await open(id, tokens.owner)];
    for (let seq = 1; seq <= 10; seq++) await addEvents([id], seq);
    const late = [await open(id, tokens.member), await open(id, tokens.root)];
    for (let seq = 11; seq <= 20; seq++) await addEvents([id], seq);
    await finish(id);
    const all = [...early, ...late];
    await Promise.all(all.map((s) => s.ended));
    const expected = await jsonIds(id);
    expect(expected).to.have.length(20);
    for (const s of all) {
      expect(eventIds(s.messages)).to.deep.equal(expected);
      expect(s.messages.at(-1)!.event).to.equal('end');
    }
  });

  it('the streams of one command share one reader: 8 streams read it as often as 1 stream reads another', async () => {
    const [crowded, single] = [await newCommand(), await newCommand()];
    const crowd = [];
    for (const token of [tokens.member, tokens.owner, tokens.root]) for (let i = 0; i < MAX && crowd.length < 8; i++) crowd.push(await open(crowded, token));
    expect(crowd.map((s) => s.status)).to.deep.equal(Array(8).fill(200));
    // The third stream of root, who holds two of the crowd's.
    const alone = await open(single, tokens.root);
    expect(alone.status).to.equal(200);
    const { store, graphs } = t.server.services;
    const reads = { [crowded]: 0, [single]: 0 };
    const select = store.select.bind(store);
    store.select = (query, ...rest) => {
      for (const id of [crowded, single]) if (query.includes(`<${graphs.command(workspaceId, id)}>`)) reads[id]!++;
      return select(query, ...rest);
    };
    try {
      // One write gives both commands an event; each write is awaited until every stream has it.
      for (let seq = 1; seq <= 10; seq++) {
        await addEvents([crowded, single], seq);
        await Promise.all([...crowd, alone].map((s) => s.until((m) => eventIds(m).length >= seq)));
      }
    } finally {
      store.select = select;
    }
    expect(reads[single]).to.be.at.least(10);
    // Each stream reading for itself read the crowded command 8 times as often.
    expect(reads[crowded]).to.be.at.most(reads[single]! + 3);
  });
});
