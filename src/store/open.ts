import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { QuadStore } from './store.js';
import { openDurableStore } from './durable.js';

/**
 * Opens the service's store: the embedded Oxigraph store in the data
 * directory, recovered from its snapshot and journal (DESIGN.md section 6).
 */
export async function openStore(config: Config, logger: Logger): Promise<QuadStore> {
  return openDurableStore(config.dataDir, {
    onWarning: (message) => logger.warn({ dataDir: config.dataDir }, message),
    onInfo: (message) => logger.info({ dataDir: config.dataDir }, message),
  });
}
