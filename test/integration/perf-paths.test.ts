import { expect } from 'chai';
import { bearer, type TestServer, withSeededServer, type Tokens } from '../helpers/server.js';
import { sampleMatrixTurtle, tinyPackage } from '../helpers/packages.js';
import { upload, uploadAndWait, waitForCommand } from '../helpers/lifecycle.js';

/**
 * The faster paths answer exactly what the slower ones did: C5 answers the
 * record as C1 then reads it back from the store.
 */
describe('fast paths answer what the store holds', () => {
  let t: TestServer;
  let tokens: Tokens;
  withSeededServer('acme', (s) => ({ t, tokens } = s));

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

  it('P5 follows every write: a running command, an update, a matrix change, an uninstall', async () => {
    const p5 = async () => t.http.get('/api/v1/packages/acme/cached').set(bearer(tokens.member));
    expect((await p5()).status).to.equal(404);
    const first = await upload(t, tokens.owner, 'acme', await tinyPackage({ name: 'cached' }));
    expect(first.status).to.equal(202);
    expect((await p5()).status).to.equal(404); // not installed before the command completes
    const installed = await waitForCommand(t, tokens.owner, 'acme', first.body.data.id);
    let p = (await p5()).body.data;
    expect(p).to.include({ currentVersion: '1.0.0' });
    expect(p.latestCommand).to.include({ id: installed.id, status: 'completed', commandType: 'INSTALL' });
    expect(p.matrices.map((m: { name: string }) => m.name)).to.deep.equal(['main']);
    expect((await p5()).body.data).to.deep.equal(p); // read again unchanged

    const uri = (n: string) => `https://example.org/packages/cached/${n}`;
    const turtle = (n: string) => sampleMatrixTurtle(uri(n), n);
    const updated = await uploadAndWait(t, tokens.owner, 'acme', await tinyPackage({
      name: 'cached', version: '1.1.0',
      matrices: [{ name: 'main', uri: uri('main'), turtle: turtle('main') }, { name: 'second', uri: uri('second'), turtle: turtle('second') }],
    }));
    expect(updated.status, updated.errorMessage ?? '').to.equal('completed');
    p = (await p5()).body.data;
    expect(p).to.include({ currentVersion: '1.1.0' });
    expect(p.latestCommand).to.include({ id: updated.id, commandType: 'UPDATE', status: 'completed' });
    expect(p.matrices.map((m: { name: string }) => m.name)).to.deep.equal(['main', 'second']);

    const removed = await t.http.delete('/api/v1/packages/acme/cached').set(bearer(tokens.owner));
    expect(removed.status).to.equal(202);
    await waitForCommand(t, tokens.owner, 'acme', removed.body.data.id);
    expect((await p5()).status).to.equal(404);
  });

  it('answers every request, refused ones included, with its own X-Request-Id', async () => {
    const answers = await Promise.all([
      t.http.get('/api/v1/workspaces/acme').set(bearer(tokens.member)),
      t.http.get('/api/v1/workspaces/acme'),
      t.http.get('/api/v1/no-such-endpoint').set(bearer(tokens.member)),
      t.http.get('/health'),
    ]);
    expect(answers.map((a) => a.status)).to.deep.equal([200, 401, 404, 200]);
    const ids = answers.map((a) => a.headers['x-request-id']);
    for (const id of ids) expect(id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(new Set(ids).size).to.equal(ids.length);
  });
});
