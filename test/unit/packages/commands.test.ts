import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openDurableStore, type DurableStore } from '../../../src/store/embedded/durable.js';
import { Graphs } from '../../../src/rdf/graphs.js';
import { createLogger } from '../../../src/logger.js';
import { CommandFailure, CommandRunner, CommandStore, type LifecycleCommand } from '../../../src/packages/commands.js';
import { sparql, iri, raw } from '../../../src/rdf/sparql.js';

const graphs = new Graphs('https://t.example/');
const WS = '11111111-1111-4111-8111-111111111111';

async function open(dir: string): Promise<{ store: DurableStore; runner: CommandRunner; commands: CommandStore }> {
  const store = await openDurableStore(dir);
  const commands = new CommandStore(store, graphs);
  return { store, commands, runner: new CommandRunner(commands, store, createLogger('silent')) };
}

async function waitFor(get: () => Promise<LifecycleCommand | null>, done: (c: LifecycleCommand) => boolean): Promise<LifecycleCommand> {
  for (let i = 0; i < 400; i++) {
    const c = await get();
    if (c && done(c)) return c;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('timed out');
}

describe('lifecycle command runner', () => {
  let dir: string;
  let s: Awaited<ReturnType<typeof open>>;
  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'wsm-cmd-'));
    s = await open(dir);
    await s.store.update(sparql`INSERT DATA { GRAPH ${iri(graphs.system)} { ${iri(graphs.resource('workspace', WS))} a <https://w3id.org/wsm/ns#Workspace> ; <https://w3id.org/wsm/ns#id> "${raw(WS)}" } }`, [graphs.system]);
  });
  afterEach(async () => { await s.store.close().catch(() => {}); rmSync(dir, { recursive: true, force: true }); });

  const base = { workspaceId: WS, packageName: 'pkg', version: '1.0.0', packageInstallationId: null } as const;

  it('runs a command pending -> in_progress -> completed, writing its ops with the status, events oldest first', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const cmd = await s.runner.submit({ ...base, commandType: 'INSTALL', exclusive: true, job: async (ctx) => {
      await ctx.event('INFO', 'read 3 triples');
      await gate;
      return { ops: [{ kind: 'update', sparql: sparql`INSERT DATA { GRAPH <urn:g:data> { <urn:a> <urn:b> <urn:c> } }`, graphs: ['urn:g:data'] }], message: 'done', packageInstallationId: '22222222-2222-4222-8222-222222222222' };
    } });
    expect(cmd.status).to.equal('pending');
    expect(cmd.packageInstallation).to.equal(null);
    const running = await waitFor(() => s.commands.get(WS, cmd.id), (c) => c.status === 'in_progress');
    expect(running.status).to.equal('in_progress');
    expect(await s.store.dumpGraph('urn:g:data')).to.equal('');
    release();
    const done = await waitFor(() => s.commands.get(WS, cmd.id), (c) => c.status === 'completed');
    expect(done.packageInstallationId).to.equal('22222222-2222-4222-8222-222222222222');
    expect(await s.store.dumpGraph('urn:g:data')).to.contain('<urn:a>');
    const events = await s.commands.events(WS, cmd.id);
    expect(events.map((e) => e.level)).to.deep.equal(['INFO', 'INFO', 'SUCCESS']);
    expect(events[1]!.message).to.equal('read 3 triples');
    expect(events.every((e) => e.command.id === cmd.id)).to.equal(true);
  });

  it('refuses an exclusive command while one is active (409 with existing and requested) and queues others behind it', async () => {
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const first = await s.runner.submit({ ...base, commandType: 'INSTALL', exclusive: true, job: async () => { await gate; order.push('first'); return { ops: [], message: 'ok' }; } });
    let caught: unknown;
    try {
      await s.runner.submit({ ...base, version: '2.0.0', commandType: 'UPDATE', exclusive: true, job: async () => ({ ops: [], message: 'never' }) });
    } catch (err) { caught = err; }
    expect((caught as { code: string }).code).to.equal('CONFLICT');
    expect((caught as { details: unknown }).details).to.deep.equal({ existing: { commandId: first.id, version: '1.0.0' }, requested: { version: '2.0.0' } });
    const second = await s.runner.submit({ ...base, commandType: 'REDEPLOY', exclusive: false, job: async () => { order.push('second'); return { ops: [], message: 'ok' }; } });
    expect((await s.commands.get(WS, second.id))!.status).to.equal('pending');
    release();
    await s.runner.whenIdle();
    expect(order).to.deep.equal(['first', 'second']);
    expect((await s.commands.get(WS, second.id))!.status).to.equal('completed');
    const listed = await s.commands.listForPackage(WS, 'pkg', 0, 10);
    expect(listed.map((c) => c.id)).to.deep.equal([second.id, first.id]);
  });

  it('fails a command with an ERROR event saying what to do, writing nothing of its ops, and keeps its report', async () => {
    const cmd = await s.runner.submit({ ...base, commandType: 'INSTALL', exclusive: true, job: async (ctx) => {
      ctx.setReport({ conforms: false, violationCount: 1, warningCount: 0, infoCount: 0 }, '<urn:r> <http://www.w3.org/ns/shacl#conforms> "false"^^<http://www.w3.org/2001/XMLSchema#boolean> .\n');
      throw new CommandFailure('Validation found 1 violation', 'Fix the matrix and install again.');
    } });
    await s.runner.whenIdle();
    const failed = (await s.commands.get(WS, cmd.id))!;
    expect(failed.status).to.equal('failed');
    expect(failed.errorMessage).to.equal('Validation found 1 violation');
    const last = (await s.commands.events(WS, cmd.id)).at(-1)!;
    expect(last.level).to.equal('ERROR');
    expect(last.message).to.contain('Fix the matrix');
    expect(await s.commands.reportGraph(WS, cmd.id)).to.equal(graphs.report(WS, cmd.id));
    expect(await s.store.dumpGraph(graphs.report(WS, cmd.id))).to.contain('urn:r');
    expect(await s.commands.latestSummary(WS, 'pkg')).to.include({ validationConforms: false, validationViolationCount: 1 });
  });

  it('marks a command left in progress by a stopped process failed ("interrupted") at the next start', async () => {
    const cmd = await s.runner.submit({ ...base, commandType: 'INSTALL', exclusive: true, job: () => new Promise(() => {}) });
    await waitFor(() => s.commands.get(WS, cmd.id), (c) => c.status === 'in_progress');
    await s.store.close();
    s = await open(dir);
    expect((await s.commands.get(WS, cmd.id))!.status).to.equal('in_progress');
    expect(await s.runner.recover()).to.equal(1);
    const failed = (await s.commands.get(WS, cmd.id))!;
    expect(failed.status).to.equal('failed');
    expect(failed.errorMessage).to.match(/interrupted/i);
    const events = await s.commands.events(WS, cmd.id);
    expect(events.at(-1)!.level).to.equal('ERROR');
    expect(events.at(-1)!.message).to.match(/interrupted/i);
    expect(events.length).to.equal(2);
    expect(await s.runner.recover()).to.equal(0);
  });
});
