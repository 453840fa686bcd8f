import { expect } from 'chai';
import SwaggerParser from '@apidevtools/swagger-parser';
import openapiTS, { astToString } from 'openapi-typescript';
import { removeDir, startTestServer, type TestServer } from '../helpers/server.js';

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
