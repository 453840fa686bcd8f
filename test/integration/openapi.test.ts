import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import SwaggerParser from '@apidevtools/swagger-parser';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { removeDir, startTestServer, tempDir, type TestServer } from '../helpers/server.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);

/**
 * Issue 13 (OpenAPI): the served document validates with swagger-parser (no
 * dangling `#/$defs/...` references), every operation has a unique
 * operationId, and openapi-typescript generates a typed client from it.
 */
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;

/**
 * The calls the README and docs/ show, made with openapi-fetch on the types
 * openapi-typescript generates. A content-negotiated answer (a command's
 * result as JSON, Turtle or N-Triples) is typed by choosing the media type:
 * the client takes JSON (`${string}/json`), and a call asking for RDF says
 * `parseAs: 'text'` (docs/api.md, "Typed clients").
 */
const CLIENT = `import createClient from 'openapi-fetch';
import type { paths } from './api.js';

export function clientOf(token: string) {
  return createClient<paths, \`\${string}/json\`>({ baseUrl: 'http://127.0.0.1:8080', headers: { Authorization: \`Bearer \${token}\` } });
}
export type Client = ReturnType<typeof clientOf>;

export async function walkThrough(client: Client): Promise<string[]> {
  const seen: string[] = [];
  const workspaces = await client.GET('/api/v1/workspaces');
  seen.push(...(workspaces.data?.data.map((w) => w.slug) ?? []));
  const demo = await client.GET('/api/v1/workspaces/{workspace}', { params: { path: { workspace: 'demo' } } });
  seen.push(demo.data?.data.owner.username ?? '');

  const pkg = await client.GET('/api/v1/registry/packages/{publisher}/{name}', { params: { path: { publisher: 'examples', name: 'incident-response' } } });
  seen.push(...(pkg.data?.data.versions.map((v) => v.version) ?? []));
  const install = await client.POST('/api/v1/packages/{workspace}/registry/{publisher}/{name}/install', {
    params: { path: { workspace: 'demo', publisher: 'examples', name: 'incident-response' } },
    body: {},
  });
  if (install.error) throw new Error(\`\${install.error.error.code}: \${install.error.error.message} \${JSON.stringify(install.error.error.details ?? {})}\`);
  const commandId: string = install.data.data.id;
  const status = await client.GET('/api/v1/packages/{workspace}/commands/{commandId}', { params: { path: { workspace: 'demo', commandId } } });
  const finished: boolean = status.data?.data.status === 'completed' || status.data?.data.status === 'failed';
  const events = await client.GET('/api/v1/packages/{workspace}/commands/{commandId}/events', { params: { path: { workspace: 'demo', commandId } } });
  seen.push(...(events.data?.data.map((e) => \`\${e.level} \${e.message}\`) ?? []), String(finished));
  const report = await client.GET('/api/v1/packages/{workspace}/commands/{commandId}/validation-report', {
    params: { path: { workspace: 'demo', commandId } }, headers: { Accept: 'text/turtle' }, parseAs: 'text',
  });
  seen.push(report.data ?? '');

  const turtle = await client.POST('/api/v1/commands/{workspace}/alias/{alias}/execute', {
    params: { path: { workspace: 'demo', alias: 'roles-of-agent' } }, headers: { Accept: 'text/turtle' }, parseAs: 'text',
  });
  const text: string | undefined = turtle.data;
  const json = await client.POST('/api/v1/commands/{workspace}/alias/{alias}/execute', {
    params: { path: { workspace: 'demo', alias: 'roles-of-agent' } },
    body: { arguments: { agent: 'https://example.org/m#HelpBot' } },
  });
  if (json.error) throw new Error(json.error.error.message);
  const count: number = json.data.data.tripleCount;
  const graph: Record<string, unknown> = json.data.data.result;
  seen.push(text ?? '', String(count), JSON.stringify(graph));

  const created = await client.POST('/api/v1/commands/{workspace}', {
    params: { path: { workspace: 'demo' } },
    body: {
      alias: 'agents-of-role', scriptType: 'CONSTRUCT', scriptContent: 'CONSTRUCT { ?a ?p ?o } WHERE { ?a ?p ?o }',
      parameters: [{ name: 'role', kind: 'iri', required: true }],
    },
  });
  if (created.data) {
    const ntriples = await client.POST('/api/v1/commands/{workspace}/{id}/execute', {
      params: { path: { workspace: 'demo', id: created.data.data.id } },
      body: { arguments: { role: 'https://example.org/m#OnCall' } },
      headers: { Accept: 'application/n-triples' }, parseAs: 'text',
    });
    seen.push(ntriples.data ?? '');
  }
  const publisher = await client.POST('/api/v1/registry/publishers', { body: { slug: 'acme', owners: ['admin'] } });
  seen.push(publisher.data?.data.slug ?? '');
  const key = await client.POST('/api/v1/users/me/keys', { body: { name: 'ci', expiresIn: 'THIRTY_DAYS' } });
  seen.push(key.data?.data.key ?? '');
  const dataset = await client.GET('/api/v1/workspaces/{workspace}/export', {
    params: { path: { workspace: 'demo' } }, headers: { Accept: 'application/trig' }, parseAs: 'text',
  });
  seen.push(dataset.data ?? '');
  return seen;
}
`;

/** Calls each wrong in one way, one per line marked \`// wrong\`: each must give a diagnostic. */
const WRONG = `import type { Client } from './client.js';

export async function mistakes(client: Client): Promise<unknown[]> {
  return [
    await client.POST('/api/v1/commands/{workspace}/alias/{alias}/execute', { params: { path: { workspace: 'demo', name: 'roles-of-agent' } } }), // wrong
    (await client.POST('/api/v1/commands/{workspace}/alias/{alias}/execute', { params: { path: { workspace: 'demo', alias: 'a' } } })).data?.data.triples, // wrong
    (await client.POST('/api/v1/commands/{workspace}/alias/{alias}/execute', { params: { path: { workspace: 'demo', alias: 'a' } }, parseAs: 'text' })).data?.data, // wrong
    await client.POST('/api/v1/users/me/keys', {}), // wrong
    await client.POST('/api/v1/users/me/keys', { body: { name: 'ci', expiresIn: 'A_WHILE' } }), // wrong
    await client.GET('/api/v1/workspace'), // wrong
    await client.GET('/api/v1/packages/{workspace}/commands/{commandId}', { params: { path: { workspace: 'demo' } } }), // wrong
  ];
}
`;

/** Type-checks the files of `dir` (strict, no emit), openapi-fetch resolved from this project; the diagnostics by file and line. */
function typeCheck(dir: string, files: string[]): Array<{ file: string; line: number; message: string }> {
  const program = ts.createProgram(files.map((f) => path.join(dir, f)), {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
    types: [],
    paths: { 'openapi-fetch': [path.join(root, 'node_modules', 'openapi-fetch', 'dist', 'index.d.mts')] },
  });
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const at = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line + 1 : 0;
    return { file: d.file ? path.basename(d.file.fileName) : '', line: at, message: ts.flattenDiagnosticMessageText(d.messageText, '\n') };
  });
}

describe('OpenAPI document', function () {
  this.timeout(60_000);
  let t: TestServer;
  let doc: Record<string, unknown>;

  before(async () => {
    t = await startTestServer();
    const res = await t.http.get('/api/v1/openapi.json');
    expect(res.status).to.equal(200);
    doc = res.body;
  });

  after(async () => {
    await t.close();
    removeDir(t.dataDir);
  });

  it('validates with swagger-parser, every $ref resolving inside the document', async () => {
    const text = JSON.stringify(doc);
    expect(text).to.not.include('#/$defs/');
    await SwaggerParser.validate(structuredClone(doc) as never);
  });

  it('passes `redocly lint` (the recommended rules, redocly.yaml) with no error and no warning', async function () {
    this.timeout(120_000);
    const dir = tempDir('wsm-openapi-');
    try {
      const file = path.join(dir, 'openapi.json');
      writeFileSync(file, JSON.stringify(doc));
      const redocly = path.join(root, 'node_modules', '.bin', 'redocly');
      const lint = await run(redocly, ['lint', file, '--format=json', '--config', path.join(root, 'redocly.yaml')], {
        cwd: dir, maxBuffer: 16 * 2 ** 20, env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
      }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
      const report = JSON.parse(lint.stdout) as { totals: { errors: number; warnings: number }; problems: Array<{ ruleId: string; message: string }> };
      expect(report.problems.map((p) => `${p.ruleId}: ${p.message}`)).to.deep.equal([]);
      expect(report.totals).to.deep.include({ errors: 0, warnings: 0 });
    } finally {
      removeDir(dir);
    }
  });

  it('declares both credentials, a bearer token and X-Api-Key, on every operation that needs one, with its 401', () => {
    const schemes = (doc.components as { securitySchemes: Record<string, Record<string, string>> }).securitySchemes;
    expect(schemes.apiKeyAuth).to.deep.include({ type: 'apiKey', in: 'header', name: 'X-Api-Key' });
    expect(schemes.bearerAuth).to.deep.include({ type: 'http', scheme: 'bearer' });
    const workspace = (doc.paths as Record<string, Record<string, { security: unknown[]; responses: Record<string, unknown> }>>)['/api/v1/workspaces/{workspace}']!.get!;
    expect(workspace.security).to.deep.equal([{ bearerAuth: [] }, { apiKeyAuth: [] }]);
    expect(workspace.responses).to.have.property('401');
    expect((doc.info as { license?: { identifier: string } }).license?.identifier).to.equal('Apache-2.0');
  });

  it('gives every operation a unique operationId', () => {
    const ids: string[] = [];
    for (const item of Object.values(doc.paths as Record<string, Record<string, { operationId?: string }>>)) {
      for (const method of METHODS) {
        const op = item[method];
        if (!op) continue;
        expect(op.operationId, JSON.stringify(op).slice(0, 200)).to.be.a('string').and.match(/^[A-Za-z][A-Za-z0-9]*$/);
        ids.push(op.operationId!);
      }
    }
    expect(ids.length).to.be.greaterThan(25);
    expect(new Set(ids).size).to.equal(ids.length);
  });

  it('types the calls the docs show with openapi-fetch on the generated paths (strict), and refuses wrong ones', async function () {
    this.timeout(120_000);
    const dir = tempDir('wsm-openapi-client-');
    try {
      writeFileSync(path.join(dir, 'package.json'), '{"type": "module"}');
      writeFileSync(path.join(dir, 'api.ts'), astToString(await openapiTS(structuredClone(doc) as never)));
      writeFileSync(path.join(dir, 'client.ts'), CLIENT);
      writeFileSync(path.join(dir, 'wrong.ts'), WRONG);
      const diagnostics = typeCheck(dir, ['client.ts', 'wrong.ts']);
      const where = (d: { file: string; line: number }) => `${d.file}:${d.line}`;
      expect(diagnostics.filter((d) => d.file !== 'wrong.ts').map((d) => `${where(d)} ${d.message}`)).to.deep.equal([]);
      const wrongLines = WRONG.split('\n').flatMap((line, i) => (line.endsWith('// wrong') ? [i + 1] : []));
      expect(wrongLines).to.have.length(7);
      const flagged = new Set(diagnostics.filter((d) => d.file === 'wrong.ts').map((d) => d.line));
      expect(wrongLines.filter((line) => !flagged.has(line)), 'wrong calls that type-check').to.deep.equal([]);
      expect([...flagged].filter((line) => !wrongLines.includes(line)), 'diagnostics on lines not marked wrong').to.deep.equal([]);
    } finally {
      removeDir(dir);
    }
  });

  it('generates TypeScript types with openapi-typescript', async () => {
    const source = astToString(await openapiTS(structuredClone(doc) as never));
    expect(source).to.include('export interface paths');
    expect(source).to.include('export interface operations');
    expect(source).to.include('postPackagesWorkspaceInstall');
    expect(source).to.include('ValidationReport');
  });
});
