/**
 * Export and import of one workspace (docs/backup.md): everything of it as
 * an RDF dataset, N-Quads or TriG.
 *
 * An export is the workspace's own graphs (`<base>workspaces/<id>/...`:
 * packages and matrices, derived roles and agents, members and
 * assignments, slash commands, extensions, command history) and, in the
 * system graph, the workspace's record and the profiles of its members:
 * nothing else of a user (API keys, passwords) and nothing of the
 * registry or other workspaces. It is written graph by graph as the store
 * dumps them, so its memory is bounded by the largest graph, never the
 * whole workspace.
 *
 * An import is checked and turned into loads in a worker thread
 * (`import-check.ts`), then written as one conditional write: all of it
 * or nothing, refused when the slug or the workspace's id exists
 * meanwhile.
 */
import type { Writable } from 'node:stream';
import type { QuadStore, WriteInput } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { iri, join, literal, raw, sequence, sparql, sparqlFragment, type SparqlFragment } from '../rdf/sparql.js';
import { indexAutoUpdateOp, indexBuiltOp, indexMembersOp, indexUnfinishedOp } from './workspace-index.js';
import { prefixes } from '../rdf/vocab.js';
import { badRequest, conflict } from '../errors.js';
import { spawnModuleWorker } from '../workers/spawn.js';
import type { UserService } from '../users/service.js';
import type { Workspace, WorkspaceService } from './service.js';
import { PROFILE_FIELDS, WORKSPACE_FIELDS, type ImportFormat, type ImportPlan } from './import-check.js';
import type { ImportAnswer, ImportJob } from './import-worker.js';

export const EXPORT_TYPES = ['application/n-quads', 'application/trig'] as const;
export type ExportType = (typeof EXPORT_TYPES)[number];

/** Lines of a graph's N-Triples handed to the output at a time. */
const CHUNK_CHARS = 256 * 1024;

export class WorkspaceTransfer {
  constructor(
    private readonly store: QuadStore,
    private readonly graphs: Graphs,
    private readonly workspaces: WorkspaceService,
    private readonly users: UserService,
  ) {}

  /** The workspace record and its members' profiles (the owner's among them), as N-Triples of the system graph. */
  private async systemPart(workspace: Workspace): Promise<string> {
    const sys = iri(this.graphs.system);
    const w = iri(this.workspaces.workspaceIri(workspace.id));
    const profile = (subject: SparqlFragment) => sparql`${prefixes}
      CONSTRUCT { ?s ?p ?o } WHERE {
        ${subject}
        GRAPH ${sys} { ?s a wsm:User ; ?p ?o
          VALUES ?p { ${join([...PROFILE_FIELDS].map((f) => iri(f)))} } }
      }`;
    // Three queries, not one UNION: Virtuoso answers a UNION of a pattern and a VALUES branch, joined with the system graph, with nothing.
    const parts = await Promise.all([
      this.store.construct(sparql`${prefixes}CONSTRUCT { ${w} ?p ?o } WHERE {
        GRAPH ${sys} { ${w} ?p ?o VALUES ?p { ${join([...WORKSPACE_FIELDS].map((f) => iri(f)))} } } }`),
      this.store.construct(profile(sparqlFragment`GRAPH ${iri(this.graphs.iam(workspace.id))} { ?principal a wsm:Principal ; wsm:actor ?s }`)),
      this.store.construct(profile(sparqlFragment`BIND (${iri(this.users.userIri(workspace.owner.id))} AS ?s)`)),
    ]);
    // The owner is a member too: each triple once.
    const lines = new Set(parts.join('\n').split('\n').filter((line) => line.trim() && !line.startsWith('#')));
    return lines.size ? `${[...lines].join('\n')}\n` : '';
  }

  /** Writes the workspace to `out` as `type`; resolves once the last byte was handed to it (the caller ends it). */
  async exportTo(workspace: Workspace, type: ExportType, out: Writable): Promise<void> {
    const prefix = this.graphs.workspacePrefix(workspace.id);
    const names = (await this.store.graphNames(prefix)).filter((g) => g.startsWith(prefix)).sort();
    const write = async (text: string): Promise<void> => {
      if (text && !out.write(text)) await drained(out);
    };
    const graph = async (name: string, triples: string): Promise<void> => {
      if (!triples) return;
      if (type === 'application/trig') await write(`<${name}> {\n`);
      for (const piece of linesInPieces(triples)) {
        await write(type === 'application/trig' ? piece : toQuads(piece, name));
      }
      if (type === 'application/trig') await write('}\n');
    };
    await graph(this.graphs.system, await this.systemPart(workspace));
    for (const name of names) {
      if (out.destroyed) return;
      await graph(name, await this.store.dumpGraph(name));
    }
  }

  /** Makes a workspace of an export (see the module comment); the new workspace. */
  async importWorkspace(body: Uint8Array, format: ImportFormat, slug: string | undefined): Promise<Workspace> {
    const plan = await parseInWorker({ bytes: body, request: { format, targetBase: this.graphs.base, ...(slug !== undefined ? { slug } : {}) } });
    if (await this.workspaces.find(plan.workspaceId)) {
      throw conflict(`A workspace with id ${plan.workspaceId} already exists: this export was imported before, or comes from this service`);
    }
    if (await this.workspaces.find(plan.slug)) {
      throw conflict(`A workspace with slug "${plan.slug}" already exists; import under another slug with ?slug=`);
    }
    const newUsers: string[] = [];
    for (const username of plan.usernames) if (!(await this.users.get({ username }))) newUsers.push(username);
    const sys = this.graphs.system;
    const ops: WriteInput[] = [{ kind: 'load', graph: sys, format: 'application/n-triples',
      data: plan.workspaceRecord + newUsers.map((u) => plan.profiles[u]!).join('') }];
    for (const [graph, data] of Object.entries(plan.graphs)) ops.push({ kind: 'load', graph, format: 'application/n-triples', data });
    // The index of workspaces: the imported workspace's members and unfinished commands, as loaded.
    ops.push({ kind: 'update', sparql: sparql`${prefixes}${sequence([indexMembersOp(this.graphs, plan.workspaceId), indexUnfinishedOp(this.graphs, plan.workspaceId), indexAutoUpdateOp(this.graphs, plan.workspaceId), indexBuiltOp(this.graphs)])}`, graphs: [this.graphs.index] });
    const userIris = newUsers.map((u) => iri(this.users.userIri(this.users.idOf(u))));
    const taken = sparql`${prefixes}ASK {
      { GRAPH ${iri(sys)} { ?w wsm:slug ${literal(plan.slug)} } }
      UNION { GRAPH ${iri(sys)} { ${iri(this.workspaces.workspaceIri(plan.workspaceId))} ?p ?o } }
      ${userIris.length ? sparqlFragment`UNION { GRAPH ${iri(sys)} { ?u a wsm:User VALUES ?u { ${join(userIris)} } } }` : raw('')}
    }`;
    if (!(await this.store.writeIf({ ask: taken, expect: false }, ops))) {
      throw conflict(`Workspace "${plan.slug}" (or one of its users) was created while the import was checked; nothing was imported`);
    }
    return (await this.workspaces.find(plan.workspaceId))!;
  }
}

/** Resolves once `out` drained or closed (a client that went away), leaving no listener behind. */
function drained(out: Writable): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      out.off('drain', done);
      out.off('close', done);
      resolve();
    };
    out.on('drain', done);
    out.on('close', done);
  });
}

/** `text` (N-Triples lines) in pieces of whole lines of about `CHUNK_CHARS`. */
function* linesInPieces(text: string): Generator<string> {
  let start = 0;
  while (start < text.length) {
    let end = Math.min(text.length, start + CHUNK_CHARS);
    if (end < text.length) {
      const newline = text.indexOf('\n', end);
      end = newline < 0 ? text.length : newline + 1;
    }
    yield text.slice(start, end);
    start = end;
  }
}

/** N-Triples lines (`s p o .`) as N-Quads lines of `graph`. */
function toQuads(triples: string, graph: string): string {
  return (triples.endsWith('\n') ? triples : `${triples}\n`).replace(/ \.\n/g, ` <${graph}> .\n`);
}

function parseInWorker(job: ImportJob): Promise<ImportPlan> {
  const worker = spawnModuleWorker(new URL('./import-worker.ts', import.meta.url));
  return new Promise<ImportPlan>((resolve, reject) => {
    worker.once('message', (answer: ImportAnswer) => {
      if (answer.ok) resolve(answer.plan);
      else reject(answer.refused ? badRequest(answer.message) : new Error(`workspace import failed: ${answer.message}`));
    });
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the import worker stopped (exit code ${code})`)));
    const { buffer, byteOffset, byteLength } = job.bytes;
    const own = buffer instanceof ArrayBuffer && byteOffset === 0 && byteLength === buffer.byteLength;
    worker.postMessage(job, own ? [buffer] : []);
  }).finally(() => void worker.terminate());
}
