import { expect } from 'chai';
import { loadConfig, ConfigError } from '../../src/config.js';

describe('config', () => {
  it('has working defaults', () => {
    const config = loadConfig({});
    expect(config.PORT).to.equal(8080);
    expect(config.HOST).to.equal('127.0.0.1');
    expect(config.WSM_REGISTRY).to.equal('self');
    expect(config.dataDir).to.match(/data$/);
    expect(config.WSM_MAX_EVENT_STREAMS).to.equal(10);
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
    ['WSM_STORE', 'postgres'],
    ['WSM_SPARQL_DIALECT', 'stardog'],
    ['WSM_SPARQL_QUERY_URL', 'not a url'],
    ['WSM_SNAPSHOT_JOURNAL_MB', '0'],
    ['WSM_SNAPSHOT_JOURNAL_MB', '65'],
    ['WSM_SNAPSHOT_JOURNAL_MB', 'lots'],
    ['WSM_MAX_EVENT_STREAMS', '0'],
    ['WSM_MAX_EVENT_STREAMS', '10001'],
    ['WSM_MAX_EVENT_STREAMS', '2.5'],
    ['WSM_OPS_PORT', '65536'],
    ['WSM_OPS_PORT', 'ops'],
  ];
  for (const [name, value] of bad) {
    it(`stops on ${name}=${value} with a message naming the setting`, () => {
      expect(() => loadConfig({ [name]: value })).to.throw(ConfigError, new RegExp(`^Invalid setting ${name}=`));
    });
  }

  it('takes an operations port apart from PORT (0: a free one), and refuses the same port', () => {
    expect(loadConfig({}).WSM_OPS_PORT).to.equal(undefined);
    expect(loadConfig({ PORT: '8080', WSM_OPS_PORT: '9090' }).WSM_OPS_PORT).to.equal(9090);
    expect(loadConfig({ PORT: '0', WSM_OPS_PORT: '0' }).WSM_OPS_PORT).to.equal(0);
    expect(() => loadConfig({ PORT: '8080', WSM_OPS_PORT: '8080' })).to.throw(ConfigError, /^Invalid setting WSM_OPS_PORT="8080": must differ from PORT/);
  });

  describe('cluster residency (WSM_CLUSTER_RESIDENT_QUADS)', () => {
    const cluster = { WSM_STORE: 'cluster', WSM_POSTGRES_URL: 'postgres://wsm@127.0.0.1:5432/wsm' };
    it('takes a number of quads and an idle time in seconds (600 by default); unset, every workspace is held', () => {
      const config = loadConfig({ ...cluster, WSM_CLUSTER_RESIDENT_QUADS: '2000000' });
      expect(config.WSM_CLUSTER_RESIDENT_QUADS).to.equal(2_000_000);
      expect(config.WSM_CLUSTER_IDLE_SECONDS).to.equal(600);
      expect(loadConfig(cluster).WSM_CLUSTER_RESIDENT_QUADS).to.equal(undefined);
    });
    for (const [name, value, message] of [
      ['WSM_CLUSTER_RESIDENT_QUADS', 'lots', /Invalid setting WSM_CLUSTER_RESIDENT_QUADS="lots"/],
      ['WSM_CLUSTER_RESIDENT_QUADS', '10', /Invalid setting WSM_CLUSTER_RESIDENT_QUADS="10": must be at least 1000 quads/],
      ['WSM_CLUSTER_IDLE_SECONDS', '0', /Invalid setting WSM_CLUSTER_IDLE_SECONDS="0"/],
    ] as const) {
      it(`stops on ${name}=${value} with a message naming the setting`, () => {
        expect(() => loadConfig({ ...cluster, WSM_CLUSTER_RESIDENT_QUADS: '5000', [name]: value })).to.throw(ConfigError, message);
      });
    }
    it('stops when set without the cluster store', () => {
      expect(() => loadConfig({ WSM_CLUSTER_RESIDENT_QUADS: '5000' })).to.throw(ConfigError, /WSM_CLUSTER_RESIDENT_QUADS="5000": applies only with WSM_STORE=cluster/);
    });
  });

  describe('cluster placement (WSM_CLUSTER_PLACEMENT)', () => {
    const cluster = { WSM_STORE: 'cluster', WSM_POSTGRES_URL: 'postgres://wsm@127.0.0.1:5432/wsm' };
    it('is `none` unless set; `lease` takes a lease length (3000 ms by default) and an advertised URL', () => {
      expect(loadConfig(cluster).WSM_CLUSTER_PLACEMENT).to.equal('none');
      const config = loadConfig({ ...cluster, WSM_CLUSTER_PLACEMENT: 'lease', WSM_CLUSTER_ADVERTISE_URL: 'http://10.0.0.5:8081' });
      expect(config.WSM_CLUSTER_PLACEMENT).to.equal('lease');
      expect(config.WSM_CLUSTER_LEASE_MS).to.equal(3000);
      expect(config.WSM_CLUSTER_ADVERTISE_URL).to.equal('http://10.0.0.5:8081');
    });
    for (const [env, message] of [
      [{ WSM_CLUSTER_PLACEMENT: 'owners' }, /Invalid setting WSM_CLUSTER_PLACEMENT="owners"/],
      [{ WSM_CLUSTER_PLACEMENT: 'lease', WSM_CLUSTER_LEASE_MS: '100' }, /Invalid setting WSM_CLUSTER_LEASE_MS="100"/],
      [{ WSM_CLUSTER_PLACEMENT: 'lease', WSM_CLUSTER_ADVERTISE_URL: 'ftp://x' }, /Invalid setting WSM_CLUSTER_ADVERTISE_URL="ftp:\/\/x"/],
      [{ WSM_CLUSTER_ADVERTISE_URL: 'http://10.0.0.5:8081' }, /WSM_CLUSTER_ADVERTISE_URL="http:\/\/10.0.0.5:8081": applies only with WSM_CLUSTER_PLACEMENT=lease/],
      [{ WSM_CLUSTER_PLACEMENT: 'lease', HOST: '0.0.0.0' }, /WSM_CLUSTER_ADVERTISE_URL="": is required with WSM_CLUSTER_PLACEMENT=lease when HOST=0.0.0.0/],
    ] as const) {
      it(`stops on ${JSON.stringify(env)} with a message naming the setting`, () => {
        expect(() => loadConfig({ ...cluster, ...env })).to.throw(ConfigError, message);
      });
    }
    it('stops when set without the cluster store', () => {
      expect(() => loadConfig({ WSM_CLUSTER_PLACEMENT: 'lease' })).to.throw(ConfigError, /WSM_CLUSTER_PLACEMENT="lease": applies only with WSM_STORE=cluster/);
    });
  });

  describe('remote store (WSM_STORE=sparql)', () => {
    const urls = { WSM_SPARQL_QUERY_URL: 'http://127.0.0.1:8890/sparql', WSM_SPARQL_UPDATE_URL: 'http://127.0.0.1:8890/sparql' };

    it('stops when an endpoint URL is missing, naming it', () => {
      expect(() => loadConfig({ WSM_STORE: 'sparql', WSM_SPARQL_UPDATE_URL: urls.WSM_SPARQL_UPDATE_URL }))
        .to.throw(ConfigError, /^Invalid setting WSM_SPARQL_QUERY_URL="": is required when WSM_STORE=sparql/);
      expect(() => loadConfig({ WSM_STORE: 'sparql', WSM_SPARQL_QUERY_URL: urls.WSM_SPARQL_QUERY_URL }))
        .to.throw(ConfigError, /^Invalid setting WSM_SPARQL_UPDATE_URL="": is required when WSM_STORE=sparql/);
    });

    it('stops on a password without a user', () => {
      expect(() => loadConfig({ WSM_STORE: 'sparql', ...urls, WSM_SPARQL_PASSWORD: 'secret' }))
        .to.throw(ConfigError, /^Invalid setting WSM_SPARQL_USER=/);
    });

    it('accepts the settings and defaults to the embedded store and the standard dialect', () => {
      expect(loadConfig({}).WSM_STORE).to.equal('embedded');
      const config = loadConfig({ WSM_STORE: 'sparql', ...urls, WSM_SPARQL_USER: 'wsm', WSM_SPARQL_PASSWORD: 'pw' });
      expect(config.WSM_STORE).to.equal('sparql');
      expect(config.WSM_SPARQL_DIALECT).to.equal('standard');
      expect(config.WSM_SPARQL_USER).to.equal('wsm');
    });
  });
});
