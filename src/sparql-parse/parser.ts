import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { badRequest } from '../errors.js';
import type { ScriptType } from '../sandbox/script.js';
import type { ParsedQuery, ParseReply, ParseRequest, WireTerm } from './protocol.js';

/**
 * Parses user SPARQL (slash command scripts at save and execute, the admin
 * SPARQL endpoint) off the event loop, with bounds on size, nesting depth
 * and time (issue 12, acceptance 2; docs/decisions.md):
 * - size: at most `maxChars` characters, else 400 at once;
 * - depth: brackets (`{`, `(`, `[`) nested at most `maxDepth` deep, counted
 *   by a linear scan before parsing (strings, IRIs and comments skipped),
 *   else 400 at once;
 * - time: the parse runs in a worker thread; one that takes longer than
 *   `timeoutMs` is terminated and answered 400, and a fresh worker takes the
 *   next parse.
 */
export interface ParseLimits {
  maxChars: number;
  maxDepth: number;
  timeoutMs: number;
}

export const DEFAULT_PARSE_LIMITS: ParseLimits = { maxChars: 256 * 1024, maxDepth: 64, timeoutMs: 5_000 };

/**
 * The deepest bracket nesting of a SPARQL text, stopping as soon as it
 * passes `limit`. Strings, `<IRI>`s and comments do not count.
 */
export function nestingDepth(text: string, limit = Infinity): number {
  let depth = 0;
  let max = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x7b || c === 0x28 || c === 0x5b) { // { ( [
      depth++;
      if (depth > max) { max = depth; if (max > limit) return max; }
    } else if (c === 0x7d || c === 0x29 || c === 0x5d) { // } ) ]
      if (depth > 0) depth--;
    } else if (c === 0x23) { // # comment to the end of the line
      while (i < n && text.charCodeAt(i) !== 0x0a) i++;
    } else if (c === 0x22 || c === 0x27) { // " or ' string, long form included
      const q = text[i]!;
      const long = text.startsWith(q.repeat(3), i);
      const close = long ? q.repeat(3) : q;
      i += close.length;
      while (i < n && !text.startsWith(close, i)) {
        if (text[i] === '\\') i++;
        else if (!long && text[i] === '\n') break;
        i++;
      }
      i += close.length - 1;
    } else if (c === 0x3c) { // < : an IRI when it closes before any character an IRI forbids
      let j = i + 1;
      while (j < n && !/[<>"{}|^`\\\s]/.test(text[j]!)) j++;
      if (j < n && text[j] === '>') i = j;
    }
  }
  return max;
}

/** The ES module entry of `tsx/esm/api`, from tsx's own exports map. */
function tsxEsmApi(from: string): string {
  const manifestPath = createRequire(from).resolve('tsx/package.json');
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { exports: Record<string, { import: { default: string } }> };
  return pathToFileURL(path.join(path.dirname(manifestPath), manifest.exports['./esm/api']!.import.default)).href;
}

/** Starts a parse worker; run from TypeScript sources (tsx), it registers tsx's loader first. */
function spawn(): Worker {
  const here = import.meta.url;
  // Parsing needs little memory; a runaway parse hits this instead of the service's heap.
  const resourceLimits = { maxOldGenerationSizeMb: 256, stackSizeMb: 4 };
  if (here.endsWith('.ts')) {
    const target = JSON.stringify(new URL('./worker.ts', here).href);
    const tsx = JSON.stringify(typeof import.meta.resolve === 'function' ? import.meta.resolve('tsx/esm/api') : tsxEsmApi(here));
    return new Worker(`import(${tsx}).then((tsx) => { tsx.register(); return import(${target}); })`, { eval: true, resourceLimits });
  }
  return new Worker(new URL('./worker.js', here), { resourceLimits });
}

interface Job {
  request: ParseRequest;
  resolve: (parsed: ParsedQuery) => void;
  reject: (err: Error) => void;
}

export class QueryParser {
  private worker: Worker | null = null;
  private readonly queue: Job[] = [];
  private current: { job: Job; timer: NodeJS.Timeout | null } | null = null;
  private ready = false;
  private nextId = 1;
  private closed = false;

  constructor(private readonly limits: ParseLimits = DEFAULT_PARSE_LIMITS) {}

  /** A read query (the SPARQL endpoint): 400 naming the problem, as `parseReadQuery` says. */
  parseQuery(text: string, field: string, maxSolutions: number): Promise<ParsedQuery> {
    return this.parse({ text, field, maxSolutions });
  }

  /** A slash command's script of the declared form. */
  parseScript(text: string, scriptType: ScriptType, maxSolutions: number, bindings?: Record<string, WireTerm>): Promise<ParsedQuery> {
    return this.parse({ text, field: 'scriptContent', scriptType, maxSolutions, ...(bindings ? { bindings } : {}) });
  }

  private parse(input: Omit<ParseRequest, 'id'>): Promise<ParsedQuery> {
    const { text, field } = input;
    if (text.length > this.limits.maxChars) {
      return Promise.reject(badRequest(`${field} is ${text.length} characters long; at most ${this.limits.maxChars} are accepted`));
    }
    if (text.trim() === '') return Promise.reject(badRequest(`${field} is empty; give a SPARQL query`));
    if (nestingDepth(text, this.limits.maxDepth) > this.limits.maxDepth) {
      return Promise.reject(badRequest(`${field} nests brackets ({ }, ( ), [ ]) more than ${this.limits.maxDepth} levels deep; simplify it`));
    }
    if (this.closed) return Promise.reject(new Error('the query parser is closed'));
    return new Promise<ParsedQuery>((resolve, reject) => {
      this.queue.push({ request: { ...input, id: this.nextId++ }, resolve, reject });
      this.pump();
    });
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const worker = spawn();
    this.worker = worker;
    this.ready = false;
    worker.on('message', (message: ParseReply) => {
      if (worker !== this.worker) return;
      if ('ready' in message) {
        this.ready = true;
        this.pump();
        return;
      }
      const current = this.current;
      if (!current || current.job.request.id !== message.id) return;
      if (current.timer) clearTimeout(current.timer);
      this.current = null;
      if (this.queue.length === 0) worker.unref();
      if ('ok' in message) current.job.resolve(message.ok);
      else current.job.reject(badRequest(message.error.message, message.error.details));
      this.pump();
    });
    const fail = (err: Error) => {
      if (worker !== this.worker) return;
      this.worker = null;
      const current = this.current;
      this.current = null;
      if (current) {
        if (current.timer) clearTimeout(current.timer);
        current.job.reject(badRequest(`${current.job.request.field} could not be parsed within the service's limits (${err.message})`));
      }
      this.pump();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`parser stopped with code ${code}`)));
    // Held while it starts for the parse that started it; let go when it has nothing to do (see `pump`).
    return worker;
  }

  private pump(): void {
    if (this.current || this.queue.length === 0 || this.closed) return;
    const worker = this.ensureWorker();
    if (!this.ready) return;
    const job = this.queue.shift()!;
    // The time limit starts when the worker takes the text, not while it waits in the queue.
    const timer = setTimeout(() => {
      if (this.current?.job !== job) return;
      this.current = null;
      this.worker = null;
      void worker.terminate();
      job.reject(badRequest(`${job.request.field} took longer than ${this.limits.timeoutMs} ms to parse; simplify it`));
      this.pump();
    }, this.limits.timeoutMs);
    this.current = { job, timer };
    // A parse under way keeps the process alive (someone awaits it: the first start's demo command, before the server listens).
    worker.ref();
    worker.postMessage(job.request);
  }

  /** Stops the worker; queued parses fail. */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) job.reject(new Error('the query parser is closed'));
    if (this.current) {
      if (this.current.timer) clearTimeout(this.current.timer);
      this.current.job.reject(new Error('the query parser is closed'));
      this.current = null;
    }
    const worker = this.worker;
    this.worker = null;
    if (worker) await worker.terminate();
  }
}
