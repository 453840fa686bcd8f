import { expect } from 'chai';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { installMatrices, supportMatrixTurtle } from '../helpers/installs.js';

const S = 'https://example.org/matrices/support';
const IAM = 'https://poliglot.io/os/spec/iam#';

interface TextContent { type: 'text'; text: string }

describe('MCP endpoint (POST /mcp/{workspace})', function () {
  this.timeout(60_000);
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  const open: Client[] = [];

  /** Connects the SDK's own client with the given headers. */
  const connect = async (headers: Record<string, string>, workspace = 'acme'): Promise<Client> => {
    const client = new Client({ name: 'wsm-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${t.url}/mcp/${workspace}`), { requestInit: { headers } });
    await client.connect(transport);
    open.push(client);
    return client;
  };

  before(async () => {
    // A generous limit: the first query waits for worker threads to start, slow on a loaded machine.
    t = await startTestServer({ WSM_QUERY_TIMEOUT_MS: '30000' });
    ({ tokens } = await seedWorkspace(t, 'acme'));
    await installMatrices(t, tokens.owner, 'acme', 'support', [{ uri: S, turtle: supportMatrixTurtle(S) }]);
    const create = async (token: string, body: Record<string, unknown>) => {
      const res = await t.http.post('/api/v1/commands/acme').set(bearer(token)).send(body);
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
    };
    await create(tokens.owner, {
      alias: 'roles-of', scriptType: 'CONSTRUCT', description: 'The roles an agent holds', interpretation: 'Each triple: agent has role',
      scriptContent: `PREFIX iam: <${IAM}> CONSTRUCT { ?agent iam:hasRole ?role } WHERE { ?agent iam:hasRole ?role }`,
      parameters: [{ name: 'agent', kind: 'iri', required: true, description: 'The agent IRI' }],
    });
    await create(tokens.member, { alias: 'team:all-roles', scriptType: 'CONSTRUCT', scriptContent: `PREFIX iam: <${IAM}> CONSTRUCT { ?r a iam:Role } WHERE { ?r a iam:Role }` });
  });
  after(async () => {
    for (const client of open) await client.close().catch(() => {});
    await t.close();
    removeDir(t.dataDir);
  });

  it('lists the workspace\'s slash commands as tools for a member, without the sparql tool', async () => {
    const client = await connect(bearer(tokens.member));
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).to.deep.equal(['roles-of', 'team_all-roles']);
    const rolesOf = tools.find((tool) => tool.name === 'roles-of')!;
    expect(rolesOf.description).to.contain('The roles an agent holds');
    expect(rolesOf.description).to.contain('Each triple: agent has role');
    expect(rolesOf.inputSchema).to.deep.include({ type: 'object', required: ['agent'] });
    expect((rolesOf.inputSchema.properties as Record<string, { type: string; description: string }>).agent).to.include({ type: 'string' });
  });

  it('calls a tool with arguments, as the caller, and answers JSON-LD text', async () => {
    const client = await connect(bearer(tokens.member));
    const result = await client.callTool({ name: 'roles-of', arguments: { agent: `${S}#TriageBot` } });
    expect(result.isError ?? false).to.equal(false);
    const content = result.content as TextContent[];
    expect(content).to.have.length(1);
    const doc = JSON.parse(content[0]!.text) as Record<string, unknown>;
    expect(doc['@context']).to.deep.equal({ iam: IAM });
    const node = (doc['@graph'] as Array<Record<string, unknown>> | undefined)?.[0] ?? doc;
    expect(node['@id']).to.equal(`${S}#TriageBot`);
    expect(node['iam:hasRole']).to.deep.equal({ '@id': `${S}#Triage` });
    // Arguments are checked as over HTTP: a bad one is a tool error the model can read.
    const bad = await client.callTool({ name: 'roles-of', arguments: { agent: 'not an iri' } });
    expect(bad.isError).to.equal(true);
    expect((bad.content as TextContent[])[0]!.text).to.match(/must be an absolute IRI/);
    const missing = await client.callTool({ name: 'roles-of', arguments: {} });
    expect(missing.isError).to.equal(true);
    const roles = await client.callTool({ name: 'team_all-roles', arguments: {} });
    expect(JSON.parse((roles.content as TextContent[])[0]!.text)['@graph']).to.have.length(3);
  });

  it('accepts an API key instead of a bearer token', async () => {
    const made = await t.http.post('/api/v1/users/me/keys').set(bearer(tokens.member)).send({ name: 'agent', expiresIn: 'SEVEN_DAYS' });
    const client = await connect({ 'X-Api-Key': made.body.data.key });
    expect((await client.listTools()).tools.map((tool) => tool.name)).to.include('roles-of');
  });

  it('refuses a non-member and a caller without credentials', async () => {
    let refused: unknown;
    try {
      await connect(bearer(tokens.outsider));
    } catch (err) {
      refused = err;
    }
    expect(String(refused)).to.match(/not found/i);
    const raw = await t.http.post('/mcp/acme').set(bearer(tokens.outsider)).send({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    expect(raw.status).to.equal(404);
    let anonymous: unknown;
    try {
      await connect({});
    } catch (err) {
      anonymous = err;
    }
    expect(String(anonymous)).to.match(/Missing Authorization header/);
    const rawAnonymous = await t.http.post('/mcp/acme').send({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    expect(rawAnonymous.status).to.equal(401);
  });

  it('keeps the sparql tool from a member, and gives it to an administrator, read-only', async () => {
    const member = await connect(bearer(tokens.member));
    let unknown: unknown;
    try {
      await member.callTool({ name: 'sparql', arguments: { query: 'SELECT * WHERE { ?s ?p ?o } LIMIT 1' } });
    } catch (err) {
      unknown = err;
    }
    expect(String(unknown)).to.match(/Unknown tool "sparql"/);

    const admin = await connect(bearer(tokens.owner));
    const { tools } = await admin.listTools();
    expect(tools.map((tool) => tool.name)).to.deep.equal(['roles-of', 'team_all-roles', 'sparql']);
    const select = await admin.callTool({ name: 'sparql', arguments: { query: `PREFIX iam: <${IAM}> SELECT ?r WHERE { ?r a iam:Role } ORDER BY ?r` } });
    const results = JSON.parse((select.content as TextContent[])[0]!.text);
    expect(results.results.bindings.map((b: { r: { value: string } }) => b.r.value)).to.deep.equal([`${S}#Responder`, `${S}#Supervisor`, `${S}#Triage`]);
    const update = await admin.callTool({ name: 'sparql', arguments: { query: 'DELETE WHERE { ?s ?p ?o }' } });
    expect(update.isError).to.equal(true);
    expect((update.content as TextContent[])[0]!.text).to.match(/updates are not allowed/);
    const stillThere = await admin.callTool({ name: 'sparql', arguments: { query: 'ASK { ?s ?p ?o }' } });
    expect(JSON.parse((stillThere.content as TextContent[])[0]!.text).boolean).to.equal(true);
  });

  it('answers a tools/call with malformed params -32602 (invalid params) with a sentence, not an internal error', async () => {
    const call = (id: number, params: unknown) => t.http.post('/mcp/acme').set(bearer(tokens.member))
      .set('Accept', 'application/json, text/event-stream').type('application/json')
      .send(JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params }));
    for (const [params, said] of [
      [{}, /params\.name must be a string/],
      [{ name: { x: 1 } }, /params\.name must be a string/],
      [{ name: 'roles-of', arguments: 'x' }, /params\.arguments must be an object/],
      [{ name: 'roles-of', arguments: [1] }, /params\.arguments must be an object/],
    ] as const) {
      const res = await call(7, params);
      expect(res.status, res.text).to.equal(200);
      expect(res.body.id).to.equal(7);
      expect(res.body.error.code, res.text).to.equal(-32602);
      expect(res.body.error.message).to.match(said);
      expect(res.body.error.message).to.not.match(/invalid_type|expected/);
    }
    // A well-formed call still runs.
    const ok = await call(8, { name: 'team_all-roles', arguments: {} });
    expect(ok.body.result.content[0].type, ok.text).to.equal('text');
  });

  it('answers a body that is not JSON with JSON-RPC\'s parse error (-32700), not the REST error envelope', async () => {
    const post = (body: string, type = 'application/json') => t.http.post('/mcp/acme').set(bearer(tokens.member))
      .set('Accept', 'application/json, text/event-stream').set('Content-Type', type).send(body);
    for (const body of ['{"jsonrpc": "2.0", "id": 1, "method": "tools/list"', 'not json', '']) {
      const res = await post(body);
      expect(res.status, body).to.equal(400);
      expect(res.body, body).to.deep.include({ jsonrpc: '2.0', id: null });
      expect(res.body.error.code, body).to.equal(-32700);
      expect(res.body.success, body).to.equal(undefined);
    }
    // Valid JSON that is no JSON-RPC message is the same parse error, as the SDK says.
    expect((await post('{"hello": 1}')).body.error.code).to.equal(-32700);
    const odd = await post('{}', 'text/plain');
    expect(odd.status).to.equal(415);
    expect(odd.body.jsonrpc).to.equal('2.0');
    const big = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { pad: 'x'.repeat(2 * 2 ** 20) } }));
    expect(big.status).to.equal(413);
    expect(big.body.jsonrpc).to.equal('2.0');
    // And a well-formed request after them is answered.
    const list = await post(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }));
    expect(list.body.result.tools.map((tool: { name: string }) => tool.name)).to.include('roles-of');
  });

  it('sends error messages without the "MCP error <code>: " prefix, so a client shows it once', async () => {
    const raw = await t.http.post('/mcp/acme').set(bearer(tokens.member)).set('Accept', 'application/json, text/event-stream')
      .type('application/json').send(JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'no-such-tool' } }));
    expect(raw.body.error).to.deep.equal({ code: -32602, message: 'Unknown tool "no-such-tool"' });
    const unknownMethod = await t.http.post('/mcp/acme').set(bearer(tokens.member)).set('Accept', 'application/json, text/event-stream')
      .type('application/json').send(JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'prompts/list' }));
    expect(unknownMethod.body.error.code).to.equal(-32601);
    expect(unknownMethod.body.error.message).to.not.match(/^MCP error/);
    const client = await connect(bearer(tokens.member));
    let failure: Error | undefined;
    try {
      await client.callTool({ name: 'no-such-tool', arguments: {} });
    } catch (err) { failure = err as Error; }
    expect(failure?.message).to.equal('MCP error -32602: Unknown tool "no-such-tool"');
  });

  it('answers 405 with Allow: POST to GET and DELETE (no server stream, no session: the endpoint is stateless)', async () => {
    for (const method of ['get', 'delete'] as const) {
      const res = await t.http[method]('/mcp/acme').set(bearer(tokens.member)).set('Accept', 'text/event-stream');
      expect(res.status).to.equal(405);
      expect(res.headers.allow).to.equal('POST');
    }
  });
});
