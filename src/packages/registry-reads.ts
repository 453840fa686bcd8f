import type { Logger } from '../logger.js';
import type { Workspace } from '../workspaces/service.js';
import { newestCompatible, type Registry, type RegistryVersion } from './registry.js';
import type { InstalledRecord } from './records.js';

/** How long P4/P5 wait for the registry's versions before answering latestVersion null. */
const REGISTRY_READ_TIMEOUT_MS = 3000;

/** The registry's latest version of installed packages, for P4/P5 (latestVersion). */
export class RegistryReads {
  constructor(private readonly registry: Registry, private readonly logger: Logger) {}

  /** Registry lookups of reads in flight, by package: concurrent P4/P5 of one package share one request. */
  private readonly registryReads = new Map<string, Promise<RegistryVersion[]>>();

  /**
   * The registry's versions for a read (latestVersion), or a rejection
   * once the registry took `REGISTRY_READ_TIMEOUT_MS`: a read answers
   * without the registry rather than wait for a slow one. A read that
   * starts while another read's request for the same package is under way
   * takes that request's answer (and its deadline); nothing is kept once it
   * is answered, so a change in the registry shows at the next read.
   * Installs ask the registry themselves.
   */
  private registryVersionsForRead(publisher: string, name: string): Promise<RegistryVersion[]> {
    const key = `${publisher}/${name}`;
    let pending = this.registryReads.get(key);
    if (!pending) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error('registry too slow')), REGISTRY_READ_TIMEOUT_MS); });
      pending = Promise.race([this.registry.versions(publisher, name), timeout]).finally(() => {
        clearTimeout(timer);
        this.registryReads.delete(key);
      });
      this.registryReads.set(key, pending);
    }
    return pending;
  }

  async latestFromRegistry(workspace: Workspace, rec: InstalledRecord): Promise<string | null> {
    if (!rec.registryPublisher || !rec.registryName) return null;
    // A current answer the registry keeps needs no request, so no deadline either (a timer and a race a read).
    const kept = this.registry.keptVersions?.(rec.registryPublisher, rec.registryName);
    if (kept) return newestCompatible(kept, workspace.engineVersion)?.version ?? null;
    try {
      const versions = await this.registryVersionsForRead(rec.registryPublisher, rec.registryName);
      return newestCompatible(versions, workspace.engineVersion)?.version ?? null;
    } catch (err) {
      this.logger.warn({ err, package: rec.name }, 'registry not reachable for the latest version of a package');
      return null;
    }
  }
}
