import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import SwaggerParser from '@apidevtools/swagger-parser';
import openapiTS, { astToString } from 'openapi-typescript';
import { removeDir, startTestServer, tempDir, type TestServer } from '../helpers/server.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);

/**
 * Issue 13 (OpenAPI): the served document validates with swagger-parser (no
 * dangling `#/$defs/...` references), every operation has a unique
 * operationId, and openapi-typescript generates a typed client from it.
 */
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;

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

  it('generates TypeScript types with openapi-typescript', async () => {
    const source = astToString(await openapiTS(structuredClone(doc) as never));
    expect(source).to.include('export interface paths');
    expect(source).to.include('export interface operations');
    expect(source).to.include('postPackagesWorkspaceInstall');
    expect(source).to.include('ValidationReport');
  });
});
