import type { QuadStore } from '../store/store.js';
import { GraphCache } from '../store/graph-cache.js';
import type { Graphs } from '../rdf/graphs.js';
import { prefixes } from '../rdf/vocab.js';
import { sparql, fragmentOf, iri, literal, dateTime, raw, boolean, integer, type Sparql } from '../rdf/sparql.js';
import { newId, UUID_PATTERN } from '../rdf/ids.js';
import { bool, req, str, time } from '../rdf/bindings.js';
import { badRequest, conflict, forbidden, notFound } from '../errors.js';
import { NOT_APPLIED, untilApplied } from '../store/conditional.js';
import type { Binding } from '../store/store.js';
import type { User, UserService } from '../users/service.js';
import type { WorkspaceAccess } from '../workspaces/service.js';
import type { QuerySandbox } from '../sandbox/sandbox.js';
import type { RunResult } from '../sandbox/protocol.js';
import type { ScriptType } from '../sandbox/script.js';
import type { QueryParser } from '../sparql-parse/parser.js';
import type { ParsedQuery } from '../sparql-parse/protocol.js';
import type { SlashCommandBody } from './schema.js';
import { argumentTerms, checkParameters, type Parameter } from './parameters.js';
import type { BoundTerm } from '../sandbox/bind.js';
import type { WireTerm } from '../sparql-parse/protocol.js';

/** An argument's term as plain data for the parse worker. */
const wireTerm = (t: BoundTerm): WireTerm => (t.termType === 'NamedNode'
  ? { kind: 'iri', value: t.value }
  : { kind: 'literal', value: t.value, ...(t.language ? { language: t.language } : { datatype: t.datatype.value }) });

/** The slash command shape (docs/api.md). */
export interface SlashCommand {
  id: string;
  alias: string;
  description: string | null;
  interpretation: string | null;
  scriptType: ScriptType;
  scriptContent: string;
  /** Declared parameters, in declaration order (docs/slash-commands.md, "Parameters"). */
  parameters: Parameter[];
  workspaceId: string;
  owner: User;
  createdAt: string;
  updatedAt: string;
}

/** Formats a command's result can be answered in; `envelope` is the JSON envelope with JSON-LD inside. */
export type ExecutionFormat = 'text/turtle' | 'application/n-triples' | 'application/ld+json' | 'envelope';

export interface Execution extends RunResult {
  command: SlashCommand;
}

export const ALIAS_MAX = 64;
const ALIAS_PATTERN = /^[A-Za-z0-9_:-]+$/;
const SCRIPT_TYPES: readonly ScriptType[] = ['CONSTRUCT', 'DESCRIBE'];

/** An alias: 1 to 64 letters, digits, `-`, `_`, `:`; no leading slash. */
export function checkAlias(alias: string): void {
  if (alias.startsWith('/')) {
    throw badRequest(`alias is given without a leading slash: use ${JSON.stringify(alias.replace(/^\/+/, ''))}, not ${JSON.stringify(alias)}`);
  }
  if (alias.length === 0 || alias.length > ALIAS_MAX) {
    throw badRequest(`alias must be 1 to ${ALIAS_MAX} characters long (it has ${alias.length})`);
  }
  if (!ALIAS_PATTERN.test(alias)) {
    const bad = [...alias].find((ch) => !/[A-Za-z0-9_:-]/.test(ch))!;
    throw badRequest(`alias may only contain letters, digits, "-", "_" and ":"; ${JSON.stringify(bad)} is not allowed`);
  }
}

function checkScriptType(value: string): ScriptType {
  const upper = value.trim().toUpperCase();
  if (!(SCRIPT_TYPES as readonly string[]).includes(upper)) {
    throw badRequest(`scriptType must be CONSTRUCT or DESCRIBE, not ${JSON.stringify(value)}`);
  }
  return upper as ScriptType;
}

const PARSE_CACHE_SIZE = 500;
/** In a `u` regular expression only a surrogate that is not half of a pair matches. */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/**
 * Slash commands: saved CONSTRUCT / DESCRIBE scripts of a workspace, owned
 * by their creator (records in `<base>workspaces/W/slash-commands`, see
 * docs/rdf-model.md), run in the query sandbox over the workspace's
 * knowledge.
 */
export class SlashCommandService {
  /** Script text -> parsed and limited query, so a command is parsed once, not on every run. */
  private readonly parsed = new Map<string, ParsedQuery>();

  constructor(
    private readonly store: QuadStore,
    private readonly graphs: Graphs,
    private readonly users: UserService,
    private readonly sandbox: QuerySandbox,
    private readonly parser: QueryParser,
  ) {
    this.recent = new GraphCache(store, 10_000);
  }

  commandIri(id: string): string { return this.graphs.resource('slash-command', id); }

  /**
   * Commands of the workspace. `lead` is a triple pattern on `?c` that
   * narrows them (by id, alias or owner): it comes first, because Oxigraph
   * joins patterns in the order written, and a leading bound pattern turns a
   * scan of every command into an index lookup. Owners are read afterwards
   * by IRI (`UserService.byIris`, cached): joining the system graph's user
   * pattern here made Oxigraph plan its OPTIONALs over every user of the
   * service (1.3 s per list with 6,000 users).
   */
  private async select(workspaceId: string, lead: string, extra = ''): Promise<SlashCommand[]> {
    const g = iri(this.graphs.slashCommands(workspaceId));
    const rows = await this.store.select(sparql`${prefixes} SELECT * WHERE {
      GRAPH ${g} {
        ${raw(lead)}
        ?c a wsm:SlashCommand ; wsm:id ?id ; wsm:alias ?alias ; wsm:scriptType ?scriptType ; wsm:scriptContent ?scriptContent ;
           wsm:owner ?u ; wsm:createdAt ?createdAt ; wsm:updatedAt ?updatedAt .
        OPTIONAL { ?c wsm:description ?description }
        OPTIONAL { ?c wsm:interpretation ?interpretation }
      }
    } ${raw(extra)}`);
    const owners = await this.users.byIris([...new Set(rows.map((b) => b.u!.value))]);
    // A command whose owner has no user record is not answered (as the join did).
    const commands = rows.filter((b) => owners.has(b.u!.value)).map((b) => this.fromBinding(workspaceId, b, owners.get(b.u!.value)!));
    if (commands.length === 0) return commands;
    // Parameters in a second read, by the same lead pattern: few commands declare any.
    const params = await this.store.select(sparql`${prefixes} SELECT ?id ?name ?kind ?datatype ?required ?description ?position WHERE {
      GRAPH ${g} {
        ${raw(lead)}
        ?c wsm:id ?id ; wsm:parameter ?p . ?p wsm:name ?name ; wsm:kind ?kind ; wsm:required ?required ; wsm:position ?position .
        OPTIONAL { ?p wsm:datatype ?datatype }
        OPTIONAL { ?p wsm:description ?description }
      }
    } ORDER BY ?id ?position`);
    const byId = new Map(commands.map((c) => [c.id, c]));
    for (const b of params) {
      const command = byId.get(req(b, 'id'));
      if (!command) continue;
      const datatype = str(b, 'datatype');
      const description = str(b, 'description');
      command.parameters.push({
        name: req(b, 'name'), kind: req(b, 'kind') as Parameter['kind'], required: bool(b, 'required') === true,
        ...(datatype !== null ? { datatype } : {}), ...(description !== null ? { description } : {}),
      });
    }
    return commands;
  }

  /** The triples of declared parameters, for an INSERT. */
  private parameterTriples(commandIri: string, parameters: Parameter[]): string {
    const c = iri(commandIri);
    return parameters.map((p, i) => {
      const node = iri(`${commandIri}#parameter-${p.name}`);
      return sparql`${c} wsm:parameter ${node} . ${node} a wsm:Parameter ; wsm:name ${literal(p.name)} ; wsm:kind ${literal(p.kind)} ;
        wsm:required ${boolean(p.required)} ; wsm:position ${integer(i)} .`
        + (p.datatype ? sparql` ${node} wsm:datatype ${iri(p.datatype)} .` : '')
        + (p.description !== undefined ? sparql` ${node} wsm:description ${literal(p.description)} .` : '');
    }).join('\n');
  }

  private fromBinding(workspaceId: string, b: Binding, owner: User): SlashCommand {
    return {
      id: req(b, 'id'),
      alias: req(b, 'alias'),
      description: str(b, 'description'),
      interpretation: str(b, 'interpretation'),
      scriptType: req(b, 'scriptType') as ScriptType,
      scriptContent: req(b, 'scriptContent'),
      parameters: [],
      workspaceId,
      owner,
      createdAt: time(b, 'createdAt'),
      updatedAt: time(b, 'updatedAt'),
    };
  }

  /** C4: the caller's own commands in the workspace, by alias. */
  async listOwn(access: WorkspaceAccess, user: User): Promise<SlashCommand[]> {
    return this.select(access.workspace.id, sparql`?c wsm:owner ${iri(this.users.userIri(user.id))} .`, 'ORDER BY ?alias');
  }

  /** C4 with `scope=all`: every command of the workspace, whoever owns it, by alias. */
  async listAll(access: WorkspaceAccess): Promise<SlashCommand[]> {
    return this.select(access.workspace.id, '', 'ORDER BY ?alias');
  }

  /**
   * Commands by workspace and id or alias: running a command looks it up on
   * every execution. A lookup reads the workspace's slash-commands graph and
   * the owner's record (system graph): kept while neither changes.
   */
  private readonly recent: GraphCache<SlashCommand | null>;

  private lookup(workspaceId: string, key: string, read: () => Promise<SlashCommand | null>): Promise<SlashCommand | null> {
    return this.recent.get(`${workspaceId}\n${key}`, [this.graphs.slashCommands(workspaceId), this.graphs.system], read);
  }

  /** C1: one command of the workspace (404 when it is not one of this workspace's). */
  async get(access: WorkspaceAccess, id: string): Promise<SlashCommand> {
    if (!UUID_PATTERN.test(id)) throw notFound(`Slash command "${id}" not found`);
    const ws = access.workspace.id;
    const found = await this.lookup(ws, `id\n${id.toLowerCase()}`, async () => (await this.select(ws, sparql`?c wsm:id ${literal(id.toLowerCase())} .`, 'LIMIT 1'))[0] ?? null);
    if (!found) throw notFound(`Slash command "${id}" not found`);
    return found;
  }

  async byAlias(access: WorkspaceAccess, alias: string): Promise<SlashCommand> {
    const ws = access.workspace.id;
    const found = await this.lookup(ws, `alias\n${alias}`, async () => (await this.select(ws, sparql`?c wsm:alias ${literal(alias)} .`, 'LIMIT 1'))[0] ?? null);
    if (!found) throw notFound(`No slash command with alias "${alias}" in this workspace`);
    return found;
  }

  private async aliasTaken(workspaceId: string, alias: string, except?: string): Promise<boolean> {
    return await this.store.ask(this.aliasAsk(workspaceId, alias, except));
  }

  /** ASK: does a command of the workspace (other than `except`) have the alias? Also the condition of C5's and C2's writes. */
  private aliasAsk(workspaceId: string, alias: string, except?: string): Sparql {
    const g = iri(this.graphs.slashCommands(workspaceId));
    const other = except ? sparql`FILTER (?c != ${iri(this.commandIri(except))})` : '';
    return sparql`${prefixes}ASK { GRAPH ${g} { ?c wsm:alias ${literal(alias)} . ${raw(other)} } }`;
  }

  /** Parses a script once (in the parse worker, bounded); later runs of the same text reuse the result. */
  private async script(scriptContent: string, scriptType: ScriptType): Promise<ParsedQuery> {
    const key = `${scriptType}\n${scriptContent}`;
    let entry = this.parsed.get(key);
    if (!entry) {
      entry = await this.parser.parseScript(scriptContent, scriptType, this.sandbox.maxResults + 1);
      if (this.parsed.size >= PARSE_CACHE_SIZE) this.parsed.delete(this.parsed.keys().next().value!);
      this.parsed.set(key, entry);
    }
    return entry;
  }

  /** C5: creates a command owned by `owner`. */
  create(access: WorkspaceAccess, owner: User, body: SlashCommandBody, now = new Date()): Promise<SlashCommand> {
    return untilApplied(() => this.createOnce(access, owner, body, now),
      () => conflict(`The aliases of this workspace changed while this request ran; try again`));
  }

  private async createOnce(access: WorkspaceAccess, owner: User, body: SlashCommandBody, now: Date): Promise<SlashCommand | typeof NOT_APPLIED> {
    const missing = (['alias', 'scriptType', 'scriptContent'] as const).filter((f) => body[f] === undefined);
    if (missing.length) throw badRequest(`${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} required`);
    const alias = body.alias!;
    checkAlias(alias);
    const scriptType = checkScriptType(body.scriptType!);
    const parsed = await this.script(body.scriptContent!, scriptType);
    const parameters = checkParameters(body.parameters ?? [], new Set(parsed.variables));
    const ws = access.workspace.id;
    // No read before the write: the write's condition is the alias check (a taken alias is told apart below).
    const id = newId();
    const c = iri(this.commandIri(id));
    const g = iri(this.graphs.slashCommands(ws));
    const t = dateTime(now);
    const optional = [
      body.description != null ? sparql`${c} wsm:description ${literal(body.description)} .` : '',
      body.interpretation != null ? sparql`${c} wsm:interpretation ${literal(body.interpretation)} .` : '',
    ].join('\n');
    // A conditional write: applied only while no command of the workspace has the alias (docs/store.md).
    const applied = await this.store.writeIf({ ask: this.aliasAsk(ws, alias), expect: false }, [{ kind: 'update', sparql: sparql`${prefixes}
      INSERT DATA { GRAPH ${g} {
        ${c} a wsm:SlashCommand ; wsm:id ${literal(id)} ; wsm:alias ${literal(alias)} ;
          wsm:scriptType ${literal(scriptType)} ; wsm:scriptContent ${literal(body.scriptContent!)} ;
          wsm:owner ${iri(this.users.userIri(owner.id))} ; wsm:workspace ${iri(this.graphs.resource('workspace', ws))} ;
          wsm:createdAt ${t} ; wsm:updatedAt ${t} .
        ${raw(optional)}
        ${raw(this.parameterTriples(this.commandIri(id), parameters))}
      } }`, graphs: [this.graphs.slashCommands(ws)] }]);
    if (!applied) {
      if (await this.aliasTaken(ws, alias)) throw conflict(`A slash command with alias "${alias}" already exists in this workspace`, { alias });
      // Taken and freed again in between: the write is tried again.
      return NOT_APPLIED;
    }
    const texts = [alias, body.description, body.interpretation, body.scriptContent];
    if (texts.some((text) => text != null && LONE_SURROGATE.test(text))) {
      // Lone surrogates come back from the store replaced: answer what was stored.
      const created = (await this.select(ws, sparql`?c wsm:id ${literal(id)} .`))[0];
      if (!created) throw notFound(`Slash command "${id}" not found`);
      return created;
    }
    const createdAt = now.toISOString();
    return {
      id, alias, description: body.description ?? null, interpretation: body.interpretation ?? null,
      scriptType, scriptContent: body.scriptContent!, parameters, workspaceId: ws, owner, createdAt, updatedAt: createdAt,
    };
  }

  private requireOwnerOrAdmin(access: WorkspaceAccess, command: SlashCommand, action: string): void {
    if (access.isAdmin) return;
    if (access.user && access.user.id === command.owner.id) return;
    throw forbidden(`Only the owner of slash command "${command.alias}" or an administrator may ${action} it`);
  }

  /**
   * C2: updates any subset of the fields, with the same checks as create.
   * A conditional write: applied only while the command exists and no other
   * command has the new alias.
   */
  update(access: WorkspaceAccess, id: string, body: SlashCommandBody, now = new Date()): Promise<SlashCommand> {
    return untilApplied(() => this.updateOnce(access, id, body, now),
      () => conflict(`The aliases of this workspace changed while this request ran; try again`));
  }

  private async updateOnce(access: WorkspaceAccess, id: string, body: SlashCommandBody, now: Date): Promise<SlashCommand | typeof NOT_APPLIED> {
    const current = await this.get(access, id);
    this.requireOwnerOrAdmin(access, current, 'update');
    if (body.alias !== undefined) checkAlias(body.alias);
    const scriptType = body.scriptType !== undefined ? checkScriptType(body.scriptType) : current.scriptType;
    const scriptContent = body.scriptContent ?? current.scriptContent;
    const scriptChanged = body.scriptType !== undefined || body.scriptContent !== undefined;
    // New parameters, or the kept ones against a new script: each must still name one of its variables.
    const parameters = body.parameters !== undefined || scriptChanged
      ? checkParameters(body.parameters ?? current.parameters, new Set((await this.script(scriptContent, scriptType)).variables))
      : current.parameters;
    const ws = access.workspace.id;
    if (body.alias !== undefined && body.alias !== current.alias && await this.aliasTaken(ws, body.alias, current.id)) {
      throw conflict(`A slash command with alias "${body.alias}" already exists in this workspace`, { alias: body.alias });
    }
    const c = iri(this.commandIri(current.id));
    const g = iri(this.graphs.slashCommands(ws));
    const ops: Sparql[] = [];
    const set = (field: 'alias' | 'description' | 'interpretation' | 'scriptType' | 'scriptContent' | 'updatedAt', value: ReturnType<typeof literal> | null) => {
      const p = raw(`wsm:${field}`);
      ops.push(sparql`DELETE WHERE { GRAPH ${g} { ${c} ${p} ?old } }`);
      if (value) ops.push(sparql`INSERT DATA { GRAPH ${g} { ${c} ${p} ${value} } }`);
    };
    if (body.alias !== undefined) set('alias', literal(body.alias));
    if (body.description !== undefined) set('description', body.description === null ? null : literal(body.description));
    if (body.interpretation !== undefined) set('interpretation', body.interpretation === null ? null : literal(body.interpretation));
    if (body.scriptType !== undefined) set('scriptType', literal(scriptType));
    if (body.scriptContent !== undefined) set('scriptContent', literal(scriptContent));
    if (body.parameters !== undefined) {
      ops.push(sparql`DELETE WHERE { GRAPH ${g} { ${c} wsm:parameter ?p . ?p ?pp ?po } }`);
      if (parameters.length) ops.push(sparql`INSERT DATA { GRAPH ${g} { ${raw(this.parameterTriples(this.commandIri(current.id), parameters))} } }`);
    }
    set('updatedAt', dateTime(now));
    const exists = sparql`GRAPH ${g} { ${c} a wsm:SlashCommand }`;
    const aliasFree = body.alias !== undefined && body.alias !== current.alias
      ? sparql`FILTER NOT EXISTS { GRAPH ${g} { ?other wsm:alias ${literal(body.alias)} . FILTER (?other != ${c}) } }` : '';
    const condition = { ask: sparql`${prefixes}ASK { ${raw(exists)} ${raw(aliasFree)} }`, expect: true };
    // Deleted or the alias taken in between: the checks run again and answer 404 or 409.
    if (!await this.store.writeIf(condition, ops.map((op) => ({ kind: 'update' as const, sparql: sparql`${prefixes}${fragmentOf(op)}`, graphs: [this.graphs.slashCommands(access.workspace.id)] })))) return NOT_APPLIED;
    return this.get(access, current.id);
  }

  /** C3: a conditional write, so of two racing deletions one answers 404 as it would after the other. */
  delete(access: WorkspaceAccess, id: string): Promise<SlashCommand> {
    return untilApplied(() => this.deleteOnce(access, id), () => notFound(`Slash command "${id}" not found`));
  }

  private async deleteOnce(access: WorkspaceAccess, id: string): Promise<SlashCommand | typeof NOT_APPLIED> {
    const current = await this.get(access, id);
    this.requireOwnerOrAdmin(access, current, 'delete');
    const g = iri(this.graphs.slashCommands(access.workspace.id));
    const c = iri(this.commandIri(current.id));
    const applied = await this.store.writeIf({ ask: sparql`${prefixes}ASK { GRAPH ${g} { ${c} a wsm:SlashCommand } }`, expect: true }, [
      sparql`DELETE WHERE { GRAPH ${g} { ${c} wsm:parameter ?p . ?p ?pp ?po } }`,
      sparql`DELETE WHERE { GRAPH ${g} { ${c} ?p ?o } }`,
    ].map((op) => ({ kind: 'update' as const, sparql: sparql`${prefixes}${fragmentOf(op)}`, graphs: [this.graphs.slashCommands(access.workspace.id)] })));
    return applied ? current : NOT_APPLIED;
  }

  /**
   * Runs a command in the sandbox over the workspace's knowledge (installed
   * matrices and active extensions). Rejects with QUERY_TIMEOUT at the time
   * limit; a result over the limit is cut (`truncated`). `args` are the
   * values of declared parameters: 400 for an undeclared one, a missing
   * required one or a value of the wrong kind; they reach the query only as
   * RDF terms of a VALUES block (`bindValues`).
   */
  async execute(access: WorkspaceAccess, command: SlashCommand, format: ExecutionFormat, args: Record<string, unknown> = {}): Promise<Execution> {
    const terms = argumentTerms(command.parameters, args, command.alias);
    const names = Object.keys(terms);
    // Arguments as a VALUES block built from terms (parsed again, in the parse worker); the worker
    // running the query applies the result limit exactly (sandbox/limits.ts).
    const query = names.length === 0
      ? await this.script(command.scriptContent, command.scriptType)
      : await this.parser.parseScript(command.scriptContent, command.scriptType, this.sandbox.maxResults + 1,
        Object.fromEntries(names.map((name) => [name, wireTerm(terms[name]!)])));
    const result = await this.sandbox.run(access.workspace.id, 'knowledge', {
      query: query.text,
      kind: 'graph',
      format: format === 'envelope' ? 'application/ld+json' : format,
      prefixes: query.prefixes,
      union: !query.hasDataset,
      ...query.dataset,
    });
    return { ...result, command };
  }
}
