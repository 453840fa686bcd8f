import type { LoadData, WriteInput, WriteOp } from '../store/store.js';
import type { CommandStore, EventLevel, JobContext, ValidationCounts } from './commands.js';
import { TakenOver } from './command-leases.js';

/**
 * The log of one running command (docs/packages.md, "Commands"): its
 * numbered events, the writes of its status and events while it runs, and
 * the SHACL report it keeps for its final write. Its `context` is what the
 * command's job sees.
 *
 * The `in_progress` status and the events are issued without the job
 * waiting for them: the job (which never reads them) does not wait an
 * fsync per event. They must land in the order they were issued (a
 * reader must never see an event without the ones before it). The
 * embedded store journals and applies writes in call order; a remote
 * engine (the shared store, the one with a lease) commits concurrent
 * requests in any order, and sends a transaction it rolled back as
 * deadlocked again later, so there each is sent once the one before it
 * is written (`oneAtATime`). All of them are awaited (`settle`) before
 * the final write is issued; one that failed fails the command.
 */
export class CommandLog {
  private sequence = 0;
  private readonly issued: Promise<void>[] = [];
  private previous: Promise<unknown> = Promise.resolve();
  private report: { counts: ValidationCounts; ntriples: LoadData } | undefined;
  private reportOp: WriteInput | undefined;
  readonly context: JobContext;

  constructor(
    private readonly commands: CommandStore,
    private readonly workspaceId: string,
    private readonly commandId: string,
    /** Writes to the command; false when another instance took it over (`CommandLeases.write`). */
    private readonly write: (ops: WriteInput[]) => Promise<boolean>,
    private readonly oneAtATime: boolean,
    private readonly now: () => string,
    /** Aborted when the command is stopped here (placement: another instance took the workspace): its next event throws. */
    signal: AbortSignal = new AbortController().signal,
  ) {
    this.context = {
      commandId,
      workspaceId,
      signal,
      event: async (level, message) => {
        signal.throwIfAborted();
        this.issue([this.eventOp(level, message)]);
      },
      setReport: (counts, ntriples) => { this.report = { counts, ntriples }; },
    };
  }

  /** The op that appends the next event. */
  eventOp(level: EventLevel, message: string): WriteOp {
    return this.commands.eventOp(this.workspaceId, this.commandId, ++this.sequence, level, message, this.now());
  }

  /** Sends ops to the command without waiting for them (in order: see above). */
  issue(ops: WriteOp[]): void {
    const send = () => this.write(ops);
    const written = (this.oneAtATime ? this.previous.then(send) : send()).then((applied) => { if (!applied) throw new TakenOver(); });
    written.catch(() => {}); // awaited in `settle` or `drain`
    this.issued.push(written);
    this.previous = written;
  }

  /** Waits for every write issued so far; rejects with the first that failed (or found the command taken over). */
  async settle(): Promise<void> {
    await Promise.all(this.issued.splice(0));
  }

  /** Waits for every write issued so far, whether it failed or not. */
  async drain(): Promise<void> {
    await Promise.allSettled(this.issued.splice(0));
  }

  /** The counts of the report the job kept, if it kept one. */
  get reportCounts(): ValidationCounts | undefined { return this.report?.counts; }

  /**
   * The report the job kept, as one op, written by the completing write or,
   * if that fails, by the failing one: a load's bytes lent to the store's
   * thread come back into the op they were sent in (`ThreadedStore`).
   */
  reportOps(): WriteInput[] {
    if (!this.report) return [];
    this.reportOp ??= { kind: 'load', replace: true, graph: this.commands.reportGraphName(this.workspaceId, this.commandId), format: 'application/n-triples', data: this.report.ntriples };
    return [this.reportOp];
  }
}
