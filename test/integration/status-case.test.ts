import { expect } from 'chai';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { tinyPackage } from '../helpers/packages.js';
import { upload } from '../helpers/lifecycle.js';
import { supportMatrixTurtle } from '../helpers/installs.js';

const S = 'https://example.org/matrices/support';
const FINAL = new Set(['completed', 'failed', 'COMPLETED', 'FAILED']);

/**
 * Follows one install and one uninstall through every answer that carries a
 * command status (P2, P8, P7, P4, P5, P6, and the REDEPLOY command of an
 * extension) and returns each status seen, by where it was seen.
 */
async function statusesSeen(t: TestServer): Promise<Record<string, string[]>> {
  const { tokens } = await seedWorkspace(t, 'acme');
  const seen: Record<string, string[]> = {};
  const note = (where: string, status: string) => { (seen[where] ??= []).push(status); };
  const wait = async (id: string) => {
    for (let i = 0; i < 3000; i++) {
      const res = await t.http.get(`/api/v1/packages/acme/commands/${id}`).set(bearer(tokens.owner));
      note('P8', res.body.data.status);
      if (FINAL.has(res.body.data.status)) return res.body.data;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error('command did not finish');
  };
  const archive = await tinyPackage({ name: 'support', version: '1.0.0', matrices: [{ uri: S, turtle: supportMatrixTurtle(S), name: 'support' }] });
  const installed = await upload(t, tokens.owner, 'acme', archive);
  expect(installed.status).to.equal(202);
  note('P2', installed.body.data.status);
  await wait(installed.body.data.id);
  note('P7', (await t.http.get('/api/v1/packages/acme/support/commands').set(bearer(tokens.owner))).body.data[0].status);
  note('P4', (await t.http.get('/api/v1/packages/acme').set(bearer(tokens.owner))).body.data.items[0].latestCommand.status);
  note('P5', (await t.http.get('/api/v1/packages/acme/support').set(bearer(tokens.owner))).body.data.latestCommand.status);
  const extension = await t.http.post('/api/v1/extensions/acme').set(bearer(tokens.owner))
    .field('targetMatrix', S).attach('file', Buffer.from(`<${S}#X> <http://www.w3.org/2000/01/rdf-schema#label> "x" .`), { filename: 'x.ttl', contentType: 'text/turtle' });
  expect(extension.status, JSON.stringify(extension.body)).to.be.oneOf([200, 201, 202]);
  const redeploy = await wait(extension.body.data.lastCommandId);
  note('X', redeploy.status);
  const uninstalled = await t.http.delete('/api/v1/packages/acme/support').set(bearer(tokens.owner));
  expect(uninstalled.status).to.equal(202);
  note('P6', uninstalled.body.data.status);
  await wait(uninstalled.body.data.id);
  return seen;
}

describe('WSM_STATUS_CASE', function () {
  this.timeout(120_000);

  it('answers lower-case statuses by default', async () => {
    const t = await startTestServer();
    try {
      const seen = await statusesSeen(t);
      expect(Object.keys(seen).sort()).to.deep.equal(['P2', 'P4', 'P5', 'P6', 'P7', 'P8', 'X']);
      for (const [where, statuses] of Object.entries(seen)) {
        for (const s of statuses) expect(s, where).to.be.oneOf(['pending', 'in_progress', 'completed']);
      }
      expect(seen.P8).to.include('completed');
    } finally {
      await t.close();
      removeDir(t.dataDir);
    }
  });

  it('answers upper-case statuses everywhere with WSM_STATUS_CASE=upper, and stores them as before', async () => {
    const t = await startTestServer({ WSM_STATUS_CASE: 'upper' });
    try {
      const seen = await statusesSeen(t);
      expect(Object.keys(seen).sort()).to.deep.equal(['P2', 'P4', 'P5', 'P6', 'P7', 'P8', 'X']);
      for (const [where, statuses] of Object.entries(seen)) {
        for (const s of statuses) expect(s, where).to.be.oneOf(['PENDING', 'IN_PROGRESS', 'COMPLETED']);
      }
      expect(seen.P2).to.deep.equal(['PENDING']);
      expect(seen.P8).to.include('COMPLETED');
      // The event stream's closing message carries the status too.
      const owner = await t.token('acme-owner');
      const again = await upload(t, owner, 'acme', await tinyPackage({ name: 'again', version: '1.0.0' }));
      const stream = await fetch(`${t.url}/api/v1/packages/acme/commands/${again.body.data.id}/events`, { headers: { Accept: 'text/event-stream', ...bearer(owner) } });
      const text = await stream.text();
      expect(text).to.match(/event: end\ndata: \{"commandId":"[0-9a-f-]+","status":"COMPLETED"\}/);
      // Through the store's interface, so this holds on the remote engine too.
      const store = t.server.services.store;
      const stored = (await Promise.all((await store.graphNames()).map((g) => store.dumpGraph(g)))).join('');
      expect(stored).to.match(/<https:\/\/w3id\.org\/wsm\/ns#status>\s+"completed"/); // the engine may separate terms by tabs
      expect(stored).not.to.match(/ns#status>\s+"(COMPLETED|PENDING|IN_PROGRESS|FAILED)"/);
    } finally {
      await t.close();
      removeDir(t.dataDir);
    }
  });

  it('refuses another value at start', async () => {
    let failure: unknown;
    try {
      const t = await startTestServer({ WSM_STATUS_CASE: 'shouting' });
      await t.close();
    } catch (err) {
      failure = err;
    }
    expect(String(failure)).to.match(/WSM_STATUS_CASE="shouting"/);
  });
});
