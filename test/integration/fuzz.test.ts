import { expect } from 'chai';
import fc from 'fast-check';
import type { Response } from 'superagent';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { bearer, removeDir, seedWorkspace, startTestServer, tempDir, type TestServer } from '../helpers/server.js';
import { tinyPackage, sampleMatrixTurtle } from '../helpers/packages.js';
import { upload, uploadAndWait, waitForCommand } from '../helpers/lifecycle.js';
import { installMatrices } from '../helpers/installs.js';

/**
 * Issue 12, acceptance 10: a property-based fuzz test over every endpoint of
 * the OpenAPI document (path parameters, query parameters, JSON and
 * multipart bodies), bounded in runs and time; the MCP endpoint (JSON-RPC
 * messages and tool calls) and the registry (generated archives) get inputs
 * of their own as well. Whatever is sent: no 5xx, and
 * every 4xx carries the error envelope. The cases of issue 12 item 12 are
 * among its seeds, and are also checked one by one below.
 */
interface Operation {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  path: string;
  pathParams: string[];
  queryParams: string[];
  json: { properties: string[] } | null;
  multipart: { fields: string[] } | null;
  text: boolean;
}

const RUNS_PER_OPERATION = Number(process.env.FUZZ_RUNS ?? 15);
const TIME_BUDGET_MS = 45_000;

/** Percent-encodes a string as UTF-8, a lone surrogate as the bytes a careless encoder would write (ED A0 80). */
function encodeSegment(value: string): string {
  let out = '';
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code >= 0xd800 && code <= 0xdbff && i + 1 < value.length && value.charCodeAt(i + 1) >= 0xdc00 && value.charCodeAt(i + 1) <= 0xdfff) {
      out += encodeURIComponent(value.slice(i, i + 2));
      i++;
    } else if (code >= 0xd800 && code <= 0xdfff) {
      out += `%${(0xe0 | (code >> 12)).toString(16).toUpperCase()}%${(0x80 | ((code >> 6) & 0x3f)).toString(16).toUpperCase()}%${(0x80 | (code & 0x3f)).toString(16).toUpperCase()}`;
    } else {
      out += encodeURIComponent(value[i]!);
    }
  }
  return out;
}

/** Raw path segments (already encoded, sent as they are): the seeds of issue 12 and the real names. */
const RAW_SEGMENTS = ['acme', '%ED%A0%80', '%zz', '%', '%00', '..', '%2F', '%2e%2e', 'x'.repeat(3000), '00000000-0000-4000-8000-000000000000'];
const QUERY_VALUES = ['0', '-1', '1', '100', '101', '4294967296', '99999999999999999999', '1e3', '1.5', 'abc', '%zz', '', 'true', 'http://a/%zz', '\uD800'];

function segment(): fc.Arbitrary<string> {
  return fc.oneof(
    fc.constantFrom(...RAW_SEGMENTS),
    fc.string({ maxLength: 40 }).filter((s) => s.length > 0).map(encodeSegment),
    fc.uuid(),
  );
}

function jsonValue(): fc.Arbitrary<unknown> {
  return fc.oneof(
    fc.string({ maxLength: 30 }), fc.constantFrom('\uD800', 'http://a/%zz', '', '>=1.0 <2.0', 'CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }'),
    fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
    fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 }), { maxKeys: 3 }),
  );
}

/** Query text for MCP's sparql tool: ordinary, refused (updates, syntax), deeply nested, over the size bound. */
function sparqlText(): fc.Arbitrary<string> {
  return fc.oneof(
    fc.string({ maxLength: 100 }),
    fc.constantFrom('SELECT * WHERE { ?s ?p ?o } LIMIT 3', 'ASK {}', 'CONSTRUCT WHERE { ?s ?p ?o }', 'DESCRIBE <https://example.org/m/plain>',
      'DELETE WHERE { ?s ?p ?o }', 'SELECT * WHERE { ?s ?p }', 'DESCRIBE <http://a/%zz>', '\uD800', '', '# only a comment',
      `SELECT * WHERE { ?s ?p ?o } # ${'x'.repeat(300 * 1024)}`),
    fc.integer({ min: 1, max: 20_000 }).map((n) => `SELECT * WHERE ${'{'.repeat(n)} ?s ?p ?o ${'}'.repeat(n)}`),
    fc.integer({ min: 1, max: 5_000 }).map((n) => `SELECT * WHERE { FILTER (${'('.repeat(n)}1`),
  );
}

/** A JSON-RPC message (or batch, or not one at all) for the MCP endpoint. */
function mcpMessage(): fc.Arbitrary<unknown> {
  const args = fc.oneof(
    fc.record({ query: fc.oneof(sparqlText(), jsonValue()) }),
    fc.record({ agent: fc.oneof(fc.constantFrom('https://example.org/m/plain#review-bot', 'not an iri', 'http://a/%zz', '\uD800'), jsonValue()) }, { requiredKeys: [] }),
    fc.dictionary(fc.string({ maxLength: 8 }), jsonValue(), { maxKeys: 3 }),
    jsonValue(),
  );
  const params = fc.oneof(
    fc.record({ name: fc.oneof(fc.constantFrom('sparql', 'listed', 'nope', ''), jsonValue()), arguments: args }, { requiredKeys: ['name'] }),
    fc.record({ protocolVersion: fc.constantFrom('2025-03-26', '2025-06-18', 'x'), capabilities: jsonValue(), clientInfo: jsonValue() }, { requiredKeys: [] }),
    jsonValue(),
  );
  const message = fc.record({
    jsonrpc: fc.constantFrom('2.0', '2.0', '1.0', 2),
    id: fc.oneof(fc.integer(), fc.string({ maxLength: 10 }), fc.constant(null), fc.constant({})),
    method: fc.oneof(fc.constantFrom('tools/call', 'tools/call', 'tools/list', 'initialize', 'ping', 'notifications/initialized', 'resources/list'), fc.string({ maxLength: 12 })),
    params,
  }, { requiredKeys: ['jsonrpc', 'method'] });
  return fc.oneof(message, message, fc.array(message, { minLength: 1, maxLength: 3 }), jsonValue());
}

const RESERVED_GRAPH = 'https://workspaces.local/registry';
/** Matrix URIs a publish may declare: fresh, another publisher's, the service's own, malformed. */
const PUBLISH_URIS = ['https://example.org/fz/main', 'https://example.org/fz/other', 'https://example.org/m/plain', RESERVED_GRAPH, 'https://w3id.org/wsm/ns#Matrix', 'http://a/%zz'];

interface PublishCase {
  publisher: string;
  name: string;
  version: string;
  manifestName: string | null;
  uri: string;
  turtle: 'valid' | 'broken' | 'reserved' | 'nested' | 'control' | 'empty';
  raw: Uint8Array | null;
  dryRun: boolean;
}

function turtleOf(kind: PublishCase['turtle'], uri: string): string {
  const valid = sampleMatrixTurtle(uri.includes('%') ? 'https://example.org/fz/main' : uri).replaceAll('https://example.org/fz/main', uri);
  switch (kind) {
    case 'valid': return valid;
    case 'broken': return '<a> <b> .';
    case 'reserved': return `${valid}\n<${uri}#x> a <https://w3id.org/wsm/ns#LifecycleCommand> .\n<https://workspaces.local/workspaces/x> <${uri}#p> "x" .\n`;
    case 'nested': return `${valid}\n<${uri}#x> <${uri}#p> ${'[ <http://p> '.repeat(2_000)}"x"${' ]'.repeat(2_000)} .\n`;
    case 'control': return `${valid}\n<${uri}#x> <${uri}#p> "a\u0000b\u0007c" .\n`;
    case 'empty': return '';
  }
}

/** Mostly well-formed publishes (so the deeper checks run), some not. */
function publishCase(): fc.Arbitrary<PublishCase> {
  return fc.record({
    publisher: fc.constantFrom('fz', 'fz', 'fz', 'fz-b', 'fz-b', 'nosuch', 'Bad Slug'),
    name: fc.constantFrom('fz', 'fz', 'fz-two', 'fz-two', 'Bad Name', 'x'.repeat(80)),
    version: fc.constantFrom('1.0.0', '1.0.1', '2.0.0', 'banana'),
    manifestName: fc.oneof({ arbitrary: fc.constant(null), weight: 4 }, { arbitrary: fc.constantFrom('fz', 'other'), weight: 1 }),
    uri: fc.constantFrom(...PUBLISH_URIS),
    turtle: fc.constantFrom('valid', 'valid', 'valid', 'broken', 'reserved', 'nested', 'control', 'empty'),
    raw: fc.oneof({ arbitrary: fc.constant(null), weight: 5 }, { arbitrary: fc.uint8Array({ maxLength: 300 }), weight: 1 }),
    dryRun: fc.boolean(),
  });
}

/** Cases every run holds: a publish that passes, one taking the other publisher's URI, and ones using the service's IRIs. */
const PUBLISH_EXAMPLES: PublishCase[] = [
  { publisher: 'fz', name: 'fz', version: '1.0.0', manifestName: null, uri: 'https://example.org/fz/main', turtle: 'valid', raw: null, dryRun: false },
  { publisher: 'fz-b', name: 'fz', version: '1.0.0', manifestName: null, uri: 'https://example.org/fz/main', turtle: 'valid', raw: null, dryRun: false },
  { publisher: 'fz', name: 'fz-two', version: '1.0.0', manifestName: null, uri: RESERVED_GRAPH, turtle: 'valid', raw: null, dryRun: false },
  { publisher: 'fz', name: 'fz-two', version: '1.0.0', manifestName: null, uri: 'https://example.org/fz/other', turtle: 'reserved', raw: null, dryRun: true },
];

function operationsOf(doc: { paths: Record<string, Record<string, Record<string, unknown>>> }): Operation[] {
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of ['get', 'post', 'put', 'patch', 'delete'] as const) {
      const op = item[method] as { parameters?: Array<{ name: string; in: string }>; requestBody?: { content: Record<string, { schema?: { properties?: Record<string, unknown> } }> } } | undefined;
      if (!op) continue;
      const content = op.requestBody?.content ?? {};
      const props = (media: string) => Object.keys(content[media]?.schema?.properties ?? {});
      ops.push({
        method, path,
        pathParams: (op.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name),
        queryParams: (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name),
        json: content['application/json'] ? { properties: props('application/json') } : null,
        multipart: content['multipart/form-data'] ? { fields: props('multipart/form-data') } : null,
        text: Object.keys(content).some((m) => m !== 'application/json' && m !== 'multipart/form-data'),
      });
    }
  }
  return ops;
}

interface Case {
  segments: string[];
  query: Array<[string, string]>;
  json: unknown;
  multipart: { fields: Array<[string, string]>; file: { name: string; bytes: Uint8Array } | null } | null;
  text: string | null;
  asRoot: boolean;
}

function caseOf(op: Operation): fc.Arbitrary<Case> {
  const propertyNames = op.json?.properties.length ? fc.constantFrom(...op.json.properties) : fc.string({ maxLength: 8 });
  const multipartFields = op.multipart?.fields ?? [];
  return fc.record({
    segments: fc.tuple(...op.pathParams.map(() => segment())) as fc.Arbitrary<string[]>,
    query: fc.array(fc.tuple(
      op.queryParams.length ? fc.constantFrom(...op.queryParams, 'page', 'pageSize') : fc.constantFrom('page', 'x'),
      fc.oneof(fc.constantFrom(...QUERY_VALUES), fc.string({ maxLength: 20 })),
    ), { maxLength: 3 }),
    json: fc.oneof(
      fc.dictionary(propertyNames, jsonValue(), { maxKeys: 5 }),
      jsonValue(),
    ),
    multipart: op.multipart
      ? fc.record({
        fields: fc.array(fc.tuple(fc.constantFrom('', 'targetMatrix', 'label', 'x', ...multipartFields), fc.oneof(fc.constantFrom('http://a/%zz', '', '\uD800'), fc.string({ maxLength: 20 }))), { maxLength: 3 }),
        file: fc.option(fc.record({ name: fc.constantFrom('file', '', 'other'), bytes: fc.uint8Array({ maxLength: 200 }) }), { nil: null }),
      })
      : fc.constant(null),
    text: op.text ? fc.oneof(fc.string({ maxLength: 100 }), fc.constantFrom('SELECT * WHERE { ?s ?p ?o }', `SELECT * WHERE ${'{'.repeat(200)}`)) : fc.constant(null),
    asRoot: fc.boolean(),
  });
}

function checkAnswer(res: Response, label: string): void {
  expect(res.status, `${label} -> ${res.status} ${res.text?.slice(0, 300)}`).to.be.lessThan(500);
  if (res.status >= 400 && / \/mcp\//.test(label) && res.body?.jsonrpc === '2.0') {
    // The MCP endpoint speaks JSON-RPC: once a caller is through access, the SDK's transport answers its
    // own protocol errors (a wrong Accept, a malformed message) as JSON-RPC error objects, which MCP clients read.
    expect(res.body.error?.code, label).to.be.a('number');
    expect(res.body.error?.message, label).to.be.a('string').and.not.equal('');
    return;
  }
  if (res.status >= 400) {
    expect(res.body?.success, `${label}: ${res.text?.slice(0, 300)}`).to.equal(false);
    expect(res.body.error.code, label).to.be.a('string').and.match(/^[A-Z_]+$/);
    expect(res.body.error.message, label).to.be.a('string').and.not.equal('');
    expect(res.body.error.message.length, label).to.be.lessThan(2100);
    expect(res.body.error.message, label).to.not.match(/unexpected error occurred/);
  }
}

describe('Fuzz: every endpoint, bounded, answers no 5xx and the envelope on every 4xx', function () {
  this.timeout(180_000);
  let t: TestServer;
  let tokens: { root: string; owner: string; member: string; outsider: string };
  let ops: Operation[];
  let keyDir: string;

  before(async () => {
    // With a secrets key: the secrets routes are fuzzed with values on (without one they answer 503 by design).
    keyDir = tempDir('wsm-fuzz-key-');
    writeFileSync(path.join(keyDir, 'secrets.key'), `${randomBytes(32).toString('base64')}\n`);
    t = await startTestServer({ WSM_QUERY_TIMEOUT_MS: '3000', WSM_SECRETS_KEY_FILE: path.join(keyDir, 'secrets.key') });
    ({ tokens } = await seedWorkspace(t, 'acme'));
    await installMatrices(t, tokens.owner, 'acme', 'plain', [{ uri: 'https://example.org/m/plain', turtle: sampleMatrixTurtle('https://example.org/m/plain') }]);
    ops = operationsOf((await t.http.get('/api/v1/openapi.json')).body);
    expect(ops.length).to.be.greaterThan(25);
  });

  after(async () => {
    await t.close();
    removeDir(t.dataDir);
    removeDir(keyDir);
  });

  function send(op: Operation, c: Case) {
    let i = 0;
    const path = op.path.replace(/\{[^}]+\}/g, () => c.segments[i++] ?? 'x');
    const qs = c.query.map(([k, v]) => `${encodeURIComponent(k)}=${encodeSegment(v)}`).join('&');
    const url = qs ? `${path}?${qs}` : path;
    let req = t.http[op.method](url).set(bearer(c.asRoot ? tokens.root : tokens.owner));
    if (c.multipart) {
      for (const [name, value] of c.multipart.fields) req = req.field(name, value);
      if (c.multipart.file) req = req.attach(c.multipart.file.name, Buffer.from(c.multipart.file.bytes), { filename: 'f.bin', contentType: 'application/octet-stream' });
    } else if (op.json) {
      req = req.type('application/json').send(JSON.stringify(c.json ?? null));
    } else if (c.text !== null) {
      req = req.type('application/sparql-query').send(c.text);
    }
    return { req, label: `${op.method.toUpperCase()} ${url.slice(0, 200)}` };
  }

  it('holds for generated path, query, JSON and multipart inputs of every operation', async () => {
    const deadline = Date.now() + TIME_BUDGET_MS;
    let cases = 0;
    const reached = new Set<string>();
    // The MCP and registry operations first: the time budget reaches them whatever the machine.
    const first = (op: Operation) => (/^\/mcp\/|^\/api\/v1\/registry\//.test(op.path) ? 0 : 1);
    for (const op of [...ops].sort((a, b) => first(a) - first(b))) {
      // An operation begun with next to no time left would be interrupted before its first case, which fast-check reports as a failure.
      if (deadline - Date.now() < 2_000) break;
      await fc.assert(fc.asyncProperty(caseOf(op), async (c) => {
        const { req, label } = send(op, c);
        checkAnswer(await req, label);
        reached.add(`${op.method} ${op.path}`);
        cases++;
      }), { numRuns: RUNS_PER_OPERATION, endOnFailure: true, interruptAfterTimeLimit: Math.max(1, deadline - Date.now()) });
    }
    expect(cases).to.be.greaterThan(ops.length);
    const mcpAndRegistry = ops.filter((op) => first(op) === 0).map((op) => `${op.method} ${op.path}`);
    expect(mcpAndRegistry.length).to.be.greaterThan(10);
    expect(mcpAndRegistry.filter((op) => !reached.has(op)), 'MCP and registry operations the fuzz did not reach').to.deep.equal([]);
  });

  describe('MCP and registry routes, with inputs of their own', () => {
    /**
     * No 5xx, the envelope or a JSON-RPC error; and a tools/call (checked by the service itself) is never
     * answered -32603 (internal error). Other methods' params are checked by the SDK, which answers a
     * malformed `initialize` or `tools/list` -32603 with its schema's issues (left to the protocol layer's own work).
     */
    const checkMcp = (res: Response, label: string, message: unknown) => {
      checkAnswer(res, label);
      if ((message as { method?: unknown } | null)?.method !== 'tools/call') return;
      const answers = Array.isArray(res.body) ? res.body : [res.body];
      for (const answer of answers) {
        if (answer && typeof answer === 'object' && 'error' in answer && (answer as { jsonrpc?: unknown }).jsonrpc === '2.0') {
          expect((answer as { error: { code: number } }).error.code, `${label}: ${res.text.slice(0, 300)}`).to.not.equal(-32603);
        }
      }
    };

    it('POST /mcp/{workspace}: JSON-RPC messages, batches and tool calls (sparql queries nested 20,000 deep among them) answer no 5xx and no internal error', async () => {
      const created = await t.http.post('/api/v1/commands/acme').set(bearer(tokens.owner)).send({
        alias: 'listed', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT { ?agent ?p ?o } WHERE { ?agent ?p ?o }',
        parameters: [{ name: 'agent', kind: 'iri', required: false }],
      });
      expect(created.status, created.text).to.equal(200);
      const caller = fc.constantFrom('owner', 'member', 'outsider') as fc.Arbitrary<'owner' | 'member' | 'outsider'>;
      const accept = fc.constantFrom('application/json, text/event-stream', 'application/json, text/event-stream', 'application/json', 'text/plain');
      await fc.assert(fc.asyncProperty(mcpMessage(), caller, accept, fc.constantFrom('acme', 'acme', 'nosuch', '%ED%A0%80'), async (message, who, accepts, workspace) => {
        const res = await t.http.post(`/mcp/${workspace}`).set(bearer(tokens[who])).set('Accept', accepts).type('application/json').send(JSON.stringify(message));
        checkMcp(res, `POST /mcp/${workspace} as ${who}: ${JSON.stringify(message).slice(0, 200)}`, message);
      }), { numRuns: 4 * RUNS_PER_OPERATION, endOnFailure: true });
      // A tool call the fuzz may not have hit exactly: the 20,000-deep query is a tool error.
      const deep = await t.http.post('/mcp/acme').set(bearer(tokens.owner)).set('Accept', 'application/json, text/event-stream').type('application/json')
        .send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'sparql', arguments: { query: `SELECT * WHERE ${'{'.repeat(20_000)} ?s ?p ?o ${'}'.repeat(20_000)}` } } }));
      expect(deep.body.result.isError, deep.text.slice(0, 300)).to.equal(true);
    });

    it('registry publish, yank, unyank and resolve: generated archives (reserved IRIs, taken URIs, broken Turtle, bytes) answer no 5xx', async () => {
      for (const slug of ['fz', 'fz-b']) {
        const made = await t.http.post('/api/v1/registry/publishers').set(bearer(tokens.root)).send({ slug, owners: ['acme-owner'] });
        expect(made.status, made.text).to.equal(201);
      }
      const statuses = new Set<number>();
      await fc.assert(fc.asyncProperty(publishCase(), async (c) => {
        const archive = c.raw ? Buffer.from(c.raw) : await tinyPackage({
          name: c.name, version: c.version,
          ...(c.manifestName ? { manifest: { name: c.manifestName, version: c.version, engineVersion: '>=1.0 <2.0', matrices: [{ name: 'main', path: 'main/assembly.ttl', uri: c.uri }] } } : {}),
          matrices: [{ name: 'main', uri: c.uri, turtle: turtleOf(c.turtle, c.uri) }],
        });
        const base = `/api/v1/registry/publishers/${encodeSegment(c.publisher)}/packages/${encodeSegment(c.name)}/versions`;
        const res = await t.http.post(`${base}${c.dryRun ? '?dryRun=true' : ''}`).set(bearer(tokens.owner))
          .attach('file', archive, { filename: 'p.tgz', contentType: 'application/gzip' });
        checkAnswer(res, `publish ${JSON.stringify({ ...c, raw: c.raw ? c.raw.length : null })}`);
        statuses.add(res.status);
        if (res.status === 409 && /matrix URI/.test(res.body.error.message)) expect(res.body.error.message).to.not.match(/fz-b|"fz"|acme-owner/);
        for (const action of ['yank', 'unyank']) {
          const answer = await t.http.post(`${base}/${encodeSegment(c.version)}/${action}`).set(bearer(tokens.owner)).send(action === 'yank' ? { reason: c.name, force: c.dryRun } : {});
          checkAnswer(answer, `${action} ${c.publisher}/${c.name} ${c.version}`);
        }
        const resolved = await t.http.get(`/api/v1/registry/resolve?uri=${encodeSegment(c.uri)}`);
        checkAnswer(resolved, `resolve ${c.uri}`);
      }), { numRuns: 3 * RUNS_PER_OPERATION, endOnFailure: true, examples: PUBLISH_EXAMPLES.map((c) => [c]) });
      expect([...statuses], 'the statuses of the publishes').to.include.members([201, 409, 422]);
      // Nothing the fuzz sent published a package using the service's own IRIs.
      expect((await t.http.get(`/api/v1/registry/resolve?uri=${encodeURIComponent(RESERVED_GRAPH)}`)).status).to.equal(404);
    });
  });

  describe('the cases of issue 12, item 12', () => {
    it('an empty multipart field name is a 4xx with the envelope', async () => {
      const res = await t.http.post('/api/v1/packages/acme/install').set(bearer(tokens.owner)).field('', 'x')
        .attach('file', await tinyPackage({ name: 'empty-field' }), { filename: 'p.tgz', contentType: 'application/gzip' });
      checkAnswer(res, 'empty field name');
      const ext = await t.http.post('/api/v1/extensions/acme').set(bearer(tokens.owner)).field('', 'x').field('targetMatrix', 'https://example.org/m/plain')
        .attach('file', Buffer.from('<https://example.org/m/plain#a> <https://example.org/p> "x" .'), { filename: 'x.ttl', contentType: 'text/turtle' });
      checkAnswer(ext, 'empty field name (X5)');
    });

    it('an undecodable %ED%A0%80 in a path parameter is a 4xx', async () => {
      for (const path of ['/api/v1/workspaces/%ED%A0%80', '/api/v1/packages/acme/%ED%A0%80', '/api/v1/commands/acme/%ED%A0%80', '/api/v1/iam/acme/roles/%ED%A0%80', '/api/v1/workspaces/acme/members/%ED%A0%80']) {
        const res = await t.http.get(path).set(bearer(tokens.owner));
        checkAnswer(res, path);
        expect(res.status).to.be.within(400, 499);
      }
      const put = await t.http.put('/api/v1/workspaces/acme/members/%ED%A0%80').set(bearer(tokens.owner)).send({});
      checkAnswer(put, 'PUT member %ED%A0%80');
    });

    it('page times pageSize past 2^32 is a 4xx or an empty page, never a 5xx', async () => {
      for (const query of ['page=4294967296&pageSize=100', 'page=42949673&pageSize=100', 'page=99999999999999999999']) {
        for (const path of ['/api/v1/packages/acme', '/api/v1/iam/acme/users', '/api/v1/iam/acme/roles', '/api/v1/iam/acme/agents']) {
          const res = await t.http.get(`${path}?${query}`).set(bearer(tokens.owner));
          checkAnswer(res, `${path}?${query}`);
        }
      }
      const p7 = await t.http.get('/api/v1/packages/acme/plain/commands?page=4294967296&size=100').set(bearer(tokens.owner));
      checkAnswer(p7, 'P7 page');
    });

    it('a lone surrogate in a token\'s user name is a 401, in a workspace owner a 4xx', async () => {
      const token = await t.token('bad\uD800name');
      const res = await t.http.get('/api/v1/workspaces').set(bearer(token));
      checkAnswer(res, 'lone surrogate username');
      expect(res.status).to.equal(401);
      const owner = await t.http.post('/api/v1/workspaces').set(bearer(tokens.root)).send({ slug: 'surrogate', owner: 'x\uD800' });
      checkAnswer(owner, 'lone surrogate owner');
      expect(owner.status).to.be.within(400, 499);
    });

    it('an X5 targetMatrix with %zz is a 4xx', async () => {
      const res = await t.http.post(`/api/v1/extensions/acme?targetMatrix=${encodeURIComponent('http://a/%zz')}`).set(bearer(tokens.owner))
        .attach('file', Buffer.from('<http://a/x> <http://a/p> "x" .'), { filename: 'x.ttl', contentType: 'text/turtle' });
      checkAnswer(res, 'targetMatrix %zz');
      expect(res.status).to.be.within(400, 499);
    });

    it('a manifest URI with %zz is a 4xx or a failed command naming the IRI', async () => {
      const uri = 'http://a/%zz';
      const archive = await tinyPackage({ name: 'zz', matrices: [{ name: 'main', uri, turtle: sampleMatrixTurtle('https://example.org/zz').replace('<https://example.org/zz>', `<${uri}>`) }] });
      const res = await upload(t, tokens.owner, 'acme', archive);
      checkAnswer(res, 'manifest %zz');
      if (res.status === 202) {
        const command = await waitForCommand(t, tokens.owner, 'acme', res.body.data.id);
        expect(command.status).to.equal('failed');
        expect(command.errorMessage).to.include(uri);
        expect(command.errorMessage).to.not.match(/internal error/i);
      } else {
        expect(res.body.error.message).to.include(uri);
      }
    });

    it('a token without exp is a 401; a 1 MB body is not quoted back whole; 431 has the envelope', async () => {
      const { SignJWT } = await import('jose');
      const { loadIssuerKey } = await import('../../src/auth/tokens.js');
      const { privateKey } = await loadIssuerKey(t.dataDir);
      const noExp = await new SignJWT({ preferred_username: 'acme-owner' }).setProtectedHeader({ alg: 'ES256' })
        .setIssuer('urn:wsm:embedded-issuer').setAudience('wsm').setIssuedAt().sign(privateKey);
      const res = await t.http.get('/api/v1/workspaces').set(bearer(noExp));
      expect(res.status, JSON.stringify(res.body)).to.equal(401);
      expect(res.body.error.message).to.include('exp');
      const big = 'x'.repeat(1000 * 1000);
      for (const [path, body] of [
        ['/api/v1/commands/acme', { alias: big, scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT WHERE { ?s ?p ?o }' }],
        ['/api/v1/commands/acme', { alias: 'ok', scriptType: 'CONSTRUCT', scriptContent: `CONSTRUCT WHERE { ?s ?p ${big} }` }],
        ['/api/v1/workspaces', { slug: big }],
      ] as const) {
        const answer = await t.http.post(path).set(bearer(tokens.root)).send(body);
        checkAnswer(answer, path);
        expect(answer.text.length).to.be.lessThan(5000);
      }
      const headers = await t.http.get('/api/v1/workspaces').set(bearer(tokens.owner)).set('X-Big', 'y'.repeat(64 * 1024)).ok(() => true)
        .catch((err: { response?: Response }) => err.response!);
      expect(headers.status).to.equal(431);
      expect(headers.body).to.deep.include({ success: false });
      expect(headers.body.error.code).to.equal('REQUEST_HEADER_FIELDS_TOO_LARGE');
    });
  });

  describe('cases found by attacking the service (2026-11-29)', () => {
    it('a body that does not decode as its Content-Encoding says is a 400 naming the encoding, and changes nothing', async () => {
      const { gzipSync } = await import('node:zlib');
      const cut = gzipSync(Buffer.from(JSON.stringify({ slug: 'never-made' }))).subarray(0, 12);
      for (const [encoding, body] of [['gzip', Buffer.from('{}')], ['deflate', Buffer.from('{}')], ['br', Buffer.from('{}')], ['gzip', cut]] as const) {
        const res = await t.http.post('/api/v1/workspaces').set(bearer(tokens.root)).set('Content-Type', 'application/json')
          .set('Content-Encoding', encoding).send(body);
        checkAnswer(res, `Content-Encoding: ${encoding}`);
        expect(res.status, res.text).to.equal(400);
        expect(res.body.error.message).to.match(/could not be decoded as its Content-Encoding/);
      }
      const query = await t.http.post('/api/v1/sparql/acme').set(bearer(tokens.root)).set('Content-Type', 'application/sparql-query')
        .set('Content-Encoding', 'gzip').send('ASK {}');
      expect(query.status, query.text).to.equal(400);
      expect((await t.http.get('/api/v1/workspaces/never-made').set(bearer(tokens.root))).status).to.equal(404);
      // A body that is what it says still reads.
      const zipped = await t.http.post('/api/v1/sparql/acme').set(bearer(tokens.root)).set('Content-Type', 'application/sparql-query')
        .set('Content-Encoding', 'gzip').send(gzipSync(Buffer.from('ASK {}')));
      expect(zipped.status, zipped.text).to.equal(200);
    });

    it('the secret reads filtered by a uri that is no IRI is a 400 naming it', async () => {
      const res = await t.http.get('/api/v1/secrets/acme/reads?uri=bZ%7DwYs').set(bearer(tokens.owner));
      checkAnswer(res, 'secret reads of a non-IRI');
      expect(res.status, res.text).to.equal(400);
      expect(res.body.error.message).to.contain('bZ}wYs');
    });

    it('a multipart part header past 16 KiB is a 400 on every multipart route', async () => {
      const body = (name: string) => `--XYZ\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\n\r\nhello\r\n--XYZ--\r\n`;
      for (const path of ['/api/v1/packages/acme/install', '/api/v1/extensions/acme?targetMatrix=https%3A%2F%2Fexample.org%2Fm%2Fplain']) {
        const res = await t.http.post(path).set(bearer(tokens.owner)).set('Content-Type', 'multipart/form-data; boundary=XYZ').send(body('x'.repeat(20_000)));
        checkAnswer(res, path);
        expect(res.status, res.text).to.equal(400);
        expect(res.body.error.message).to.match(/^Malformed multipart body: Malformed part header/);
      }
    });

    it('a lifecycle command\'s id in upper case gives the same command, events and report as in lower case', async () => {
      const done = await uploadAndWait(t, tokens.owner, 'acme', await tinyPackage({ name: 'upper-case-id' }));
      expect(done.status).to.equal('completed');
      const base = '/api/v1/packages/acme/commands/';
      for (const suffix of ['', '/events', '/validation-report']) {
        const lower = await t.http.get(`${base}${done.id.toLowerCase()}${suffix}`).set(bearer(tokens.owner));
        const upper = await t.http.get(`${base}${done.id.toUpperCase()}${suffix}`).set(bearer(tokens.owner));
        expect(lower.status, `${suffix}: ${lower.text.slice(0, 200)}`).to.equal(200);
        expect(upper.status, `${suffix}: ${upper.text.slice(0, 200)}`).to.equal(200);
        expect(upper.body.data, suffix).to.deep.equal(lower.body.data);
      }
    });

    it('a script or query of comments only, and a CONSTRUCT or ASK with GROUP BY, are 400s saying so, at creation', async () => {
      const create = (alias: string, scriptContent: string) => t.http.post('/api/v1/commands/acme').set(bearer(tokens.owner))
        .send({ alias, scriptType: 'CONSTRUCT', scriptContent });
      const comment = await create('cmt-1', '# only a comment');
      expect(comment.status, comment.text).to.equal(400);
      expect(comment.body.error.message).to.equal('scriptContent holds no query (only comments or declarations); give a SPARQL query');
      const prefixOnly = await create('cmt-2', 'PREFIX a: <http://a/>');
      expect(prefixOnly.body.error.message).to.match(/holds no query/);
      const grouped = await create('grp-1', 'CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o } GROUP BY ?s');
      expect(grouped.status, grouped.text).to.equal(400);
      expect(grouped.body.error.message).to.match(/^scriptContent is a CONSTRUCT query with GROUP BY, which the engine does not run; group in a subquery/);
      for (const [query, said] of [['#comment only', /^query holds no query/], ['ASK { ?s ?p ?o } GROUP BY ?s', /^query is an ASK query with GROUP BY/]] as const) {
        const res = await t.http.post('/api/v1/sparql/acme').set(bearer(tokens.root)).set('Content-Type', 'application/sparql-query').send(query);
        expect(res.status, res.text).to.equal(400);
        expect(res.body.error.message).to.match(said);
      }
      // Grouping in a subquery is the way, and runs.
      const sub = await create('grp-2', 'CONSTRUCT { ?s <urn:p:count> ?n } WHERE { { SELECT ?s (COUNT(*) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?s } }');
      expect(sub.status, sub.text).to.equal(200);
      const run = await t.http.post(`/api/v1/commands/acme/${sub.body.data.id}/execute`).set(bearer(tokens.owner)).send({});
      expect(run.status, run.text).to.equal(200);
      expect((await t.http.get('/api/v1/commands/acme').set(bearer(tokens.owner))).body.data.map((c: { alias: string }) => c.alias))
        .to.not.include.members(['cmt-1', 'cmt-2', 'grp-1']);
    });
  });
});
