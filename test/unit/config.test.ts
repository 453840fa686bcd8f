import { expect } from 'chai';
import { loadConfig, ConfigError } from '../../src/config.js';

describe('config', () => {
  it('has working defaults', () => {
    const config = loadConfig({});
    expect(config.PORT).to.equal(8080);
    expect(config.HOST).to.equal('127.0.0.1');
    expect(config.WSM_REGISTRY).to.equal('self');
    expect(config.dataDir).to.match(/data$/);
  });

  const bad: Array<[string, string]> = [
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['WSM_AUTO_UPDATE_INTERVAL', '-5'],
    ['WSM_ENGINE_VERSION', '1.0'],
    ['WSM_BASE_IRI', 'not a url'],
    ['WSM_BASE_IRI', 'https://x.example/no-slash'],
    ['WSM_OIDC_ISSUER', 'ftp://issuer'],
    ['WSM_LOG_LEVEL', 'loud'],
    ['WSM_DEMO', 'maybe'],
  ];
  for (const [name, value] of bad) {
    it(`stops on ${name}=${value} with a message naming the setting`, () => {
      expect(() => loadConfig({ [name]: value })).to.throw(ConfigError, new RegExp(`^Invalid setting ${name}=`));
    });
  }
});
