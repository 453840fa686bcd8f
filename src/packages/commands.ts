import { updateOp, type Binding, type QuadStore, type LoadData, type WriteInput, type WriteOp } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import type { Logger } from '../logger.js';
import { prefixes } from '../rdf/vocab.js';
import { sparql, sparqlFragment, fragmentOf, sequence, iri, literal, dateTime, integer, boolean, raw, type Sparql, type SparqlFragment } from '../rdf/sparql.js';
import { newId } from '../rdf/ids.js';
import { Clock } from '../rdf/clock.js';
import { req, str, int, bool, time } from '../rdf/bindings.js';
import { AppError, conflict } from '../errors.js';
import { countLifecycleCommand } from '../metrics.js';
import type { InstanceLease } from '../store/instance-lease.js';
import { CommandLeases, TakenOver, type WorkspaceLeases } from './command-leases.js';
import { CommandLog } from './command-log.js';
import { commandEntryOp, workspacesWithUnfinished } from '../workspaces/workspace-index.js';

/**
 * Lifecycle commands as RDF (docs/rdf-model.md "Packages graph") and the
 * runner that executes them (docs/packages.md, "Commands").
 *
 * Records: `<id/command/C> a wsm:LifecycleCommand` in the workspace's
 * packages graph; events `<id/event/E> a wsm:CommandEvent` in the command's
 * own graph `<base>workspaces/W/commands/C`; a SHACL report in
 * `<base>workspaces/W/commands/C/report`.
 *
 * Write order: a command's record is written when it is accepted (pending),
 * its status and events as it runs, and everything the command changes in
 * the workspace goes in ONE atomic `store.write` together with the
 * `completed` status. A process that stops in between leaves only the
 * command record (and its log) behind; `recover()` marks it failed.
 */
export type CommandType = 'INSTALL' | 'UPDATE' | 'REINSTALL' | 'UNINSTALL' | 'REDEPLOY';
export type CommandStatus = 'pending' | 'in_progress' | 'completed' | 'failed';
export type EventLevel = 'INFO' | 'SUCCESS' | 'WARNING' | 'ERROR';

export const COMMAND_TYPES: readonly CommandType[] = ['INSTALL', 'UPDATE', 'REINSTALL', 'UNINSTALL', 'REDEPLOY'];

/** The lifecycle command shape of P8 (docs/api.md), with the ecosystem client's nested reference. */
export interface LifecycleCommand {
  id: string;
  packageInstallationId: string | null;
  packageName: string;
  version: string;
  commandType: CommandType;
  status: CommandStatus;
  errorMessage: string | null;
  createdAt: string;
  updatedAt: string;
  packageInstallation: { id: string } | null;
  /** The command that installed this package as its dependency (docs/packages.md, "Dependencies"), else null. */
  parentCommandId: string | null;
}

/** LifecycleCommandSummary, embedded in a package installation. */
export interface LifecycleCommandSummary {
  id: string;
  version: string;
  commandType: CommandType;
  status: CommandStatus;
  errorMessage: string | null;
  validationConforms: boolean | null;
  validationViolationCount: number | null;
  validationWarningCount: number | null;
  validationInfoCount: number | null;
  createdAt: string;
  updatedAt: string;
}

export interface CommandEvent {
  id: string;
  commandId: string;
  message: string;
  level: EventLevel;
  createdAt: string;
  command: { id: string };
}

/** The counts of a validation report, as kept on the command record. */
export interface ValidationCounts {
  conforms: boolean;
  violationCount: number;
  warningCount: number;
  infoCount: number;
}

/** What a running command may do besides its work. */
export interface JobContext {
  readonly commandId: string;
  readonly workspaceId: string;
  /**
   * Aborted when the command is stopped on this instance (placement:
   * another instance took the workspace's lease, and fails the command):
   * nothing the job does is written any more; work that waits (a download)
   * can stop at once.
   */
  readonly signal: AbortSignal;
  /** Appends an event to the command's log (durably, before it returns). */
  event(level: EventLevel, message: string): Promise<void>;
  /**
   * Keeps the SHACL report of the command: stored (with the counts on the
   * command record) in the command's final write, whether it completes or fails.
   */
  setReport(counts: ValidationCounts, ntriples: LoadData): void;
}

/** What a job hands back to complete its command. */
export interface JobResult {
  /** Everything the command changes in the workspace; written atomically with `completed`. */
  ops: WriteInput[];
  /** The SUCCESS event's message. */
  message: string;
  /** Sets the command's package installation (a first install completes). */
  packageInstallationId?: string;
  /** Corrects the type when the package changed while the command was queued (e.g. INSTALL became UPDATE). */
  commandType?: CommandType;
}

export type Job = (ctx: JobContext) => Promise<JobResult>;

/**
 * A failure a user can act on: `message` says what went wrong, `hint` what
 * to do; both go into the ERROR event, `message` into `errorMessage`.
 */
export class CommandFailure extends Error {
  constructor(message: string, readonly hint?: string) {
    super(message);
    this.name = 'CommandFailure';
  }
}

/** Describes what the runner needs to accept a command. */
export interface CommandRequest {
  workspaceId: string;
  packageName: string;
  version: string;
  commandType: CommandType;
  packageInstallationId: string | null;
  /** P1/P6: refuse (409) while the package has an active command; otherwise queue behind it. */
  exclusive: boolean;
  job: Job;
  /** Called once the command has completed or failed (never throws into the runner). */
  onOutcome?: (command: LifecycleCommand) => void | Promise<void>;
}

interface Queued {
  id: string;
  version: string;
  request: CommandRequest;
  /** The instance id the command was claimed under (shared store), else undefined. */
  owner?: string | undefined;
  /** Set when its final status write is issued: it no longer blocks exclusive requests. */
  settled?: boolean;
  /** Placement: another instance took the workspace (it fails the command); not run, or stopped. */
  abandoned?: boolean;
  /** Stops the command's job while it runs (`abandoned`). */
  abort?: AbortController;
}

const ACTIVE: CommandStatus[] = ['pending', 'in_progress'];

/** A non-negative integer as a bare SPARQL number (OFFSET and LIMIT take no typed literal). */
function count(n: number): SparqlFragment {
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`not a count: ${n}`);
  return raw(String(n));
}

/** Reads and writes lifecycle command records and events. */
export class CommandStore {
  constructor(private readonly store: QuadStore, private readonly graphs: Graphs) {}

  commandIri(id: string): string { return this.graphs.resource('command', id); }
  workspaceIri(id: string): string { return this.graphs.resource('workspace', id); }
  reportGraphName(workspaceId: string, commandId: string): string { return this.graphs.report(workspaceId, commandId); }
  packageIri(id: string): string { return this.graphs.resource('package', id); }

  private commandColumns(c: SparqlFragment): string {
    return sparql`${c} a wsm:LifecycleCommand ; wsm:id ?id ; wsm:packageName ?packageName ; wsm:version ?version ;
        wsm:commandType ?commandType ; wsm:status ?status ; wsm:createdAt ?createdAt ; wsm:updatedAt ?updatedAt .
      OPTIONAL { ${c} wsm:package ?pkg }
      OPTIONAL { ${c} wsm:parentCommand ?parent }
      OPTIONAL { ${c} wsm:errorMessage ?errorMessage }
      OPTIONAL { ${c} wsm:validationConforms ?conforms ; wsm:validationViolationCount ?violations ;
                      wsm:validationWarningCount ?warnings ; wsm:validationInfoCount ?infos }
      OPTIONAL { ${c} wsm:validationReport ?report }`;
  }

  private static command(b: Binding): LifecycleCommand {
    const pkg = str(b, 'pkg');
    const packageId = pkg ? pkg.slice(pkg.lastIndexOf('/') + 1) : null;
    const parent = str(b, 'parent');
    return {
      id: req(b, 'id'),
      packageInstallationId: packageId,
      packageName: req(b, 'packageName'),
      version: req(b, 'version'),
      commandType: req(b, 'commandType') as CommandType,
      status: req(b, 'status') as CommandStatus,
      errorMessage: str(b, 'errorMessage'),
      createdAt: time(b, 'createdAt'),
      updatedAt: time(b, 'updatedAt'),
      packageInstallation: packageId ? { id: packageId } : null,
      parentCommandId: parent ? parent.slice(parent.lastIndexOf('/') + 1) : null,
    };
  }

  private summary(b: Binding): LifecycleCommandSummary {
    const c = CommandStore.command(b);
    const hasReport = b.conforms !== undefined;
    return {
      id: c.id, version: c.version, commandType: c.commandType, status: c.status, errorMessage: c.errorMessage,
      validationConforms: hasReport ? bool(b, 'conforms') : null,
      validationViolationCount: hasReport ? int(b, 'violations') : null,
      validationWarningCount: hasReport ? int(b, 'warnings') : null,
      validationInfoCount: hasReport ? int(b, 'infos') : null,
      createdAt: c.createdAt, updatedAt: c.updatedAt,
    };
  }

  async get(workspaceId: string, commandId: string): Promise<LifecycleCommand | null> {
    const c = iri(this.commandIri(commandId));
    const rows = await this.store.select(sparql`${prefixes}SELECT * WHERE { GRAPH ${iri(this.graphs.packages(workspaceId))} {
      ${raw(this.commandColumns(c))} } } LIMIT 1`);
    return rows[0] ? CommandStore.command(rows[0]) : null;
  }

  /** The report graph of a command, or null when it never reached validation. */
  async reportGraph(workspaceId: string, commandId: string): Promise<string | null> {
    const c = iri(this.commandIri(commandId));
    const rows = await this.store.select(sparql`${prefixes}SELECT ?report WHERE { GRAPH ${iri(this.graphs.packages(workspaceId))} {
      ${c} wsm:validationReport ?report } } LIMIT 1`);
    return rows[0] ? req(rows[0], 'report') : null;
  }

  /** Commands of one package (by name), newest first. */
  async listForPackage(workspaceId: string, packageName: string, offset: number, limit: number): Promise<LifecycleCommand[]> {
    // No package has 2^31 commands: such an offset answers nothing without asking (Virtuoso refuses an OFFSET past 32 bits).
    if (offset >= 2 ** 31) return [];
    const rows = await this.store.select(sparql`${prefixes}SELECT * WHERE { GRAPH ${iri(this.graphs.packages(workspaceId))} {
      ?c wsm:packageName ${literal(packageName)} .
      ${raw(this.commandColumns(raw('?c')))} } }
      ORDER BY DESC(?createdAt) DESC(?id) OFFSET ${count(offset)} LIMIT ${count(limit)}`);
    return rows.map((b) => CommandStore.command(b));
  }

  async hasCommands(workspaceId: string, packageName: string): Promise<boolean> {
    return await this.store.ask(sparql`${prefixes}ASK { GRAPH ${iri(this.graphs.packages(workspaceId))} {
      ?c wsm:packageName ${literal(packageName)} ; a wsm:LifecycleCommand } }`);
  }

  /** The newest command of a package, with its validation counts. */
  async latestSummary(workspaceId: string, packageName: string): Promise<LifecycleCommandSummary | null> {
    const rows = await this.store.select(sparql`${prefixes}SELECT * WHERE { GRAPH ${iri(this.graphs.packages(workspaceId))} {
      ?c wsm:packageName ${literal(packageName)} .
      ${raw(this.commandColumns(raw('?c')))} } }
      ORDER BY DESC(?createdAt) DESC(?id) LIMIT 1`);
    return rows[0] ? this.summary(rows[0]) : null;
  }

  /** Events of a command, oldest first. */
  async events(workspaceId: string, commandId: string): Promise<CommandEvent[]> {
    const rows = await this.store.select(sparql`${prefixes}SELECT ?id ?message ?level ?createdAt WHERE {
      GRAPH ${iri(this.graphs.command(workspaceId, commandId))} {
        ?e a wsm:CommandEvent ; wsm:id ?id ; wsm:message ?message ; wsm:level ?level ; wsm:sequence ?seq ; wsm:createdAt ?createdAt } }
      ORDER BY ?seq`);
    return rows.map((b) => ({
      id: req(b, 'id'), commandId, message: req(b, 'message'), level: req(b, 'level') as EventLevel,
      createdAt: time(b, 'createdAt'), command: { id: commandId },
    }));
  }

  /** Update op that inserts one event. */
  eventOp(workspaceId: string, commandId: string, sequence: number, level: EventLevel, message: string, now: string): WriteOp {
    const id = newId();
    return updateOp(sparql`${prefixes}INSERT DATA { GRAPH ${iri(this.graphs.command(workspaceId, commandId))} {
      ${iri(this.graphs.resource('event', id))} a wsm:CommandEvent ; wsm:id ${literal(id)} ; wsm:command ${iri(this.commandIri(commandId))} ;
        wsm:message ${literal(message)} ; wsm:level ${literal(level)} ; wsm:sequence ${integer(sequence)} ; wsm:createdAt ${dateTime(now)} . } }`,
    [this.graphs.command(workspaceId, commandId)]);
  }

  /**
   * ASK: has the package a command pending or in progress? The condition of
   * an exclusive submission's write (one active command per package,
   * docs/store.md), so it holds across service instances.
   */
  activeAsk(workspaceId: string, packageName: string): Sparql {
    return sparql`${prefixes}ASK { GRAPH ${iri(this.graphs.packages(workspaceId))} {
      ?c a wsm:LifecycleCommand ; wsm:packageName ${literal(packageName)} ; wsm:status ?status .
      FILTER (?status IN ("pending", "in_progress")) } }`;
  }

  /** The oldest command of the package that is pending or in progress, or null. */
  async active(workspaceId: string, packageName: string): Promise<{ commandId: string; version: string } | null> {
    const rows = await this.store.select(sparql`${prefixes}SELECT ?id ?version WHERE { GRAPH ${iri(this.graphs.packages(workspaceId))} {
      ?c a wsm:LifecycleCommand ; wsm:id ?id ; wsm:packageName ${literal(packageName)} ; wsm:version ?version ; wsm:status ?status ; wsm:createdAt ?createdAt .
      FILTER (?status IN ("pending", "in_progress")) } } ORDER BY ?createdAt LIMIT 1`);
    return rows[0] ? { commandId: req(rows[0], 'id'), version: req(rows[0], 'version') } : null;
  }

  /** Update op that creates a pending command record. */
  createOp(input: { workspaceId: string; id: string; packageName: string; version: string; commandType: CommandType; packageInstallationId: string | null; now: string; parentCommandId?: string | undefined; leaseOwner?: string | undefined }): WriteOp {
    const c = iri(this.commandIri(input.id));
    const pkg = (input.packageInstallationId ? sparql`${c} wsm:package ${iri(this.packageIri(input.packageInstallationId))} .` : '')
      + (input.parentCommandId ? sparql`${c} wsm:parentCommand ${iri(this.commandIri(input.parentCommandId))} .` : '')
      + (input.leaseOwner ? sparql`${c} wsm:leaseOwner ${literal(input.leaseOwner)} .` : '');
    return updateOp(sparql`${prefixes}INSERT DATA { GRAPH ${iri(this.graphs.packages(input.workspaceId))} {
      ${c} a wsm:LifecycleCommand ; wsm:id ${literal(input.id)} ; wsm:packageName ${literal(input.packageName)} ;
        wsm:version ${literal(input.version)} ; wsm:commandType ${literal(input.commandType)} ; wsm:status "pending" ;
        wsm:workspace ${iri(this.graphs.resource('workspace', input.workspaceId))} ;
        wsm:createdAt ${dateTime(input.now)} ; wsm:updatedAt ${dateTime(input.now)} .
      ${raw(pkg)} } } ;
      ${fragmentOf(commandEntryOp(this.graphs, input.workspaceId, this.commandIri(input.id), true))}`, [this.graphs.packages(input.workspaceId), this.graphs.index]);
  }

  /** Update ops that set status (and optionally error, report counts, package) of a command. */
  statusOps(workspaceId: string, commandId: string, status: CommandStatus, now: string, extra: {
    errorMessage?: string; report?: ValidationCounts; packageInstallationId?: string; commandType?: CommandType;
  } = {}): WriteOp[] {
    const g = iri(this.graphs.packages(workspaceId));
    const c = iri(this.commandIri(commandId));
    const inserts: string[] = [sparql`${c} wsm:status ${literal(status)} ; wsm:updatedAt ${dateTime(now)} .`];
    const deletes = ['wsm:status', 'wsm:updatedAt'];
    if (extra.errorMessage !== undefined) {
      inserts.push(sparql`${c} wsm:errorMessage ${literal(extra.errorMessage)} .`);
      deletes.push('wsm:errorMessage');
    }
    if (extra.report) {
      const r = extra.report;
      inserts.push(sparql`${c} wsm:validationConforms ${boolean(r.conforms)} ; wsm:validationViolationCount ${integer(r.violationCount)} ;
        wsm:validationWarningCount ${integer(r.warningCount)} ; wsm:validationInfoCount ${integer(r.infoCount)} ;
        wsm:validationReport ${iri(this.graphs.report(workspaceId, commandId))} .`);
      deletes.push('wsm:validationConforms', 'wsm:validationViolationCount', 'wsm:validationWarningCount', 'wsm:validationInfoCount', 'wsm:validationReport');
    }
    if (extra.commandType) {
      inserts.push(sparql`${c} wsm:commandType ${literal(extra.commandType)} .`);
      deletes.push('wsm:commandType');
    }
    if (extra.packageInstallationId) {
      inserts.push(sparql`${c} wsm:package ${iri(this.packageIri(extra.packageInstallationId))} .`);
      deletes.push('wsm:package');
    }
    const deleteOps = deletes.map((p) => sparql`DELETE WHERE { GRAPH ${g} { ${c} ${raw(p)} ?o } }`);
    const set = updateOp(sparql`${prefixes}${sequence([...deleteOps, sparql`INSERT DATA { GRAPH ${g} { ${raw(inserts.join('\n'))} } }`])}`, [this.graphs.packages(workspaceId)]);
    // The index of workspaces lists the command from its creation until it is finished (src/workspaces/workspace-index.ts):
    // an op of its own, reading nothing, so that an instance not holding the workspace applies it without loading it.
    if (ACTIVE.includes(status)) return [set];
    return [set, updateOp(sparql`${prefixes}${fragmentOf(commandEntryOp(this.graphs, workspaceId, this.commandIri(commandId), false))}`, [this.graphs.index])];
  }

  /**
   * Commands left pending or in progress (by a process that stopped), across
   * workspaces (those of `only`, when given). Read only from each workspace's own packages graph (the graph
   * is built from the workspace's id in the system graph), and only records
   * whose subject is the command IRI of their id and whose `wsm:workspace` is
   * that workspace: nothing a package wrote into a matrix or extension graph
   * can pass for a command (issue 12). Only the workspaces the index of
   * workspaces lists an unfinished command in are read, each on its own (a
   * read naming its graphs: on the cluster store with residency it loads
   * those workspaces only).
   */
  async unfinished(only?: ReadonlySet<string>): Promise<Array<{ workspaceId: string; commandId: string; status: CommandStatus; subject: string; workspace: string; leaseOwner: string | null }>> {
    const out: Array<{ workspaceId: string; commandId: string; status: CommandStatus; subject: string; workspace: string; leaseOwner: string | null }> = [];
    for (const wsId of await workspacesWithUnfinished(this.store, this.graphs)) {
      if (only && !only.has(wsId)) continue;
      const rows = await this.store.select(sparql`${prefixes}SELECT ?ws ?c ?id ?status ?owner WHERE {
        GRAPH ${iri(this.graphs.system)} { ?ws a wsm:Workspace ; wsm:id ${literal(wsId)} }
        GRAPH ${iri(this.graphs.packages(wsId))} { ?c a wsm:LifecycleCommand ; wsm:id ?id ; wsm:status ?status ; wsm:workspace ?ws .
          FILTER (?status IN ("pending", "in_progress"))
          OPTIONAL { ?c wsm:leaseOwner ?owner } } }`);
      for (const b of rows) {
        out.push({
          workspaceId: wsId, commandId: req(b, 'id'), status: req(b, 'status') as CommandStatus,
          subject: req(b, 'c'), workspace: req(b, 'ws'), leaseOwner: str(b, 'owner'),
        });
      }
    }
    return out;
  }

  /**
   * ASK: is the command still unfinished and held by the instance `owner`
   * (its record names it and the instance still holds its lease)? The
   * condition of every write a command's owner makes to it on a shared store.
   */
  heldAsk(workspaceId: string, commandId: string, owner: string, lease: InstanceLease): Sparql {
    return sparql`${prefixes}ASK { GRAPH ${iri(this.graphs.packages(workspaceId))} {
      ${iri(this.commandIri(commandId))} wsm:leaseOwner ${literal(owner)} ; wsm:status ?status .
      FILTER (?status IN ("pending", "in_progress")) }
      GRAPH ${iri(lease.graph)} { ${iri(lease.iri(owner))} a wsm:ServiceInstance } }`;
  }

  /**
   * ASK: is the command still unfinished and its owner without a lease (no
   * record of the instance `owner`, or no owner at all)? The condition of a
   * takeover: an owner that renewed its lease keeps the command. Without
   * `lease`: still unfinished and claimed by `owner` (placement: the
   * instance holding the workspace's lease fails a command claimed by
   * another, whatever that one's lease on its commands).
   */
  orphanedAsk(workspaceId: string, commandId: string, owner: string | null, lease?: InstanceLease): Sparql {
    const c = iri(this.commandIri(commandId));
    const held = owner === null
      ? sparqlFragment`FILTER NOT EXISTS { ${c} wsm:leaseOwner ?anyOwner }`
      : sparqlFragment`${c} wsm:leaseOwner ${literal(owner)} .`;
    const alive = owner === null || !lease ? raw('') : sparqlFragment`FILTER NOT EXISTS { GRAPH ${iri(lease.graph)} { ${iri(lease.iri(owner))} a wsm:ServiceInstance } }`;
    return sparql`${prefixes}ASK { GRAPH ${iri(this.graphs.packages(workspaceId))} {
      ${c} wsm:status ?status . ${held}
      FILTER (?status IN ("pending", "in_progress")) }
      ${alive} }`;
  }

  /** Highest event sequence of a command (0 when none). */
  async lastSequence(workspaceId: string, commandId: string): Promise<number> {
    const rows = await this.store.select(sparql`${prefixes}SELECT (MAX(?s) AS ?max) WHERE { GRAPH ${iri(this.graphs.command(workspaceId, commandId))} {
      ?e wsm:sequence ?s } }`);
    return rows[0]?.max ? Number(rows[0].max.value) : 0;
  }
}

/**
 * Runs lifecycle commands, one active command per package (workspace id +
 * package name): later commands of the same package wait in a queue
 * (REDEPLOY, uploads), or are refused with 409 when `exclusive` (P1, P6).
 * Statuses go pending -> in_progress -> completed | failed.
 */
export class CommandRunner {
  private readonly queues = new Map<string, Queued[]>();
  /** Per workspace: the tail of its chain of commands. */
  private readonly chains = new Map<string, Promise<void>>();

  /** Whether a command of the workspace is being accepted, queued or running here (cluster placement keeps the workspace's lease meanwhile). */
  hasWork(workspaceId: string): boolean {
    if (this.chains.has(workspaceId)) return true;
    // Being accepted: queued before its pending record is written, in a chain only after.
    const prefix = `${workspaceId}\u0000`;
    for (const key of this.queues.keys()) if (key.startsWith(prefix)) return true;
    return false;
  }

  /** The workspaces with a command being accepted, queued or running here. */
  private workspacesAtWork(): Set<string> {
    const out = new Set(this.chains.keys());
    for (const key of this.queues.keys()) out.add(key.slice(0, key.indexOf('\u0000')));
    return out;
  }

  /**
   * Placement (docs/cluster.md "Placement"): commands claimed by another
   * instance in a workspace whose lease this instance holds are failed
   * (when it takes the lease, and at each sweep), and this instance's
   * commands in a workspace another instance took are stopped.
   */
  usePlacement(leases: WorkspaceLeases): void {
    this.leases.placement = { leases, working: () => this.workspacesAtWork(), abandon: (ws) => this.abandon(ws) };
  }

  /** Placement: this instance took the workspace's lease; commands its previous holder claimed are failed. */
  leaseTaken(workspaceId: string): void {
    this.leases.failClaimedElsewhere([workspaceId]).catch((err: unknown) => this.logger.error({ err, workspaceId }, 'could not look for lifecycle commands left by the previous holder of a workspace'));
  }

  /** Placement: this instance's lease on the workspace was found taken over or ended; its commands there stop if another instance holds it. */
  leaseLost(workspaceId: string): void {
    this.leases.checkLost(workspaceId).catch((err: unknown) => this.logger.warn({ err, workspaceId }, 'could not ask who holds a workspace whose lease this instance lost'));
  }

  /** Stops this instance's commands of a workspace another instance took: queued ones do not run, a running one's job is aborted. */
  private abandon(workspaceId: string): void {
    const prefix = `${workspaceId}\u0000`;
    for (const [key, queue] of this.queues) {
      if (!key.startsWith(prefix)) continue;
      for (const item of queue) {
        item.abandoned = true;
        item.abort?.abort(new TakenOver());
      }
    }
  }
  private readonly clock = new Clock();
  private readonly idle = new Set<() => void>();
  private stopped = false;
  /** Who holds each command, and recovery of those nobody holds. */
  private readonly leases: CommandLeases;

  constructor(readonly commands: CommandStore, private readonly store: QuadStore, private readonly logger: Logger) {
    this.leases = new CommandLeases(commands, store, logger, () => this.now());
  }

  /** A write to a command by its owner; false when another instance took it over (`CommandLeases.write`). */
  private held(item: Queued, ops: WriteInput[]): Promise<boolean> {
    const written = this.leases.write(item.request.workspaceId, item.id, item.owner, ops);
    // Placement: a write refused because another instance took the workspace stops the command now, not at its end.
    if (this.leases.placement) written.catch(() => this.leaseLost(item.request.workspaceId));
    return written;
  }

  private static key(workspaceId: string, packageName: string): string { return `${workspaceId}\u0000${packageName}`; }

  now(): string { return this.clock.now(); }

  /** The command a package is busy with (running, or first in line), or null. */
  active(workspaceId: string, packageName: string): { commandId: string; version: string } | null {
    const head = this.liveHead(workspaceId, this.queues.get(CommandRunner.key(workspaceId, packageName)));
    return head ? { commandId: head.id, version: head.version } : null;
  }

  /**
   * The first queued command that has not finished. A command is finished
   * once its final status write is issued, a moment before it leaves its
   * queue: a client that saw `completed` must not get a 409 for its next
   * request. Kept in memory (`settled`), so the check needs no read.
   */
  private liveHead(_workspaceId: string, queue: Queued[] | undefined): Queued | undefined {
    return queue?.find((item) => !item.settled);
  }

  /** Number of commands queued or running, across packages. */
  get busy(): number {
    let n = 0;
    for (const q of this.queues.values()) n += q.length;
    return n;
  }

  /**
   * Accepts a command: the 409 check and the reservation happen synchronously,
   * so two concurrent requests of this process cannot both pass; then the
   * pending record is written and the command queued. The pending record of
   * an exclusive command (P1, P6) is a conditional write, applied only while
   * the store holds no unfinished command of the package, so the rule holds
   * across service instances sharing one store too (docs/store.md).
   * Resolves with the pending command.
   */
  async submit(request: CommandRequest): Promise<LifecycleCommand> {
    for (let attempt = 0; ; attempt++) {
      const accepted = await this.submitOnce(request);
      if (accepted) return accepted;
      // The store had an unfinished command that finished before it could be named: try again.
      if (attempt >= 8) throw conflict(`Package "${request.packageName}" has an active operation; wait for it to finish and try again`);
    }
  }

  private conflictWith(request: CommandRequest, head: { id: string; version: string }): AppError {
    const details = { existing: { commandId: head.id, version: head.version }, requested: { version: request.version } };
    return conflict(`Package "${request.packageName}" has an active operation (command ${head.id}, version ${head.version}); wait for it to finish and try again`, details);
  }

  private async submitOnce(request: CommandRequest): Promise<LifecycleCommand | null> {
    if (this.stopped) throw new AppError('SERVICE_UNAVAILABLE', 'The service is stopping; try again in a moment');
    const key = CommandRunner.key(request.workspaceId, request.packageName);
    const queue = this.queues.get(key) ?? [];
    const head = this.liveHead(request.workspaceId, queue);
    if (head && request.exclusive) throw this.conflictWith(request, head);
    const id = newId();
    const item: Queued = { id, version: request.version, request, owner: this.leases.owner };
    queue.push(item);
    this.queues.set(key, queue);
    const now = this.now();
    const dequeue = () => {
      queue.splice(queue.indexOf(item), 1);
      if (queue.length === 0 && this.queues.get(key) === queue) this.queues.delete(key);
    };
    let applied: boolean;
    try {
      const create = [this.commands.createOp({ ...request, id, now, leaseOwner: item.owner })];
      if (request.exclusive) applied = await this.store.writeIf({ ask: this.commands.activeAsk(request.workspaceId, request.packageName), expect: false }, create);
      else { await this.store.write(create); applied = true; }
    } catch (err) {
      dequeue();
      throw err;
    }
    if (!applied) {
      dequeue();
      const active = await this.commands.active(request.workspaceId, request.packageName);
      if (active) throw this.conflictWith(request, { id: active.commandId, version: active.version });
      return null;
    }
    const accepted = (await this.commands.get(request.workspaceId, id))!;
    // Commands of one workspace run one at a time, in the order they were accepted: each reads the
    // workspace (installed matrices, roles) and then writes, so running them serially keeps those reads true.
    const previous = this.chains.get(request.workspaceId) ?? Promise.resolve();
    const chain = previous.then(() => this.execute(item)).then(() => {
      queue.splice(queue.indexOf(item), 1);
      if (queue.length === 0 && this.queues.get(key) === queue) this.queues.delete(key);
      if (this.chains.get(request.workspaceId) === chain) this.chains.delete(request.workspaceId);
      if (this.busy === 0) for (const resolve of [...this.idle]) resolve();
    });
    this.chains.set(request.workspaceId, chain);
    return accepted;
  }

  /**
   * Runs a command as part of a running one (a dependency installed for it,
   * docs/packages.md, "Dependencies"): the child gets its own record, with
   * `parentCommandId`, statuses and events, and runs now, inside its parent's
   * turn of the workspace (waiting in the workspace's line would wait for
   * the parent itself). Resolves with the finished child (completed or failed).
   * Fails when the child's package already has an active command.
   */
  async runChild(request: CommandRequest, parentCommandId: string): Promise<LifecycleCommand> {
    const key = CommandRunner.key(request.workspaceId, request.packageName);
    const queue = this.queues.get(key) ?? [];
    const head = this.liveHead(request.workspaceId, queue);
    if (head) {
      throw new CommandFailure(`Package "${request.packageName}" has an active operation (command ${head.id}, version ${head.version})`,
        'Wait for it to finish and run this command again.');
    }
    const id = newId();
    const item: Queued = { id, version: request.version, request, owner: this.leases.owner };
    queue.push(item);
    this.queues.set(key, queue);
    try {
      await this.store.write([this.commands.createOp({ ...request, id, now: this.now(), parentCommandId, leaseOwner: item.owner })]);
      await this.execute(item);
    } finally {
      queue.splice(queue.indexOf(item), 1);
      if (queue.length === 0 && this.queues.get(key) === queue) this.queues.delete(key);
    }
    return (await this.commands.get(request.workspaceId, id))!;
  }

  /**
   * Runs a command's job and writes its outcome: `in_progress` and the
   * events as it goes (`CommandLog`), then everything it changes with
   * `completed` in one write, or `failed` with its report and an ERROR event.
   */
  private async execute(item: Queued): Promise<void> {
    const { request, id } = item;
    const ws = request.workspaceId;
    const abort = new AbortController();
    item.abort = abort;
    const log = new CommandLog(this.commands, ws, id, (ops) => this.held(item, ops), this.leases.shared, () => this.now(), abort.signal);
    let type: string = request.commandType;
    let outcome: 'completed' | 'failed' = 'failed';
    try {
      if (item.abandoned) throw new TakenOver();
      if (this.stopped) throw new CommandFailure('The service stopped before this command started', 'Run the command again.');
      log.issue([
        ...this.commands.statusOps(ws, id, 'in_progress', this.now()),
        log.eventOp('INFO', `${request.commandType} of package "${request.packageName}" version ${request.version} started`),
      ]);
      // Stopped (placement: another instance took the workspace) while the job runs: its work is dropped at once.
      const job = request.job(log.context);
      job.catch(() => {}); // once abandoned, its end is nobody's
      const result = await Promise.race([job, new Promise<never>((_, reject) => {
        const stop = () => reject(new TakenOver());
        if (abort.signal.aborted) stop();
        abort.signal.addEventListener('abort', stop, { once: true });
      })]);
      await log.settle();
      type = result.commandType ?? request.commandType;
      item.settled = true;
      // Everything the command changes, with its `completed` status: on a shared store only while this instance holds it.
      // The report (a graph of its own, named by no other op) first: an install's write then begins with
      // its graphs' replacing loads, which a large write can check as it publishes them (`WriteOp`).
      const report = log.reportCounts;
      const done = await this.held(item, [
        ...log.reportOps(),
        ...result.ops,
        ...this.commands.statusOps(ws, id, 'completed', this.now(), {
          ...(report ? { report } : {}),
          ...(result.packageInstallationId ? { packageInstallationId: result.packageInstallationId } : {}),
          ...(result.commandType && result.commandType !== request.commandType ? { commandType: result.commandType } : {}),
        }),
        log.eventOp('SUCCESS', result.message),
      ]);
      if (!done) throw new TakenOver();
      outcome = 'completed';
    } catch (err) {
      // Placement: a command whose workspace another instance took cannot write its failure here; that instance does.
      const lost = err instanceof TakenOver || item.abandoned || await this.leases.checkLost(ws).catch(() => false);
      if (lost) {
        // Another instance found this instance's lease ended (on the command, or on its workspace) and fails the command: nothing of it was applied here.
        item.settled = true;
        abort.abort(new TakenOver());
        this.logger.warn({ commandId: id, workspaceId: ws }, 'lifecycle command taken over by another instance (this instance\'s lease ended); its work is dropped');
        countLifecycleCommand(type, outcome);
        return;
      }
      item.settled = true;
      await this.recordFailure(item, log, err);
    }
    countLifecycleCommand(type, outcome);
    if (request.onOutcome) {
      const done = await this.commands.get(ws, id);
      try {
        if (done) await request.onOutcome(done);
      } catch (err) {
        this.logger.error({ err, commandId: id }, 'outcome hook of a lifecycle command failed');
      }
    }
  }

  /** Writes a command's `failed` status, its report (if it has one) and an ERROR event saying what to do. */
  private async recordFailure(item: Queued, log: CommandLog, err: unknown): Promise<void> {
    const { request, id } = item;
    const ws = request.workspaceId;
    const failure = err instanceof CommandFailure ? err
      : err instanceof AppError ? new CommandFailure(err.message)
        : new CommandFailure('The command failed because of an internal error', 'Check the service log; if the problem persists, report it with this command id.');
    if (!(err instanceof CommandFailure) && !(err instanceof AppError)) this.logger.error({ err, commandId: id }, 'lifecycle command failed');
    const message = failure.hint ? `${failure.message}. ${failure.hint}` : failure.message;
    const report = log.reportCounts;
    const failedOps = (withReport: boolean): WriteInput[] => [
      ...(withReport ? log.reportOps() : []),
      ...this.commands.statusOps(ws, id, 'failed', this.now(), { errorMessage: failure.message, ...(withReport && report ? { report } : {}) }),
      log.eventOp('ERROR', message),
    ];
    // The status and events issued before go first (a failed one is what failed the command, maybe).
    await log.drain();
    try {
      await this.held(item, failedOps(true));
    } catch (writeErr) {
      this.logger.error({ err: writeErr, commandId: id }, 'could not store the report of a failed lifecycle command');
      // At least the status: a command must never stay in progress.
      await this.held(item, failedOps(false)).catch((err: unknown) => this.logger.error({ err, commandId: id }, 'could not record the failure of a lifecycle command'));
    }
  }

  /** At start: fails the commands a stop of the process (or the end of their instance's lease) cut off (`CommandLeases.recover`). */
  recover(): Promise<number> { return this.leases.recover(); }

  /** Resolves when no command is queued or running. */
  whenIdle(): Promise<void> {
    if (this.busy === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => { this.idle.delete(done); resolve(); };
      this.idle.add(done);
    });
  }

  /** Stops accepting commands, lets queued ones fail fast, and waits for the running ones. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.leases.stop();
    await this.whenIdle();
  }
}

export { ACTIVE as ACTIVE_STATUSES };
