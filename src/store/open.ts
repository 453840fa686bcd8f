import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { QuadStore } from './store.js';
import { OxigraphStore } from './oxigraph-store.js';

/** Opens the service's store for the configured data directory. */
export async function openStore(_config: Config, _logger: Logger): Promise<QuadStore> {
  return new OxigraphStore();
}
