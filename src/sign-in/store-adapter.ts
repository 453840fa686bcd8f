import { createHash } from 'node:crypto';
import { errors, type Adapter, type AdapterPayload } from 'oidc-provider';
import type { QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { prefixes } from '../rdf/vocab.js';
import { sparql, iri, literal, dateTime, integer, raw, type SparqlFragment } from '../rdf/sparql.js';
import { str } from '../rdf/bindings.js';

/**
 * The OpenID provider's records (sessions, interactions, authorization
 * codes, refresh tokens, grants) kept in the store's `<base>sign-in` graph,
 * so they survive a restart and every instance on one remote store shares
 * them. A record is a `wsm:SignInRecord` named by the SHA-256 of its kind
 * and id: ids are the secrets of codes, refresh tokens and session cookies,
 * so they are never written; its payload is kept without them. Expired
 * records are answered as absent and removed by `sweep`.
 */
export class StoreAdapterFactory {
  constructor(
    readonly store: QuadStore,
    readonly graphs: Graphs,
    private readonly clock: () => number = Date.now,
  ) {}

  /** The adapter of one of the provider's models (what `oidc-provider`'s `adapter` setting calls). */
  adapter(kind: string): Adapter {
    return new StoreAdapter(this.store, this.graphs, kind, this.clock);
  }

  /** Removes every record whose expiry has passed. */
  async sweep(): Promise<void> {
    const g = iri(this.graphs.signIn);
    await this.store.update(sparql`${prefixes}DELETE { GRAPH ${g} { ?r ?p ?o } }
      WHERE { GRAPH ${g} { ?r a wsm:SignInRecord ; wsm:expiresAt ?end . FILTER(?end <= ${dateTime(new Date(this.clock()))}) ?r ?p ?o } }`, [this.graphs.signIn]);
  }
}

class StoreAdapter implements Adapter {
  constructor(
    private readonly store: QuadStore,
    private readonly graphs: Graphs,
    private readonly kind: string,
    private readonly clock: () => number,
  ) {}

  private get g(): SparqlFragment { return iri(this.graphs.signIn); }

  private record(id: string): SparqlFragment {
    const hash = createHash('sha256').update(`${this.kind}\n${id}`, 'utf8').digest('hex');
    return iri(this.graphs.resource('sign-in', hash));
  }

  async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
    const r = this.record(id);
    const { jti: _jti, ...kept } = payload;
    const expiry = typeof expiresIn === 'number' ? new Date(this.clock() + expiresIn * 1000) : undefined;
    const extras = [
      expiry ? sparql`${r} wsm:expiresAt ${dateTime(expiry)} .` : '',
      typeof payload.grantId === 'string' ? sparql`${r} wsm:grantId ${literal(payload.grantId)} .` : '',
      this.kind === 'Session' && typeof payload.uid === 'string' ? sparql`${r} wsm:sessionUid ${literal(payload.uid)} .` : '',
    ].join('\n');
    await this.store.update(sparql`${prefixes}DELETE WHERE { GRAPH ${this.g} { ${r} ?p ?o } } ;
      INSERT DATA { GRAPH ${this.g} {
        ${r} a wsm:SignInRecord ; wsm:recordKind ${literal(this.kind)} ; wsm:payload ${literal(JSON.stringify(kept))} .
        ${raw(extras)}
      } }`, [this.graphs.signIn]);
  }

  async find(id: string): Promise<AdapterPayload | undefined> {
    return this.read(id, this.record(id));
  }

  async findByUid(uid: string): Promise<AdapterPayload | undefined> {
    // The session's id is not kept: the record answers without `jti`, which the provider does not need to load a session by uid.
    const rows = await this.store.select(sparql`${prefixes}SELECT ?r WHERE { GRAPH ${this.g} {
      ?r wsm:sessionUid ${literal(uid)} ; wsm:recordKind ${literal(this.kind)} } } LIMIT 1`);
    const r = str(rows[0] ?? {}, 'r');
    return r ? this.read(undefined, iri(r)) : undefined;
  }

  async findByUserCode(): Promise<undefined> {
    return undefined; // the device flow is not offered
  }

  async consume(id: string): Promise<void> {
    const r = this.record(id);
    const now = Math.floor(this.clock() / 1000);
    // Single use holds across concurrent requests and instances: only the first consume applies.
    const applied = await this.store.writeIf(
      { ask: sparql`${prefixes}ASK { GRAPH ${this.g} { ${r} wsm:payload ?p FILTER NOT EXISTS { ${r} wsm:consumedAt ?at } } }`, expect: true },
      [{ kind: 'update', sparql: sparql`${prefixes}INSERT DATA { GRAPH ${this.g} { ${r} wsm:consumedAt ${integer(now)} } }`, graphs: [this.graphs.signIn] }],
    );
    if (!applied) throw new errors.InvalidGrant(`${this.kind === 'AuthorizationCode' ? 'authorization code' : 'grant'} already used`);
  }

  async destroy(id: string): Promise<void> {
    await this.store.update(sparql`${prefixes}DELETE WHERE { GRAPH ${this.g} { ${this.record(id)} ?p ?o } }`, [this.graphs.signIn]);
  }

  async revokeByGrantId(grantId: string): Promise<void> {
    await this.store.update(sparql`${prefixes}DELETE { GRAPH ${this.g} { ?r ?p ?o } } WHERE { GRAPH ${this.g} {
      ?r wsm:grantId ${literal(grantId)} ; wsm:recordKind ${literal(this.kind)} . ?r ?p ?o } }`, [this.graphs.signIn]);
  }

  private async read(id: string | undefined, r: SparqlFragment): Promise<AdapterPayload | undefined> {
    const rows = await this.store.select(sparql`${prefixes}SELECT ?payload ?end ?consumed WHERE { GRAPH ${this.g} {
      ${r} wsm:payload ?payload . OPTIONAL { ${r} wsm:expiresAt ?end } OPTIONAL { ${r} wsm:consumedAt ?consumed } } } LIMIT 1`);
    const row = rows[0];
    if (!row) return undefined;
    const end = str(row, 'end');
    if (end !== null && new Date(end).getTime() <= this.clock()) return undefined;
    const payload = JSON.parse(str(row, 'payload')!) as AdapterPayload;
    const consumed = str(row, 'consumed');
    if (consumed !== null) payload.consumed = Number(consumed);
    if (id !== undefined) payload.jti = id;
    return payload;
  }
}
