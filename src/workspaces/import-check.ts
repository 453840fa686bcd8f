/**
 * What a workspace import may hold, and the graphs it becomes: the pure
 * part of `POST /api/v1/workspaces/import`, run in a worker thread
 * (`import-worker.ts`) so a large body is parsed off the event loop.
 *
 * An export (`transfer.ts`) holds the workspace's own graphs
 * (`<base>workspaces/<id>/...`) and, in the system graph, the workspace's
 * record and its members' profiles. An import holds exactly that and
 * nothing else: any other graph, the default graph, another subject or
 * property in the system graph is refused with the quad's place named, so
 * an import cannot touch the registry, another workspace or the service's
 * own records (API keys, passwords). IRIs under the exporting service's
 * base are moved under this service's base, so a workspace moves between
 * services with different `WSM_BASE_IRI`s. The workspace keeps its id: every
 * id the service derives from it (principals, roles, assignments) stays
 * valid.
 */
import type { Quad, Term } from '@rdfjs/types';
import { cachedStableId, UUID_PATTERN } from '../rdf/ids.js';
import { RDF, WSM } from '../rdf/vocab.js';

export type ImportFormat = 'N-Quads' | 'TriG';

export interface ImportRequest {
  format: ImportFormat;
  /** This service's base IRI (ends with `/`). */
  targetBase: string;
  /** Another slug for the workspace, already checked against the slug pattern. */
  slug?: string;
}

export interface ImportPlan {
  workspaceId: string;
  slug: string;
  /** Usernames of the users whose profiles the import carries. */
  usernames: string[];
  /** The system graph's part, as N-Triples, per user (by username) and for the workspace record. */
  workspaceRecord: string;
  profiles: Record<string, string>;
  /** Every other graph of the import: IRI (under the target base) -> N-Triples. */
  graphs: Record<string, string>;
  quads: number;
}

/** A refusal of the body, with the sentence the client gets (400). */
export class ImportRefused extends Error {}

/** The fields of a workspace record and of a user profile that an export carries and an import takes. */
export const WORKSPACE_FIELDS = new Set([RDF.type, WSM.id, WSM.slug, WSM.name, WSM.engineVersion, WSM.owner, WSM.createdAt, WSM.updatedAt]);
export const PROFILE_FIELDS = new Set([RDF.type, WSM.id, WSM.username, WSM.email, WSM.firstName, WSM.lastName, WSM.website,
  WSM.emailVerified, WSM.createdAt, WSM.updatedAt]);

/** The base of the exporting service: the system graph holding the record `?w a wsm:Workspace` ends in `system`. */
function sourceBaseOf(quads: readonly Quad[]): { base: string; workspace: string } {
  const records = quads.filter((q) => q.predicate.value === RDF.type && q.object.value === WSM.Workspace);
  if (records.length === 0) throw new ImportRefused('The body holds no workspace record (a subject of type wsm:Workspace in the exporting service\'s system graph): is it an export of this service?');
  if (records.length > 1) throw new ImportRefused('The body holds more than one workspace record: an import makes one workspace');
  const record = records[0]!;
  if (record.graph.termType !== 'NamedNode' || !record.graph.value.endsWith('/system')) {
    throw new ImportRefused('The workspace record must be in the exporting service\'s system graph (<base>system)');
  }
  return { base: record.graph.value.slice(0, -'system'.length), workspace: record.subject.value };
}

/** Term in N-Triples, with IRIs under `from` moved under `to`. */
function termText(term: Term, from: string, to: string): string {
  switch (term.termType) {
    case 'NamedNode': return `<${rebase(term.value, from, to)}>`;
    case 'BlankNode': return `_:${term.value}`;
    case 'Literal': {
      const text = `"${escapeLiteral(term.value)}"`;
      if (term.language) return `${text}@${term.language}${term.direction ? `--${term.direction}` : ''}`;
      return term.datatype.value === 'http://www.w3.org/2001/XMLSchema#string' ? text : `${text}^^<${term.datatype.value}>`;
    }
    default: throw new ImportRefused(`A ${term.termType} term cannot be imported`);
  }
}

const ESCAPES: Record<string, string> = { '"': '\\"', '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\b': '\\b', '\f': '\\f' };

function escapeLiteral(value: string): string {
  return value.replace(/["\\\u0000-\u001f\u007f]/g, (c) => ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0').toUpperCase()}`);
}

const rebase = (value: string, from: string, to: string): string => (from !== to && value.startsWith(from) ? to + value.slice(from.length) : value);

function tripleText(q: Quad, from: string, to: string, object?: string): string {
  return `${termText(q.subject, from, to)} ${termText(q.predicate, from, to)} ${object ?? termText(q.object, from, to)} .\n`;
}

/** Checks parsed quads and turns them into the graphs to load (see the module comment). */
export function planImport(quads: readonly Quad[], request: ImportRequest): ImportPlan {
  const { base: from, workspace: workspaceIri } = sourceBaseOf(quads);
  const to = request.targetBase;
  const idMatch = new RegExp(`^${escapeRegExp(from)}id/workspace/(.+)$`).exec(workspaceIri);
  const workspaceId = idMatch?.[1];
  if (!workspaceId || !UUID_PATTERN.test(workspaceId)) throw new ImportRefused(`The workspace record's IRI <${workspaceIri}> is not <${from}id/workspace/{uuid}>`);
  const system = `${from}system`;
  const own = `${from}workspaces/${workspaceId}/`;
  const userPrefix = `${from}id/user/`;

  let slug: string | undefined;
  const record: string[] = [];
  const profiles = new Map<string, string[]>();
  const usernames = new Map<string, string>();
  const graphs = new Map<string, string[]>();
  for (const q of quads) {
    if (q.graph.termType !== 'NamedNode') throw new ImportRefused(`A quad of the default graph (subject <${q.subject.value}>): every quad of an export names its graph`);
    const g = q.graph.value;
    if (g === system) {
      const p = q.predicate.value;
      if (q.subject.value === workspaceIri) {
        if (!WORKSPACE_FIELDS.has(p)) throw new ImportRefused(`The workspace record may not carry <${p}>: the system graph takes only the workspace's own fields`);
        if (p === WSM.slug) {
          slug = q.object.value;
          if (request.slug !== undefined) {
            record.push(tripleText(q, from, to, `"${escapeLiteral(request.slug)}"`));
            continue;
          }
        }
        if (p === WSM.owner && !q.object.value.startsWith(userPrefix)) throw new ImportRefused(`The workspace's owner <${q.object.value}> is not a user`);
        record.push(tripleText(q, from, to));
      } else if (q.subject.value.startsWith(userPrefix) && q.subject.termType === 'NamedNode') {
        if (!PROFILE_FIELDS.has(p)) throw new ImportRefused(`A user profile may not carry <${p}> in an import`);
        if (p === RDF.type && q.object.value !== WSM.User) throw new ImportRefused(`<${q.subject.value}> is typed <${q.object.value}>, not wsm:User`);
        if (p === WSM.username) usernames.set(q.subject.value, q.object.value);
        const lines = profiles.get(q.subject.value) ?? [];
        lines.push(tripleText(q, from, to));
        profiles.set(q.subject.value, lines);
      } else {
        throw new ImportRefused(`The system graph part of an import holds only the workspace record and its members' profiles, not <${q.subject.value}>`);
      }
      continue;
    }
    if (!g.startsWith(own) || g.length === own.length) {
      throw new ImportRefused(`The graph <${g}> is not one of the workspace's own graphs (<${own}...>): an import may not write it`);
    }
    const target = rebase(g, from, to);
    const lines = graphs.get(target) ?? [];
    lines.push(tripleText(q, from, to));
    graphs.set(target, lines);
  }
  if (slug === undefined) throw new ImportRefused('The workspace record has no wsm:slug');
  const profileTexts: Record<string, string> = {};
  for (const [subject, lines] of profiles) {
    const username = usernames.get(subject);
    if (username === undefined) throw new ImportRefused(`The profile <${subject}> has no wsm:username`);
    // A user's id is derived from the username: a profile whose IRI does not match would be a second record of someone else.
    if (subject !== `${userPrefix}${cachedStableId('user', username)}`) throw new ImportRefused(`The profile <${subject}> is not the record of user "${username}"`);
    profileTexts[username] = lines.join('');
  }
  const graphTexts: Record<string, string> = {};
  for (const [g, lines] of graphs) graphTexts[g] = lines.join('');
  return {
    workspaceId: workspaceId.toLowerCase(), slug: request.slug ?? slug, usernames: Object.keys(profileTexts),
    workspaceRecord: record.join(''), profiles: profileTexts, graphs: graphTexts, quads: quads.length,
  };
}

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
