import type { Workspace } from '../workspaces/service.js';
import { CommandFailure, type JobContext, type LifecycleCommand } from './commands.js';
import { engineAdmits } from './engine-range.js';
import type { Manifest } from './manifest.js';
import type { Dependency, Registry, RegistryVersion } from './registry.js';
import { compareSemver, parseSemver } from './semver.js';

/**
 * Dependencies at install (docs/packages.md, "Dependencies"). Each manifest dependency
 * `{publisher, name, versionRange}` uses the engine-range grammar, compared
 * with the MAJOR.MINOR of the dependency's version (`>=1.0 <2.0` admits every
 * 1.x.y). For each one, before the package is deployed:
 * - installed inside its range: fine;
 * - installed outside it: the command fails, naming both versions;
 * - missing: the newest non-yanked release inside the range and compatible
 *   with the workspace is installed first from the registry, as a child
 *   INSTALL command (`parentCommandId` = the requesting command), whose own
 *   dependencies are handled the same way; a cycle fails the command.
 */
export interface DependencyHost {
  readonly registry: Registry;
  /** The installed version of a package of the workspace, or null. */
  installedVersion(workspaceId: string, name: string): Promise<string | null>;
  /** Runs a child INSTALL of `dependency` at `version`; `chain` is the packages being installed above it, itself last. */
  installChild(workspace: Workspace, dependency: Dependency, version: RegistryVersion, parentCommandId: string, chain: string[]): Promise<LifecycleCommand>;
}

/** Whether a dependency range admits a version (only its MAJOR.MINOR is compared). */
export function rangeAdmits(range: string, version: string): boolean {
  try {
    return engineAdmits(range, version);
  } catch {
    return false;
  }
}

/** The newest release that is not yanked, inside `range` and compatible with the engine; null when none. */
export function newestInRange(versions: RegistryVersion[], range: string, engineVersion: string): RegistryVersion | null {
  let best: RegistryVersion | null = null;
  for (const v of versions) {
    if (v.yanked || parseSemver(v.version)?.prerelease !== null) continue;
    if (!rangeAdmits(range, v.version) || !rangeAdmits(v.engineVersion, engineVersion)) continue;
    if (!best || compareSemver(v.version, best.version) > 0) best = v;
  }
  return best;
}

const label = (d: Dependency) => `${d.publisher}/${d.name}`;

/**
 * Makes sure every dependency of `manifest` is installed inside its range,
 * installing missing ones first; throws CommandFailure otherwise. `chain`
 * holds the names of the packages being installed, outermost first, this
 * package last.
 */
export async function ensureDependencies(host: DependencyHost, ctx: JobContext, workspace: Workspace, manifest: Manifest, chain: string[]): Promise<void> {
  if (manifest.dependencies.length === 0) return;
  for (const dep of manifest.dependencies) {
    if (chain.includes(dep.name)) {
      throw new CommandFailure(`Dependency cycle: ${[...chain, dep.name].join(' -> ')}`,
        'Packages cannot depend on each other in a circle; remove one of these dependencies from its manifest.');
    }
    const installed = await host.installedVersion(workspace.id, dep.name);
    if (installed !== null) {
      if (!rangeAdmits(dep.versionRange, installed)) {
        throw new CommandFailure(`${manifest.name} ${manifest.version} needs ${label(dep)} "${dep.versionRange}", but version ${installed} is installed`,
          `Install a version of ${dep.name} inside "${dep.versionRange}" first, or choose a version of ${manifest.name} that accepts ${installed}.`);
      }
      await ctx.event('INFO', `Dependency ${label(dep)} "${dep.versionRange}": version ${installed} is installed`);
      continue;
    }
    let versions: RegistryVersion[];
    try {
      versions = await host.registry.versions(dep.publisher, dep.name);
    } catch (err) {
      throw new CommandFailure(`Dependency ${label(dep)} is not installed and could not be found in the registry: ${err instanceof Error ? err.message : String(err)}`,
        `Publish ${label(dep)} to the registry or install it by upload first.`);
    }
    const chosen = newestInRange(versions, dep.versionRange, workspace.engineVersion);
    if (!chosen) {
      const offered = versions.map((v) => `${v.version}${v.yanked ? ' (yanked)' : ''}`).join(', ') || 'none';
      throw new CommandFailure(`Dependency ${label(dep)} "${dep.versionRange}" is not installed, and the registry has no version inside that range compatible with engine ${workspace.engineVersion} that is not yanked (it offers ${offered})`,
        `Publish a matching version of ${dep.name}, or install one by upload first.`);
    }
    await ctx.event('INFO', `Dependency ${label(dep)} "${dep.versionRange}" is not installed: installing version ${chosen.version} first`);
    const child = await host.installChild(workspace, dep, chosen, ctx.commandId, [...chain, dep.name]);
    if (child.status !== 'completed') {
      throw new CommandFailure(`Dependency ${label(dep)} ${chosen.version} could not be installed (command ${child.id}): ${child.errorMessage ?? 'it failed'}`,
        'Read the events of that command, fix the problem and install again.');
    }
    await ctx.event('INFO', `Installed dependency ${label(dep)} ${chosen.version} for this package (command ${child.id})`);
  }
}
