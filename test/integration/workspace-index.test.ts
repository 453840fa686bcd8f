import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { bearer, removeDir, seedWorkspace, startTestServer, tempDir, type TestServer } from '../helpers/server.js';
import { iri, sparql } from '../../src/rdf/sparql.js';
import { updateOp } from '../../src/store/store.js';

/**
 * The index of workspaces (src/workspaces/workspace-index.ts): a store
 * written before it (no `<base>index` graph) gets it at its next start,
 * built from every workspace, so users' lists and the recovery of
 * interrupted commands answer as they did.
 */
describe('the index of workspaces', function () {
  this.timeout(120_000);

  it('is built at start on a store written without it: members\' lists and interrupted commands as before', async () => {
    const dataDir = tempDir();
    let t: TestServer = await startTestServer({}, dataDir);
    try {
      const a = await seedWorkspace(t, 'alpha');
      const b = await seedWorkspace(t, 'beta');
      const multi = await t.token('multi');
      for (const [slug, owner] of [['alpha', a.tokens.owner], ['beta', b.tokens.owner]] as const) {
        expect((await t.http.put(`/api/v1/workspaces/${slug}/members/multi`).set(bearer(owner)).send({})).status).to.equal(200);
      }
      const list = async (token: string) => ((await t.http.get('/api/v1/workspaces').set(bearer(token))).body.data as Array<{ slug: string }>).map((w) => w.slug);
      expect(await list(multi)).to.deep.equal(['alpha', 'beta']);
      // A command left pending by a process that stopped, then the store as a version without the index left it.
      const { store, graphs, packages } = t.server.services;
      const commandId = randomUUID();
      await store.write([packages.commands.createOp({
        workspaceId: b.workspace.id, id: commandId, packageName: 'left-behind', version: '1.0.0', commandType: 'INSTALL', packageInstallationId: null, now: new Date().toISOString(),
      })]);
      await store.write([updateOp(sparql`DROP SILENT GRAPH ${iri(graphs.index)}`, [graphs.index])]);
      await t.close();

      t = await startTestServer({}, dataDir);
      expect(await list(multi)).to.deep.equal(['alpha', 'beta']);
      expect(await list(a.tokens.owner)).to.deep.equal(['alpha']);
      expect(await list(a.tokens.outsider)).to.deep.equal([]);
      const command = await t.http.get(`/api/v1/packages/beta/commands/${commandId}`).set(bearer(b.tokens.owner));
      expect(command.body.data.status).to.equal('failed');
      expect(command.body.data.errorMessage).to.match(/interrupted/i);
      // Removing a member after the rebuild: the list follows.
      expect((await t.http.delete('/api/v1/workspaces/alpha/members/multi').set(bearer(a.tokens.owner))).status).to.equal(200);
      expect(await list(multi)).to.deep.equal(['beta']);
    } finally {
      await t.close();
      removeDir(dataDir);
    }
  });
});
