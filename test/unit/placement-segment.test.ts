import { expect } from 'chai';
import { workspaceSegment } from '../../src/http/placement-forward.js';

/** Which workspace a request names, for placement's forwarding (the balancer's rule, scripts/balancer.ts). */
describe('placement: the workspace a request names', () => {
  for (const [url, segment] of [
    ['/api/v1/workspaces/acme', 'acme'],
    ['/api/v1/workspaces/acme/members/bob?x=1', 'acme'],
    ['/api/v1/packages/acme/commands/c1/events', 'acme'],
    ['/api/v1/commands/acme', 'acme'],
    ['/api/v1/sparql/acme', 'acme'],
    ['/api/v1/secrets/acme/s1/value', 'acme'],
    ['/mcp/acme', 'acme'],
    ['/api/v1/workspaces/caf%C3%A9', 'café'],
    ['/api/v1/workspaces/0b7d7b9a-1e1f-4f5e-9a53-2f9a3c1c1d10/export', '0b7d7b9a-1e1f-4f5e-9a53-2f9a3c1c1d10'],
  ] as const) {
    it(`${url} names ${segment}`, () => { expect(workspaceSegment(url)).to.equal(segment); });
  }
  for (const url of [
    '/api/v1/workspaces', '/api/v1/workspaces?page=2', '/api/v1/workspaces/import', '/api/v1/registry/packages/p/n',
    '/api/v1/users/me/keys', '/health', '/metrics', '/', '/docs/', '/api/v1/workspaces/%E0%A4%A', '/mcp/', undefined,
  ]) {
    it(`${String(url)} names none`, () => { expect(workspaceSegment(url)).to.equal(undefined); });
  }
});
