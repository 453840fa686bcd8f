import type { QuadStore, WriteInput } from '../store/store.js';
import type { Logger } from '../logger.js';
import { UUID_PATTERN } from '../rdf/ids.js';
import type { InstanceLease } from '../store/instance-lease.js';
import type { CommandStore } from './commands.js';

/** The command was taken over by another instance (this instance's lease on it ended): stop working on it. */
export class TakenOver extends Error {
  constructor() {
    super('this instance no longer holds the lease of the command');
    this.name = 'TakenOver';
  }
}

const RECOVERY_MESSAGE = 'Interrupted: the service stopped while this command was pending or running; nothing of it was applied. Run the command again.';
const TAKEOVER_MESSAGE = 'Interrupted: the service instance running this command stopped (its lease ended); nothing of it was applied. Run the command again.';
const PLACEMENT_MESSAGE = 'Interrupted: the service instance running this command lost its lease on the workspace to another instance; nothing of it was applied. Run the command again.';

/**
 * Placement (the cluster store with WSM_CLUSTER_PLACEMENT=lease,
 * docs/cluster.md "Placement"): a workspace is written only by the
 * instance holding its lease, so a command claimed by another instance in a
 * workspace held here can no longer be written by its claimer.
 */
export interface WorkspaceLeases {
  /** The workspaces whose lease this instance holds now. */
  held(): string[];
  /** Whether another live instance holds the workspace's lease now. */
  heldElsewhere(workspaceId: string): Promise<boolean>;
}

/** Client-made text in a log line, cut to a bounded length. */
const bounded = (text: string) => (text.length > 100 ? `${text.slice(0, 100)}...` : text);

type UnfinishedRecord = Awaited<ReturnType<CommandStore['unfinished']>>[number];

/** Why a command nobody can finish is failed: the claimer's process stopped, its lease ended, or (placement) it lost the workspace. */
type Orphaned = 'stopped' | 'lease-ended' | 'workspace-lost';

/**
 * Who holds a lifecycle command, and what becomes of commands nobody holds
 * (docs/store.md "Command leases"). On a shared store each command is
 * claimed under this instance's lease (`owner`), every write to it is
 * conditional on the claim (`write`), and the commands of instances whose
 * lease ended are failed (`sweep`, from time to time). On a store of one
 * process there is no lease: the commands a stop cut off are failed at
 * start (`recover`).
 */
export class CommandLeases {
  /** Shared store: this instance's lease, under which it claims the commands it accepts. */
  private readonly lease: InstanceLease | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private sweeping: Promise<number> | undefined;
  private firstSweep = true;
  private sweeps = 0;
  private stopped = false;
  /**
   * Placement (`CommandRunner.usePlacement`): the workspaces' leases, the
   * workspaces this instance has commands queued or running in, and what
   * stops those of a workspace another instance took.
   */
  placement: { leases: WorkspaceLeases; working: () => Iterable<string>; abandon: (workspaceId: string) => void } | undefined;

  constructor(
    private readonly commands: CommandStore,
    private readonly store: QuadStore,
    private readonly logger: Logger,
    private readonly now: () => string,
  ) {
    this.lease = store.instance;
  }

  /** The instance id new commands are claimed under (shared store), else undefined. */
  get owner(): string | undefined { return this.lease?.id; }

  /**
   * Several instances share the store (a remote engine): it commits
   * concurrent requests in any order, so writes to one command must be
   * sent one after another.
   */
  get shared(): boolean { return this.lease !== undefined; }

  /**
   * A write to a command by its owner: on a shared store, applied only while
   * the command is unfinished and this instance still holds the lease it was
   * claimed under (false otherwise: another instance took it over).
   */
  async write(workspaceId: string, commandId: string, owner: string | undefined, ops: WriteInput[]): Promise<boolean> {
    if (!this.lease || owner === undefined) {
      await this.store.write(ops);
      return true;
    }
    return this.store.writeIf({ ask: this.commands.heldAsk(workspaceId, commandId, owner, this.lease), expect: true }, ops);
  }

  /**
   * At start: a command found pending or in progress was cut off by a stop
   * of the process. Since a command's data goes in one atomic write with its
   * `completed` status, nothing of it was applied; only its record needs
   * fixing: failed, with an ERROR event saying "interrupted".
   */
  async recover(): Promise<number> {
    if (this.lease) {
      // Shared store: only commands whose owner's lease ended, now and from time to time while running.
      const recovered = await this.sweep();
      const every = Math.max(100, Math.floor(this.lease.durationMs / 2));
      this.sweepTimer = setInterval(() => { void this.sweep(); }, every);
      this.sweepTimer.unref();
      return recovered;
    }
    return this.failUnfinished('stopped');
  }

  /**
   * Placement: fails the unfinished commands of `workspaceIds` (held here)
   * claimed by another instance than this one, which can no longer write
   * to them: each in a write conditional on the command being still
   * unfinished under that claim, and made under this instance's lease on
   * the workspace (refused if it lost it meanwhile). Called when this
   * instance takes a workspace's lease and at each sweep. Resolves how many
   * it failed.
   */
  async failClaimedElsewhere(workspaceIds: readonly string[]): Promise<number> {
    const lease = this.lease;
    if (!lease || this.stopped || workspaceIds.length === 0) return 0;
    const records = (await this.commands.unfinished(new Set(workspaceIds))).filter((r) => r.leaseOwner !== lease.id);
    return records.length > 0 ? this.failUnfinished('workspace-lost', records) : 0;
  }

  /**
   * Placement: stops this instance's commands in a workspace whose lease
   * another live instance holds now (it fails them: `failClaimedElsewhere`
   * there). Called when this instance finds its lease on a workspace gone,
   * and at each sweep for the workspaces it works in without holding them.
   */
  async checkLost(workspaceId: string): Promise<boolean> {
    const placement = this.placement;
    if (!placement || this.stopped || ![...placement.working()].includes(workspaceId)) return false;
    if (!await placement.leases.heldElsewhere(workspaceId)) return false;
    this.logger.warn({ workspaceId }, 'another instance holds the lease on a workspace this instance runs lifecycle commands in: they are stopped (the holder fails them)');
    placement.abandon(workspaceId);
    return true;
  }

  /** Placement, at each sweep: commands claimed elsewhere in the workspaces held here, and this instance's in workspaces held elsewhere. */
  private async placementSweep(): Promise<number> {
    const placement = this.placement;
    if (!placement) return 0;
    const held = placement.leases.held();
    const failed = await this.failClaimedElsewhere(held);
    for (const workspaceId of [...placement.working()]) if (!held.includes(workspaceId)) await this.checkLost(workspaceId);
    return failed;
  }

  /**
   * Shared store (several instances, docs/store.md "Command leases"):
   * removes the records of instances whose lease ended, fails the unfinished
   * commands no live instance holds (each in a write conditional on that,
   * so a command whose owner renewed its lease is never taken), and drops
   * the staging graphs those instances left. Resolves how many commands it failed.
   */
  sweep(): Promise<number> {
    const lease = this.lease;
    if (!lease || this.stopped) return Promise.resolve(0);
    this.sweeping ??= (async () => {
      try {
        const expired = await lease.expire();
        const claimedElsewhere = await this.placementSweep();
        // Commands are read (across workspaces) only when an instance's record went (here, or possibly by an
        // instance that stopped before failing its commands: every tenth sweep), not to keep the engine busy.
        this.sweeps++;
        if (expired.length === 0 && !this.firstSweep && this.sweeps % 10 !== 0) return claimedElsewhere;
        // Commands first, then the instances: a command of an instance that registered since is never taken.
        const unfinished = await this.commands.unfinished();
        const live = await lease.registered();
        const orphaned = unfinished.filter((r) => r.leaseOwner === null || !live.has(r.leaseOwner));
        const failed = claimedElsewhere + (orphaned.length > 0 ? await this.failUnfinished('lease-ended', orphaned) : 0);
        if (expired.length > 0 || this.firstSweep) {
          this.firstSweep = false;
          const dropped = await lease.dropOrphanStaging();
          if (dropped > 0) this.logger.warn({ dropped }, 'dropped staging graphs of large writes cut off by the end of their instance');
        }
        if (expired.length > 0) this.logger.warn({ instances: expired }, 'removed the leases of service instances that stopped renewing them');
        return failed;
      } catch (err) {
        this.logger.error({ err }, 'could not look for lifecycle commands of stopped instances');
        return 0;
      } finally {
        this.sweeping = undefined;
      }
    })();
    return this.sweeping;
  }

  /** Stops sweeping; resolves when a sweep under way has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    await this.sweeping;
  }

  private async failUnfinished(why: Orphaned, records?: UnfinishedRecord[]): Promise<number> {
    const lease = this.lease;
    let recovered = 0;
    for (const record of records ?? await this.commands.unfinished()) {
      const { workspaceId, commandId } = record;
      // A record that is not what the service writes (an id that is not a UUID, a subject that is not the
      // command IRI of its id) is skipped and logged: start-up never stops on one, and writes only into
      // the graphs of the workspace whose packages graph holds it.
      if (!UUID_PATTERN.test(commandId) || !UUID_PATTERN.test(workspaceId)
        || record.subject !== this.commands.commandIri(commandId) || record.workspace !== this.commands.workspaceIri(workspaceId)) {
        this.logger.warn({ workspaceId: bounded(workspaceId), commandId: bounded(commandId) }, 'recovery: skipped a lifecycle command record it cannot read');
        continue;
      }
      try {
        const now = this.now();
        const message = why === 'stopped' ? RECOVERY_MESSAGE : why === 'lease-ended' ? TAKEOVER_MESSAGE : PLACEMENT_MESSAGE;
        const ops = [
          ...this.commands.statusOps(workspaceId, commandId, 'failed', now, { errorMessage: message }),
          this.commands.eventOp(workspaceId, commandId, (await this.commands.lastSequence(workspaceId, commandId)) + 1, 'ERROR', message, now),
        ];
        if (why === 'lease-ended' && lease) {
          // Only while no live instance holds it: an owner that renewed its lease keeps its command.
          if (!await this.store.writeIf({ ask: this.commands.orphanedAsk(workspaceId, commandId, record.leaseOwner, lease), expect: true }, ops)) continue;
        } else if (why === 'workspace-lost') {
          // Only while still unfinished under the claim seen; appended only under this instance's lease on the workspace.
          if (!await this.store.writeIf({ ask: this.commands.orphanedAsk(workspaceId, commandId, record.leaseOwner), expect: true }, ops)) continue;
        } else {
          await this.store.write(ops);
        }
        recovered++;
        this.logger.warn({ workspaceId, commandId }, 'marked an interrupted lifecycle command failed');
      } catch (err) {
        this.logger.error({ err, workspaceId, commandId }, 'recovery: could not mark an interrupted lifecycle command failed; skipped');
      }
    }
    return recovered;
  }
}
