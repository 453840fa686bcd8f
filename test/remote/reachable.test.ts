import { SparqlClient } from '../../src/store/remote/sparql-client.js';
import { remoteSettings } from '../helpers/remote.js';

/**
 * A root hook for the remote suite: when the settings name an engine that
 * does not answer, the run stops at once with one failure that says so,
 * instead of every test failing on its own with "fetch failed".
 * (Without settings, each suite skips itself or fails under CI: requireRemote.)
 */
before(async function () {
  const settings = remoteSettings();
  if (!settings) return;
  try {
    await new SparqlClient({ ...settings, timeoutMs: 10_000 }).query('ASK {}', 'application/sparql-results+json', 0);
  } catch (err) {
    throw new Error(`The remote engine at ${settings.queryUrl} does not answer (${err instanceof Error ? err.message : String(err)}); \`npm run virtuoso -- status\` tells whether it runs and shows the end of its log`);
  }
});
