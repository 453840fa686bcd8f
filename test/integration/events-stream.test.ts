import { expect } from 'chai';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { tinyPackage } from '../helpers/packages.js';
import { bigMatrixTurtle, upload, waitForCommand } from '../helpers/lifecycle.js';
import { sparql, iri, literal } from '../../src/rdf/sparql.js';
import { prefixes } from '../../src/rdf/vocab.js';
import { updateOp } from '../../src/store/store.js';

interface SseMessage { id?: string; event?: string; data: string; at: number }

/** Reads an SSE response to its end: every message (each handed to `onMessage`, awaited, as it arrives). */
async function readStream(url: string, headers: Record<string, string>, onMessage?: (m: SseMessage) => Promise<void>): Promise<{ status: number; type: string | null; messages: SseMessage[] }> {
  const res = await fetch(url, { headers: { Accept: 'text/event-stream', ...headers }, signal: AbortSignal.timeout(60_000) });
  const messages: SseMessage[] = [];
  if (!res.body) return { status: res.status, type: res.headers.get('content-type'), messages };
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) !== -1) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const message: SseMessage = { data: '', at: Date.now() };
      let hasData = false;
      for (const line of block.split('\n')) {
        if (line.startsWith(':') || line === '') continue;
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'id') message.id = value;
        else if (field === 'event') message.event = value;
        else if (field === 'data') { message.data += (hasData ? '\n' : '') + value; hasData = true; }
      }
      if (hasData) {
        messages.push(message);
        await onMessage?.(message);
      }
    }
  }
  return { status: res.status, type: res.headers.get('content-type'), messages };
}

describe('P10 as Server-Sent Events', function () {
  this.timeout(120_000);
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  const eventsUrl = (id: string) => `${t.url}/api/v1/packages/acme/commands/${id}/events`;

  before(async () => {
    t = await startTestServer();
    ({ tokens } = await seedWorkspace(t, 'acme'));
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('follows an install live from its first event to its last, then the stream ends', async () => {
    const uri = 'https://example.org/matrices/big';
    const archive = await tinyPackage({ name: 'big', version: '1.0.0', matrices: [{ uri, name: 'big', turtle: bigMatrixTurtle(uri, 20_000) }] });
    const accepted = await upload(t, tokens.owner, 'acme', archive);
    expect(accepted.status).to.equal(202);
    const id = accepted.body.data.id as string;
    // Opened right after the 202, while the command is pending: a member follows it.
    const streamed = await readStream(eventsUrl(id), bearer(tokens.member));
    expect(streamed.status).to.equal(200);
    expect(streamed.type).to.match(/^text\/event-stream/);
    const events = streamed.messages.filter((m) => m.event === 'event');
    const last = streamed.messages.at(-1)!;
    expect(last.event).to.equal('end');
    expect(last.id).to.equal(undefined);
    expect(JSON.parse(last.data)).to.deep.equal({ commandId: id, status: 'completed' });
    // Every event, in order, each with its id, as P10's JSON lists them afterwards.
    const json = await t.http.get(`/api/v1/packages/acme/commands/${id}/events`).set(bearer(tokens.member));
    expect(json.status).to.equal(200);
    expect(json.headers['content-type']).to.match(/^application\/json/);
    expect(events.map((m) => m.id)).to.deep.equal(json.body.data.map((e: { id: string }) => e.id));
    expect(events.map((m) => JSON.parse(m.data))).to.deep.equal(json.body.data);
    expect(events.length).to.be.greaterThan(2);
    // Live: the first event came well before the end, not all at once after the command finished.
    expect(events[0]!.at).to.be.below(last.at);
  });

  it('sends an event that becomes visible after a later one (a remote engine commits concurrent writes in any order)', async () => {
    const uri = 'https://example.org/matrices/late';
    const archive = await tinyPackage({ name: 'late', version: '1.0.0', matrices: [{ uri, name: 'late', turtle: bigMatrixTurtle(uri, 20_000) }] });
    const id = (await upload(t, tokens.owner, 'acme', archive)).body.data.id as string;
    const store = t.server.services.store;
    let lateId: string | null = null;
    const streamed = await readStream(eventsUrl(id), bearer(tokens.owner), async (m) => {
      if (m.event !== 'event' || lateId !== null) return;
      // Once the stream has sent the first event: an event ordered before it (sequence 0) lands in the command's graph.
      const first = JSON.parse(m.data) as { id: string };
      const [row] = await store.select(sparql`${prefixes}SELECT ?g ?c WHERE { GRAPH ?g { ?e wsm:id ${literal(first.id)} ; wsm:command ?c } }`);
      const graph = row!.g!.value;
      lateId = `late-${id}`;
      await store.write([updateOp(sparql`${prefixes}INSERT DATA { GRAPH ${iri(graph)} {
        <urn:x-test:late-event> a wsm:CommandEvent ; wsm:id ${literal(lateId)} ; wsm:command ${iri(row!.c!.value)} ;
          wsm:message "written late" ; wsm:level "INFO" ; wsm:sequence 0 ; wsm:createdAt "2026-01-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> } }`, [graph])]);
    });
    expect(lateId).to.not.equal(null);
    const json = (await t.http.get(`/api/v1/packages/acme/commands/${id}/events`).set(bearer(tokens.owner))).body.data as Array<{ id: string }>;
    expect(json[0]!.id).to.equal(lateId);
    const sent = streamed.messages.filter((m) => m.event === 'event').map((m) => m.id);
    // Each event once, the late one included (after those already sent), and the end last.
    expect([...sent].sort()).to.deep.equal(json.map((e) => e.id).sort());
    expect(sent.indexOf(lateId!)).to.be.greaterThan(0);
    expect(streamed.messages.at(-1)!.event).to.equal('end');
  });

  it('resumes after Last-Event-ID, and ends at once for a finished command', async () => {
    const archive = await tinyPackage({ name: 'small', version: '1.0.0' });
    const accepted = await upload(t, tokens.owner, 'acme', archive);
    const id = accepted.body.data.id as string;
    await waitForCommand(t, tokens.owner, 'acme', id);
    const all = (await t.http.get(`/api/v1/packages/acme/commands/${id}/events`).set(bearer(tokens.owner))).body.data as Array<{ id: string }>;
    expect(all.length).to.be.greaterThan(2);
    const resumed = await readStream(eventsUrl(id), { ...bearer(tokens.owner), 'Last-Event-ID': all[1]!.id });
    expect(resumed.messages.filter((m) => m.event === 'event').map((m) => m.id)).to.deep.equal(all.slice(2).map((e) => e.id));
    expect(resumed.messages.at(-1)!.event).to.equal('end');
    const fromLast = await readStream(eventsUrl(id), { ...bearer(tokens.owner), 'Last-Event-ID': all.at(-1)!.id });
    expect(fromLast.messages.map((m) => m.event)).to.deep.equal(['end']);
  });

  it('answers errors as JSON before any stream: 404 for an unknown command, 404 for outsiders, 401 without a token', async () => {
    const unknown = await fetch(eventsUrl('6f1c7a3e-8a7c-4e1f-9d2a-0b7e5f4c3d21'), { headers: { Accept: 'text/event-stream', ...bearer(tokens.member) } });
    expect(unknown.status).to.equal(404);
    expect(((await unknown.json()) as { success: boolean }).success).to.equal(false);
    const archive = await tinyPackage({ name: 'other', version: '1.0.0' });
    const id = (await upload(t, tokens.owner, 'acme', archive)).body.data.id as string;
    const outsider = await fetch(eventsUrl(id), { headers: { Accept: 'text/event-stream', ...bearer(tokens.outsider) } });
    expect(outsider.status).to.equal(404);
    const anonymous = await fetch(eventsUrl(id), { headers: { Accept: 'text/event-stream' } });
    expect(anonymous.status).to.equal(401);
    await waitForCommand(t, tokens.owner, 'acme', id);
  });
});
