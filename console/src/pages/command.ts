import { createParser } from 'eventsource-parser';
import { ApiError, authHeaders, get, message, seg } from '../api.js';
import { fill, h, loading, notice, statusBadge, table, when } from '../dom.js';
import type { PageContext } from '../main.js';
import type { CommandEvent, LifecycleCommand, ValidationEntry, ValidationReport } from '../types.js';

const FINISHED = new Set(['completed', 'failed']);
/** Statuses may be answered upper-case (WSM_STATUS_CASE); compare them lower-case. */
const finished = (status: string) => FINISHED.has(String(status).toLowerCase());
const POLL_MS = 500;

const sleep = (ms: number, signal: AbortSignal) => new Promise<void>((resolve) => {
  const timer = setTimeout(resolve, ms);
  signal.addEventListener('abort', () => { clearTimeout(timer); resolve(); }, { once: true });
});

/**
 * Follows a command's log. First asks P10 for Server-Sent Events
 * (`Accept: text/event-stream`, read from a fetch body since EventSource
 * cannot send the credential); when the service answers JSON instead, polls
 * P10 until P8 says the command finished. Calls `onEvent` once per event id.
 */
export async function followLog(workspace: string, commandId: string, onEvent: (e: CommandEvent) => void, onMode: (mode: 'stream' | 'polling') => void, signal: AbortSignal): Promise<void> {
  const seen = new Set<string>();
  const take = (e: CommandEvent) => {
    if (!e || typeof e.message !== 'string') return;
    const key = e.id ?? `${e.createdAt}|${e.message}`;
    if (seen.has(key)) return;
    seen.add(key);
    onEvent(e);
  };
  const url = `/api/v1/packages/${seg(workspace)}/commands/${seg(commandId)}/events`;
  const res = await fetch(url, { headers: { ...authHeaders(), Accept: 'text/event-stream, application/json;q=0.5' }, signal }).catch((err) => {
    if (signal.aborted) return null;
    throw err;
  });
  if (!res) return;
  if (res.ok && (res.headers.get('content-type') ?? '').startsWith('text/event-stream') && res.body) {
    onMode('stream');
    const parser = createParser({
      onEvent: (event) => {
        if (!event.data) return;
        try {
          const data = JSON.parse(event.data) as CommandEvent | CommandEvent[];
          for (const e of Array.isArray(data) ? data : [data]) take({ ...e, id: e.id ?? event.id ?? '' });
        } catch {
          // a non-JSON event (a keep-alive or a status word): nothing to show
        }
      },
    });
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parser.feed(value);
      }
    } catch (err) {
      if (!signal.aborted) throw err;
    }
    return;
  }
  onMode('polling');
  if (res.ok) {
    const body = (await res.json()) as { data: CommandEvent[] };
    for (const e of body.data) take(e);
  } else if (res.status !== 406) {
    await res.body?.cancel();
  }
  for (;;) {
    if (signal.aborted) return;
    const command = await get<LifecycleCommand>(`/api/v1/packages/${seg(workspace)}/commands/${seg(commandId)}`, { signal });
    for (const e of await get<CommandEvent[]>(url, { signal })) take(e);
    if (finished(command.status)) return;
    await sleep(POLL_MS, signal);
  }
}

function entries(report: ValidationReport): Array<{ severity: string } & ValidationEntry> {
  return [
    ...report.violations.map((e) => ({ severity: 'Violation', ...e })),
    ...report.warnings.map((e) => ({ severity: 'Warning', ...e })),
    ...report.infos.map((e) => ({ severity: 'Info', ...e })),
  ];
}

async function showReport(ctx: PageContext, commandId: string, into: HTMLElement): Promise<void> {
  fill(into, loading('Loading the validation report…'));
  try {
    const report = await get<ValidationReport>(`/api/v1/packages/${seg(ctx.workspace)}/commands/${seg(commandId)}/validation-report`);
    const rows = entries(report);
    fill(into,
      h('p', { id: 'report-summary' },
        report.conforms ? h('span', { class: 'badge status-completed' }, 'conforms') : h('span', { class: 'badge status-failed' }, 'does not conform'),
        ` ${report.violationCount} violations, ${report.warningCount} warnings, ${report.infoCount} infos`),
      rows.length
        ? table(['Severity', 'Focus node', 'Path', 'Value', 'Message'], rows.map((e) => [
          h('span', { class: `badge severity-${e.severity.toLowerCase()}` }, e.severity), h('code', null, e.focusNode ?? ''), h('code', null, e.path ?? ''), e.value ?? '', e.message ?? '',
        ]), { id: 'report' })
        : null);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) fill(into, h('p', { class: 'muted', id: 'report-summary' }, 'This command has no validation report (it stopped before validation).'));
    else fill(into, h('p', { class: 'notice error' }, message(err)));
  }
}

/** One lifecycle command: its status, its live log, and its validation report once it finished. */
export async function commandPage(ctx: PageContext): Promise<void> {
  const commandId = ctx.rest[0];
  if (!commandId) throw new Error('No command id in the address');
  const path = `/api/v1/packages/${seg(ctx.workspace)}/commands/${seg(commandId)}`;
  const head = h('div', { id: 'command' }, loading('Loading the command…'));
  const log = h('ol', { id: 'log', class: 'log' });
  const mode = h('span', { id: 'log-mode', class: 'muted' }, '(connecting…)');
  const report = h('div', { id: 'report-box' }, h('p', { class: 'muted' }, 'The report is shown once the command has finished.'));
  const status = notice();
  const showCommand = (c: LifecycleCommand) => fill(head,
    h('p', null, h('strong', null, `${c.commandType} ${c.packageName} ${c.version}`), ' ', h('span', { id: 'command-status' }, statusBadge(c.status))),
    c.errorMessage ? h('p', { class: 'notice error', id: 'command-error' }, c.errorMessage) : null,
    h('p', { class: 'muted' }, `Started ${when(c.createdAt)}, last change ${when(c.updatedAt)}`));
  fill(ctx.main,
    h('h1', null, 'Lifecycle command'),
    head, status,
    h('h2', null, 'Log ', mode),
    log,
    h('h2', null, 'Validation report'),
    report);
  showCommand(await get<LifecycleCommand>(path));
  try {
    await followLog(ctx.workspace, commandId, (e) => {
      log.append(h('li', { class: `level-${String(e.level).toLowerCase()}` }, h('time', null, new Date(e.createdAt).toLocaleTimeString()), ' ', h('span', { class: 'level' }, e.level), ' ', e.message));
    }, (m) => { mode.textContent = m === 'stream' ? '(live: event stream)' : '(live: polling)'; }, ctx.signal);
  } catch (err) {
    if (!ctx.signal.aborted) status.show(`The log stopped: ${message(err)}`, 'error');
  }
  if (ctx.signal.aborted) return;
  // The stream ends when the command finished; read its final state once more.
  let final = await get<LifecycleCommand>(path);
  while (!finished(final.status) && !ctx.signal.aborted) {
    await sleep(POLL_MS, ctx.signal);
    final = await get<LifecycleCommand>(path);
  }
  if (ctx.signal.aborted) return;
  showCommand(final);
  mode.textContent = '(finished)';
  head.dataset.finished = final.status.toLowerCase();
  await showReport(ctx, commandId, report);
}
