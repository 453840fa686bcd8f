import { expect } from 'chai';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';

/**
 * The faster paths answer exactly what the slower ones did: C5 answers the
 * record as C1 then reads it back from the store.
 */
describe('fast paths answer what the store holds', () => {
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  before(async () => {
    t = await startTestServer();
    ({ tokens } = await seedWorkspace(t, 'acme'));
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  const createAndRead = async (token: string, body: Record<string, unknown>) => {
    const created = await t.http.post('/api/v1/commands/acme').set(bearer(token)).send(body);
    expect(created.status, JSON.stringify(created.body)).to.equal(200);
    const read = await t.http.get(`/api/v1/commands/acme/${created.body.data.id}`).set(bearer(token));
    expect(read.status).to.equal(200);
    return { created: created.body.data, read: read.body.data };
  };

  it('C5 answers the record C1 reads, owner profile included', async () => {
    const { created, read } = await createAndRead(tokens.owner, {
      alias: 'fast-1', description: 'tab\there "quoted" \\ back, ünïcödé 😀', interpretation: null,
      scriptType: ' construct ', scriptContent: 'CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }',
    });
    expect(created).to.deep.equal(read);
    expect(created.owner).to.include({ username: 'acme-owner', email: 'acme-owner@example.org', firstName: 'Olive' });
    expect(created.scriptType).to.equal('CONSTRUCT');
    expect(created.interpretation).to.equal(null);
  });

  it('C5 answers what was stored when a text holds a lone surrogate', async () => {
    const { created, read } = await createAndRead(tokens.member, {
      alias: 'fast-2', description: 'half \ud800 a pair', scriptType: 'DESCRIBE', scriptContent: 'DESCRIBE <https://example.org/x>',
    });
    expect(created).to.deep.equal(read);
  });

  it('C5 still refuses an alias taken a moment before', async () => {
    const body = { alias: 'fast-3', scriptType: 'DESCRIBE', scriptContent: 'DESCRIBE <https://example.org/x>' };
    const [a, b] = await Promise.all([
      t.http.post('/api/v1/commands/acme').set(bearer(tokens.owner)).send(body),
      t.http.post('/api/v1/commands/acme').set(bearer(tokens.member)).send(body),
    ]);
    expect([a.status, b.status].sort()).to.deep.equal([200, 409]);
  });
});
