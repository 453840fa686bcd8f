import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { createParser } from 'eventsource-parser';
import { bearer, type TestServer } from './server.js';

/** Command shape as answered by P8. */
export interface CommandJson {
  id: string;
  packageInstallationId: string | null;
  packageName: string;
  version: string;
  commandType: string;
  status: string;
  errorMessage: string | null;
  createdAt: string;
  updatedAt: string;
  packageInstallation: { id: string } | null;
  parentCommandId: string | null;
}

/** P2: uploads an archive. */
export function upload(t: TestServer, token: string, ws: string, archive: Buffer, query = '') {
  return t.http.post(`/api/v1/packages/${ws}/install${query}`).set(bearer(token)).attach('file', archive, { filename: 'package.tgz', contentType: 'application/gzip' });
}

/** Polls P8 until the command is completed or failed. */
export async function waitForCommand(t: TestServer, token: string, ws: string, id: string, timeoutMs = process.env.WSM_TEST_STORE === 'sparql' ? 240_000 : 60_000): Promise<CommandJson> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await t.http.get(`/api/v1/packages/${ws}/commands/${id}`).set(bearer(token));
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    const c = res.body.data as CommandJson;
    if (c.status === 'completed' || c.status === 'failed') return c;
    if (Date.now() > deadline) throw new Error(`command ${id} still ${c.status}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Uploads and waits; asserts the 202 and returns the finished command. */
export async function uploadAndWait(t: TestServer, token: string, ws: string, archive: Buffer, query = ''): Promise<CommandJson> {
  const res = await upload(t, token, ws, archive, query);
  expect(res.status, JSON.stringify(res.body)).to.equal(202);
  return waitForCommand(t, token, ws, res.body.data.id);
}

/** Events of a command (P10). */
export async function eventsOf(t: TestServer, token: string, ws: string, id: string): Promise<Array<{ level: string; message: string }>> {
  const res = await t.http.get(`/api/v1/packages/${ws}/commands/${id}/events`).set(bearer(token));
  expect(res.status).to.equal(200);
  return res.body.data;
}

/** Puts an archive into the directory registry as <publisher>/<name>/<version>.tgz. */
export function publish(t: Pick<TestServer, 'dataDir'>, publisher: string, name: string, version: string, archive: Buffer): void {
  const dir = path.join(t.dataDir, 'registry', publisher, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, `${version}.tgz`), archive);
}

/**
 * Every graph of a workspace as sorted N-Triples lines, leaving out the
 * records and logs of lifecycle commands (a failed command leaves those).
 */
export async function workspaceDump(t: TestServer, workspaceId: string): Promise<Record<string, string[]>> {
  const { store, graphs } = t.server.services;
  const prefix = graphs.workspacePrefix(workspaceId);
  const commandSubject = `<${graphs.resource('command', '')}`;
  const out: Record<string, string[]> = {};
  for (const g of (await store.graphNames()).filter((name) => name.startsWith(prefix)).sort()) {
    if (g.startsWith(`${prefix}commands/`)) continue;
    out[g] = (await store.dumpGraph(g)).split('\n').filter((l) => l && !l.startsWith(commandSubject)).sort();
  }
  return out;
}

/** Turtle of a matrix with about `triples` triples (one role, many plain statements): a slow install. */
export function bigMatrixTurtle(uri: string, triples: number): string {
  const lines = [
    '@prefix mtx: <https://poliglot.io/os/spec/matrix#> .',
    '@prefix iam: <https://poliglot.io/os/spec/iam#> .',
    '@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .',
    `<${uri}> a mtx:Matrix ; rdfs:label "Big matrix" ; rdfs:comment "Many statements." .`,
    `<${uri}#operator> a iam:Role ; rdfs:label "Operator" ; rdfs:comment "Operates." .`,
  ];
  for (let i = 0; i < Math.ceil(triples / 2); i++) lines.push(`<${uri}#item${i}> rdfs:label "Item ${i}" ; <${uri}#weight> ${i} .`);
  return lines.join('\n');
}

/** Reads a command's event stream (an answer of its `/events`) to its end: how many `event`s came, and the `end` event's data. */
export async function readEventStream(res: Response): Promise<{ events: number; end: { status: string } | undefined }> {
  let events = 0;
  let end: { status: string } | undefined;
  const parser = createParser({ onEvent: (e) => { if (e.event === 'end') end = JSON.parse(e.data) as { status: string }; else if (e.event === 'event') events++; } });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parser.feed(value);
  }
  return { events, end };
}
