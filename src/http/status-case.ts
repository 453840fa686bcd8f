/**
 * WSM_STATUS_CASE (docs/api.md, "Conventions"): the ecosystem's client expects
 * upper-case command statuses (PENDING, IN_PROGRESS, COMPLETED, FAILED).
 * Statuses are stored lower-case; with `upper` every answer that carries a
 * command status is given them upper-case. Answers only, never stored data.
 */
export type StatusCase = 'lower' | 'upper';

interface WithStatus { status: string }
interface WithLatest { latestCommand: WithStatus | null }

export class StatusPresenter {
  constructor(readonly statusCase: StatusCase) {}

  status(value: string): string {
    return this.statusCase === 'upper' ? value.toUpperCase() : value;
  }

  /** A command (or command summary) as answered. */
  command<T extends WithStatus>(command: T): T {
    return this.statusCase === 'upper' ? { ...command, status: command.status.toUpperCase() } : command;
  }

  commands<T extends WithStatus>(commands: T[]): T[] {
    return this.statusCase === 'upper' ? commands.map((c) => this.command(c)) : commands;
  }

  /** An installation, whose latest command carries a status. */
  installation<T extends WithLatest>(installation: T): T {
    if (this.statusCase !== 'upper' || !installation.latestCommand) return installation;
    return { ...installation, latestCommand: this.command(installation.latestCommand) };
  }
}
