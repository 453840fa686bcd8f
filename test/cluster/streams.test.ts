import { expect } from 'chai';
import { openClusterStore } from '../../src/store/cluster/open.js';
import type { ClusterStore } from '../../src/store/cluster/cluster-store.js';
import { HeadMovedError } from '../../src/store/cluster/log.js';
import { graphsReadBy, graphsReadByWrite, shapeOf } from '../../src/store/cluster/read-graphs.js';
import { updateOp, type WriteOp } from '../../src/store/store.js';
import { encodeRecord } from '../../src/store/journal.js';
import { Graphs } from '../../src/rdf/graphs.js';
import { integer, iri, sparql } from '../../src/rdf/sparql.js';
import { freshClusterUrl, requirePostgres, sqlAt } from '../helpers/cluster.js';
import { bearer, removeDir, seedWorkspace, startTestServer, type TestServer } from '../helpers/server.js';

const BASE = 'https://streams.example/';
const graphs = new Graphs(BASE);
const P = iri('https://example.org/p');
const insertInto = (graph: string, n: number): WriteOp =>
  updateOp(sparql`INSERT DATA { GRAPH ${iri(graph)} { ${iri(`https://example.org/s${n}`)} ${P} ${integer(n)} } }`, [graph]);
const countIn = async (store: ClusterStore, graph: string) =>
  Number((await store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH ${iri(graph)} { ?s ?p ?o } }`))[0]!.n!.value);

describe('cluster store: the graphs a write reads', () => {
  const read = (text: string) => {
    const graphs = graphsReadBy(text);
    return graphs === 'any' ? 'any' : [...graphs].sort();
  };

  it('names the graphs of GRAPH patterns, FILTER (NOT) EXISTS, subqueries, FROM, WITH, USING and ADD/COPY/MOVE sources; the default graph for patterns outside GRAPH', () => {
    expect(read('PREFIX x: <http://a/> ASK { GRAPH x:g1 { ?s ?p ?o } FILTER NOT EXISTS { GRAPH <http://a/g2> { ?s ?p 1 } } }')).to.deep.equal(['http://a/g1', 'http://a/g2']);
    expect(read('ASK { VALUES ?condition { true } FILTER EXISTS { GRAPH <http://a/g3> { ?s ?p ?o } } }')).to.deep.equal(['http://a/g3']);
    expect(read('ASK { GRAPH <http://a/g4> { { SELECT ?s WHERE { ?s ?p ?o } } } }')).to.deep.equal(['http://a/g4']);
    expect(read('ASK FROM <http://a/f> { ?s ?p ?o }')).to.deep.equal(['http://a/f']);
    expect(read('ASK { ?s ?p ?o }')).to.deep.equal(['']);
    expect(read('INSERT { GRAPH <http://a/w> { ?s ?p ?o } } WHERE { GRAPH <http://a/r> { ?s ?p ?o } }')).to.deep.equal(['http://a/r']);
    expect(read('DELETE WHERE { GRAPH <http://a/d> { ?s ?p ?o } }')).to.deep.equal(['http://a/d']);
    expect(read('WITH <http://a/with> DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }')).to.deep.equal(['http://a/with']);
    expect(read('DELETE { GRAPH <http://a/w> { ?s ?p ?o } } USING <http://a/u> WHERE { ?s ?p ?o }')).to.deep.equal(['http://a/u']);
    expect(read('COPY <http://a/src> TO <http://a/dst>')).to.deep.equal(['http://a/src']);
    expect(read('INSERT DATA { GRAPH <http://a/x> { <http://a/s> <http://a/p> "where" } }')).to.deep.equal([]);
  });

  it('names the graphs a VALUES block binds a graph variable to, in its group and the patterns nested in it, and in a query\'s closing VALUES', () => {
    expect(read('SELECT ?r WHERE { VALUES ?g { <http://a/1> <http://a/2> } GRAPH ?g { ?r a ?t } }')).to.deep.equal(['http://a/1', 'http://a/2']);
    expect(read('ASK { GRAPH ?g { ?s ?p ?o } VALUES ?g { <http://a/3> } }'), 'the block after the pattern').to.deep.equal(['http://a/3']);
    expect(read('SELECT * WHERE { GRAPH ?g { ?s ?p ?o } } VALUES ?g { <http://a/4> }'), 'after the WHERE').to.deep.equal(['http://a/4']);
    expect(read('ASK { VALUES ?g { <http://a/5> } OPTIONAL { GRAPH ?g { ?s ?p ?o } } FILTER NOT EXISTS { GRAPH ?g { ?s ?p 1 } } MINUS { GRAPH ?g { ?s ?p 2 } } }')).to.deep.equal(['http://a/5']);
    expect(read('ASK { VALUES (?g ?k) { (<http://a/6> 1) (<http://a/7> 2) } GRAPH ?g { ?s ?p ?k } }'), 'two variables').to.deep.equal(['http://a/6', 'http://a/7']);
    expect(read('DELETE { GRAPH ?g { ?s ?p ?o } } WHERE { VALUES ?g { <http://a/8> } GRAPH ?g { ?s ?p ?o } }'), 'an update').to.deep.equal(['http://a/8']);
  });

  it('answers any graph where it cannot name them: a graph variable, a text the parser refuses, a prefix not declared in that text', () => {
    expect(read('ASK { VALUES (?g ?k) { (<http://a/1> 1) (UNDEF 2) } GRAPH ?g { ?s ?p ?k } }'), 'a row leaves the variable unbound').to.equal('any');
    expect(read('ASK { VALUES ?g { <http://a/1> "x" } GRAPH ?g { ?s ?p ?o } }'), 'a literal among the values').to.equal('any');
    expect(read('ASK { { VALUES ?g { <http://a/1> } } GRAPH ?g { ?s ?p ?o } }'), 'a block in a nested group binds only there').to.equal('any');
    expect(read('ASK { { VALUES ?g { <http://a/1> } GRAPH ?g { ?s ?p ?o } } UNION { GRAPH ?g { ?s ?p ?o } } }'), 'another branch').to.equal('any');
    expect(read('ASK { VALUES ?g { <http://a/1> } { SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } } } }'), 'a subquery\'s variables are its own').to.equal('any');
    expect(read('ASK { GRAPH ?g { ?s ?p ?o } }')).to.equal('any');
    expect(read('ASK { GRAPH x:g { ?s ?p ?o } }')).to.equal('any');
    expect(read('ASK {')).to.equal('any');
  });

  it('reads nothing for updates that name no WHERE, ADD, COPY or MOVE; a write\'s reads are its condition\'s and its updates\'', () => {
    const data = updateOp(sparql`INSERT DATA { GRAPH ${iri('http://a/x')} { ${iri('http://a/s')} ${P} 1 } }`, ['http://a/x']);
    const where = updateOp(sparql`DELETE WHERE { GRAPH ${iri('http://a/y')} { ?s ?p ?o } }`, ['http://a/y']);
    expect([...graphsReadByWrite([data], undefined) as Set<string>]).to.deep.equal([]);
    expect([...graphsReadByWrite([data, where], 'ASK { GRAPH <http://a/c> { ?s ?p ?o } }') as Set<string>].sort()).to.deep.equal(['http://a/c', 'http://a/y']);
  });
});

/**
 * The cluster journal's streams (docs/cluster.md, "Streams"): one per
 * workspace, one for the service's own graphs; writes to different
 * workspaces never race on a head, writes over several streams are one
 * transaction.
 */
describe('cluster store: a journal stream per workspace', function () {
  this.timeout(300_000);
  let url: string;
  const open: ClusterStore[] = [];
  const openStore = async () => {
    const store = await openClusterStore(url, { snapshotAfterBytes: 1 << 30, probeMs: 100, baseIri: BASE });
    open.push(store);
    return store;
  };
  const sql = (text: string, values: unknown[] = []) => sqlAt(url, text, values);
  const streamRows = async (stream: string) =>
    (await sql('SELECT seq, gseq FROM wsm_journal WHERE stream = $1 ORDER BY seq', [stream])).map((r) => ({ seq: Number(r.seq), gseq: Number(r.gseq) }));

  before(function () { requirePostgres(this); });
  beforeEach(async () => { url = await freshClusterUrl(); });
  afterEach(async () => {
    for (const store of open.splice(0)) await store.close();
  });

  it('texts differing only in their literals and IRIs share one reading; literals are found in every quote form, and a comment, an unended literal or a BASE keeps the text whole', () => {
    expect(shapeOf('ASK { GRAPH <urn:g> { ?c <urn:alias> "b-12" } }')).to.deep.equal({ key: 'ASK { GRAPH <urn:x-wsm-shape:0> { ?c <urn:x-wsm-shape:1> "" } }', iris: ['urn:g', 'urn:alias'] });
    expect(shapeOf(String.raw`INSERT DATA { <urn:s> <urn:p> 'it\'s', "a \"q\"", """x "y" z""""", '''l
m''' }`)?.key).to.equal(`INSERT DATA { <urn:x-wsm-shape:0> <urn:x-wsm-shape:1> '', "", """""", '''''' }`);
    expect(shapeOf('SELECT * { <urn:a#b> <urn:p> "x" }')?.iris, 'a # inside an IRI').to.deep.equal(['urn:a#b', 'urn:p']);
    expect(shapeOf('PREFIX x: <http://a/> SELECT * { GRAPH x:g { <rel> ?p ?o } }')?.key, 'a prefix\'s IRI and a relative one are kept').to.equal('PREFIX x: <http://a/> SELECT * { GRAPH x:g { <rel> ?p ?o } }');
    expect(shapeOf('SELECT * { ?s ?p ?o } # "a comment"')).to.equal(undefined);
    expect(shapeOf('SELECT * { ?s ?p "unended }')).to.equal(undefined);
    expect(shapeOf('BASE <http://a/> SELECT * { GRAPH <g> { ?s ?p ?o } }')).to.equal(undefined);
    const ask = (graph: string, alias: string) => `ASK { GRAPH <${graph}> { ?c <urn:alias> "${alias}" } }`;
    expect([...graphsReadBy(ask('urn:g1', 'a')) as Set<string>]).to.deep.equal(['urn:g1']);
    expect([...graphsReadBy(ask('urn:g1', 'b')) as Set<string>], 'the same kind of text, another literal').to.deep.equal(['urn:g1']);
    expect([...graphsReadBy(ask('urn:g2', 'b')) as Set<string>], 'the same shape, another graph').to.deep.equal(['urn:g2']);
    const two = (a: string, b: string) => `ASK { GRAPH <${a}> { ?s ?p ?o } FILTER NOT EXISTS { GRAPH <${b}> { ?s <urn:p> <urn:o> } } }`;
    expect([...graphsReadBy(two('urn:a1', 'urn:b1')) as Set<string>].sort()).to.deep.equal(['urn:a1', 'urn:b1']);
    expect([...graphsReadBy(two('urn:a2', 'urn:a2')) as Set<string>], 'one IRI in both places').to.deep.equal(['urn:a2']);
    expect([...graphsReadBy('PREFIX x: <http://b/> ASK { GRAPH x:g { <http://b/s> ?p ?o } }') as Set<string>]).to.deep.equal(['http://b/g']);
    expect([...graphsReadBy('PREFIX x: <http://c/> ASK { GRAPH x:g { <http://b/s> ?p ?o } }') as Set<string>], 'another prefix is another shape').to.deep.equal(['http://c/g']);
    expect([...graphsReadBy('BASE <http://d/> ASK { GRAPH <g> { ?s ?p ?o } }') as Set<string>]).to.deep.equal(['http://d/g']);
    expect(graphsReadBy('ASK { GRAPH ?g { ?c <urn:alias> "a" } }')).to.equal('any');
    expect(graphsReadBy('ASK { GRAPH ?g { ?c <urn:alias> "b" } }')).to.equal('any');
  });

  it('graphs map to streams: a workspace\'s graphs (and its sealed secret values) to ws:<id>, every other graph to service', () => {
    expect(graphs.streamOf(graphs.iam('w1'))).to.equal('ws:w1');
    expect(graphs.streamOf(graphs.derived('w1', 'm'))).to.equal('ws:w1');
    expect(graphs.streamOf(graphs.secretValues('w1'))).to.equal('ws:w1');
    for (const g of [graphs.system, graphs.registry, graphs.signIn, graphs.exchangeKeys, 'https://elsewhere.example/g', '', `${BASE}workspaces/`]) {
      expect(graphs.streamOf(g), g).to.equal('service');
    }
  });

  it('two stores writing to two workspaces at once, plainly and conditionally: no head conflict, each stream numbered 1..n', async () => {
    const [a, b] = [await openStore(), await openStore()];
    const [ga, gb] = [graphs.iam('alpha'), graphs.iam('beta')];
    const run = async (store: ClusterStore, graph: string) => {
      for (let n = 0; n < 15; n++) {
        if (n % 2) await store.write([insertInto(graph, n)]);
        else {
          const absent = { ask: sparql`ASK { GRAPH ${iri(graph)} { ${iri(`https://example.org/s${n}`)} ?p ?o } }`, expect: false };
          expect(await store.writeIf(absent, [insertInto(graph, n)])).to.equal(true);
        }
      }
    };
    await Promise.all([run(a, ga), run(b, gb), run(a, gb.replace('beta', 'gamma')), run(b, ga.replace('alpha', 'delta'))]);
    expect(a.headConflicts + b.headConflicts, 'head conflicts').to.equal(0);
    for (const store of [a, b]) {
      expect(await countIn(store, ga)).to.equal(15);
      expect(await countIn(store, gb)).to.equal(15);
    }
    for (const stream of ['ws:alpha', 'ws:beta', 'ws:gamma', 'ws:delta']) {
      expect((await streamRows(stream)).map((r) => r.seq)).to.deep.equal(Array.from({ length: 15 }, (_, i) => i + 1));
    }
    expect(await streamRows('service')).to.deep.equal([]);
    expect(a.appliedSeq('ws:beta')).to.equal(15);
  });

  it('conditional writes to one workspace racing on two stores: exactly one applies per race, on every replica, replayed, from a snapshot, loaded alone', async () => {
    const [a, b] = [await openStore(), await openStore()];
    const g = graphs.slashCommands('one');
    for (let race = 0; race < 8; race++) {
      const claim = iri(`https://example.org/claim${race}`);
      const free = { ask: sparql`ASK { GRAPH ${iri(g)} { ${claim} ?p ?o } }`, expect: false };
      // Each racer's triple differs, so a record applied where its condition failed would show.
      const results = await Promise.all(Array.from({ length: 6 }, (_, i) => (i % 2 ? a : b).writeIf(free, [updateOp(sparql`INSERT DATA { GRAPH ${iri(g)} { ${claim} ${P} ${integer(i)} } }`, [g])])));
      expect(results.filter(Boolean), `race ${race}`).to.have.length(1);
    }
    expect(await countIn(a, g)).to.equal(8);
    expect(await countIn(b, g)).to.equal(8);
    // Writes sharing a commit are appended with their conditions unasked (asked where they apply): a race may leave
    // records that changed nothing, never a second claim.
    const rows = (await streamRows('ws:one')).length;
    expect(rows).to.be.within(8, 48);
    expect(await countIn(await openStore(), g), 'replayed by a new store').to.equal(8);
    await a.snapshot();
    expect(await countIn(await openStore(), g), 'from the snapshot, built from the records').to.equal(8);
    const resident = await openClusterStore(url, { snapshotAfterBytes: 1 << 30, probeMs: 100, baseIri: BASE, residency: { quads: 1_000_000, idleMs: 60_000 } });
    open.push(resident);
    expect(await countIn(resident, g), 'the workspace loaded alone').to.equal(8);
  });

  it('writes to one workspace made at once share commits: each its own record, in order, every one applied everywhere', async () => {
    const [a, b] = [await openStore(), await openStore()];
    const g = graphs.iam('together');
    const before = { ...a.appends };
    await Promise.all(Array.from({ length: 40 }, (_, n) => a.write([insertInto(g, n)])));
    const writes = a.appends.writes - before.writes;
    const commits = a.appends.commits - before.commits;
    expect(writes).to.equal(40);
    expect(commits, `${commits} commits for 40 writes`).to.be.lessThan(40);
    const rows = await streamRows('ws:together');
    expect(rows.map((r) => r.seq)).to.deep.equal(Array.from({ length: 40 }, (_, i) => i + 1));
    expect(new Set(rows.map((r) => r.gseq)).size, 'a write is a record of its own').to.equal(40);
    expect(await countIn(a, g)).to.equal(40);
    expect(await countIn(b, g)).to.equal(40);
  });

  it('writes appended together on two stores at once, with reads catching up meanwhile: each applied once, in the log\'s order, on both; a group is appended while the one before it is applied', async () => {
    const [a, b] = [await openStore(), await openStore()];
    const g = graphs.iam('overlap');
    const before = { ...a.appends };
    const writes = Array.from({ length: 120 }, (_, n) => (n % 3 === 2 ? b : a).write([insertInto(g, n)]));
    // Reads on both stores meanwhile: each looks up the heads and catches up, reaching records the other store's groups (and its own) appended.
    const reads = Array.from({ length: 30 }, (_, n) => countIn(n % 2 ? a : b, g));
    await Promise.all([...writes, ...reads]);
    expect(a.appends.writes - before.writes).to.equal(80);
    const rows = await streamRows('ws:overlap');
    expect(rows.map((r) => r.seq), 'one record a write, no gap').to.deep.equal(Array.from({ length: 120 }, (_, i) => i + 1));
    expect(await countIn(a, g)).to.equal(120);
    expect(await countIn(b, g)).to.equal(120);
    const c = await openStore();
    expect(await countIn(c, g), 'replayed').to.equal(120);
    // Conditions asked where each record applies, on every store alike: one claim of one key wins.
    const claim = (store: ClusterStore, n: number) => store.writeIf(
      { ask: sparql`ASK { GRAPH ${iri(g)} { ${iri('https://example.org/claim')} ${P} ?v } }`, expect: false },
      [updateOp(sparql`INSERT DATA { GRAPH ${iri(g)} { ${iri('https://example.org/claim')} ${P} ${integer(n)} } }`, [g])]);
    const won = await Promise.all(Array.from({ length: 30 }, (_, n) => claim(n % 2 ? a : b, n)));
    expect(won.filter(Boolean)).to.have.length(1);
    const claimed = async (store: ClusterStore) => Number((await store.select(sparql`SELECT (COUNT(*) AS ?n) WHERE { GRAPH ${iri(g)} { ${iri('https://example.org/claim')} ?p ?o } }`))[0]!.n!.value);
    expect([await claimed(a), await claimed(b), await claimed(c)]).to.deep.equal([1, 1, 1]);
  });

  it('a write over two streams is one record in each, with one gseq, applied once by another store; opened again, it replays once', async () => {
    const [a, b] = [await openStore(), await openStore()];
    await a.write([insertInto(graphs.iam('w1'), 1)]);
    const both = updateOp(sparql`INSERT DATA { GRAPH ${iri(graphs.system)} { ${iri('https://example.org/ws')} ${P} 1 } GRAPH ${iri(graphs.iam('w1'))} { ${iri('https://example.org/ws')} ${P} 2 } }`,
      [graphs.system, graphs.iam('w1')]);
    await a.write([both]);
    const [service, w1] = [await streamRows('service'), await streamRows('ws:w1')];
    expect(service.map((r) => r.seq)).to.deep.equal([1]);
    expect(w1.map((r) => r.seq)).to.deep.equal([1, 2]);
    expect(service[0]!.gseq).to.equal(w1[1]!.gseq);
    expect(await countIn(b, graphs.system)).to.equal(1);
    expect(await countIn(b, graphs.iam('w1'))).to.equal(2);
    expect(b.appliedHeads()).to.deep.equal(new Map([['service', 1], ['ws:w1', 2]]));
    const c = await openStore();
    expect(c.info.recordsReplayed, 'writes replayed').to.equal(2);
    expect(await countIn(c, graphs.iam('w1'))).to.equal(2);
  });

  it('writes over the service stream and a workspace each, racing on two stores: each is in both streams or in neither', async () => {
    const [a, b] = [await openStore(), await openStore()];
    const writes = Array.from({ length: 16 }, (_, n) => {
      const ws = graphs.iam(n % 2 ? 'odd' : 'even');
      const op = updateOp(sparql`INSERT DATA { GRAPH ${iri(graphs.system)} { ${iri(`https://example.org/w${n}`)} ${P} ${integer(n)} } GRAPH ${iri(ws)} { ${iri(`https://example.org/w${n}`)} ${P} ${integer(n)} } }`,
        [graphs.system, ws]);
      return (n % 2 ? a : b).write([op]);
    });
    await Promise.all(writes);
    const service = await streamRows('service');
    const ws = [...await streamRows('ws:odd'), ...await streamRows('ws:even')];
    expect(service.map((r) => r.seq)).to.deep.equal(Array.from({ length: 16 }, (_, i) => i + 1));
    expect(ws.map((r) => r.gseq).sort((x, y) => x - y)).to.deep.equal(service.map((r) => r.gseq).sort((x, y) => x - y));
    for (const store of [a, b]) {
      expect(await countIn(store, graphs.system)).to.equal(16);
      expect(await countIn(store, graphs.iam('odd')) + await countIn(store, graphs.iam('even'))).to.equal(16);
    }
  });

  it('an append whose head on one stream moved appends to no stream', async () => {
    const [a, b] = [await openStore(), await openStore()];
    await a.write([insertInto(graphs.iam('w1'), 1)]);
    await b.write([insertInto(graphs.system, 2)]);
    // As a store that has not seen b's write would append: service expected at 0, where it is at 1.
    const rows = [
      { stream: 'service', seq: 1, record: encodeRecord(1, [insertInto(graphs.system, 3)]) },
      { stream: 'ws:w1', seq: 2, record: encodeRecord(2, [insertInto(graphs.iam('w1'), 3)]) },
    ];
    let failure: unknown;
    try {
      await a.log.append(rows, new Map([['service', 0], ['ws:w1', 1]]), false);
    } catch (err) {
      failure = err;
    }
    expect(failure).to.be.instanceOf(HeadMovedError);
    expect((await streamRows('ws:w1')).map((r) => r.seq)).to.deep.equal([1]);
    expect((await sql('SELECT stream, seq FROM wsm_heads ORDER BY stream')).map((r) => `${r.stream}:${r.seq}`)).to.deep.equal(['service:1', 'ws:w1:1']);
    // Only reading a stream whose head moved fails the append too.
    failure = undefined;
    try {
      await a.log.append([rows[1]!], new Map([['service', 0], ['ws:w1', 1]]), false);
    } catch (err) {
      failure = err;
    }
    expect(failure).to.be.instanceOf(HeadMovedError);
    expect((await streamRows('ws:w1')).length).to.equal(1);
  });

  it('a write whose condition reads the service stream is ordered after the service write it saw, or sees it', async () => {
    const [a, b] = [await openStore(), await openStore()];
    for (let round = 0; round < 6; round++) {
      const flag = iri(`https://example.org/closed${round}`);
      const open = { ask: sparql`ASK { GRAPH ${iri(graphs.system)} { ${flag} ?p ?o } }`, expect: false };
      const ws = graphs.iam(`r${round}`);
      const [applied] = await Promise.all([
        a.writeIf(open, [insertInto(ws, round)]),
        b.write([updateOp(sparql`INSERT DATA { GRAPH ${iri(graphs.system)} { ${flag} ${P} 1 } }`, [graphs.system])]),
      ]);
      const wsRows = await streamRows(`ws:r${round}`);
      const flagGseq = Math.max(...(await streamRows('service')).map((r) => r.gseq));
      if (applied) {
        expect(wsRows).to.have.length(1);
        expect(wsRows[0]!.gseq, 'applied before the flag was set').to.be.lessThan(flagGseq);
      } else {
        expect(wsRows).to.have.length(0);
      }
    }
  });

  it('a write whose reads cannot be named (GRAPH ?g) checks every stream, so every store computes the same result', async () => {
    const [a, b] = [await openStore(), await openStore()];
    await a.write([insertInto(graphs.iam('x'), 1)]);
    await b.write([insertInto(graphs.iam('y'), 2)]);
    const target = graphs.iam('z');
    const copyAll = updateOp(sparql`INSERT { GRAPH ${iri(target)} { ?s ${P} ?o } } WHERE { GRAPH ?g { ?s ${P} ?o } }`, [target]);
    await a.write([copyAll]);
    const c = await openStore();
    for (const store of [a, b, c]) expect(await countIn(store, target)).to.equal(2);
    expect((await streamRows('ws:z')).length).to.equal(1);
  });

  it('a database of the one-stream layout opens: its records and snapshot are kept, new writes go to their streams', async () => {
    // The tables as the one-stream version left them: a snapshot after record 1, record 2 after it.
    await sql(`CREATE TABLE wsm_journal (stream text NOT NULL, seq bigint NOT NULL, record bytea NOT NULL, PRIMARY KEY (stream, seq));
      CREATE TABLE wsm_snapshots (stream text NOT NULL, seq bigint NOT NULL, quads bigint NOT NULL, sha256 bytea NOT NULL, data bytea NOT NULL, PRIMARY KEY (stream, seq));
      CREATE TABLE wsm_archives (sha256 text PRIMARY KEY, bytes bytea NOT NULL);
      CREATE TABLE wsm_shared (name text PRIMARY KEY, value text NOT NULL);`);
    const quad = `<https://example.org/s1> <https://example.org/p> "1"^^<http://www.w3.org/2001/XMLSchema#integer> <${graphs.iam('old')}> .\n`;
    const { createHash } = await import('node:crypto');
    await sql("INSERT INTO wsm_snapshots VALUES ('service', 1, 1, $1, $2)", [createHash('sha256').update(quad).digest(), Buffer.from(quad)]);
    await sql("INSERT INTO wsm_journal VALUES ('service', 1, $1), ('service', 2, $2)", [encodeRecord(1, [insertInto(graphs.iam('old'), 1)]), encodeRecord(2, [insertInto(graphs.system, 2)])]);
    const a = await openStore();
    expect(a.info).to.include({ snapshotSeq: 1, recordsReplayed: 1 });
    expect(await countIn(a, graphs.iam('old'))).to.equal(1);
    expect(await countIn(a, graphs.system)).to.equal(1);
    await a.write([insertInto(graphs.iam('old'), 3)]);
    await a.write([insertInto(graphs.system, 4)]);
    expect((await streamRows('service')).map((r) => r.seq)).to.deep.equal([1, 2, 3]);
    expect((await streamRows('ws:old')).map((r) => r.seq)).to.deep.equal([1]);
    const b = await openStore();
    expect(await countIn(b, graphs.iam('old'))).to.equal(2);
    expect(await countIn(b, graphs.system)).to.equal(2);
    // A row as the one-stream version appends it (no gseq) is refused: an older instance still running cannot write.
    let refused: Error | undefined;
    try {
      await sql("INSERT INTO wsm_journal (stream, seq, record) VALUES ('service', 4, $1)", [encodeRecord(4, [insertInto(graphs.system, 5)])]);
    } catch (err) {
      refused = err as Error;
    }
    expect(refused?.message).to.match(/gseq/);
  });

  it('a database of a later layout is refused at start, naming what to do', async () => {
    await (await openStore()).close();
    await sql("UPDATE wsm_shared SET value = '3' WHERE name = 'journal-layout'");
    let refused: Error | undefined;
    try {
      await openStore();
    } catch (err) {
      refused = err as Error;
    }
    expect(refused?.message).to.match(/WSM_POSTGRES_URL=.*layout 3.*later version/);
  });

  it('snapshots record the seq of each stream they hold; records behind both kept snapshots are pruned per stream', async () => {
    const a = await openStore();
    for (let n = 0; n < 10; n++) await a.write([insertInto(graphs.iam('s1'), n)]);
    await a.write([insertInto(graphs.system, 100)]);
    await a.snapshot();
    for (let n = 10; n < 15; n++) await a.write([insertInto(graphs.iam('s2'), n)]);
    await a.snapshot();
    const kept = await sql("SELECT seq, heads FROM wsm_snapshots WHERE stream = 'replica' ORDER BY seq");
    expect(kept.map((r) => r.heads)).to.deep.equal([{ service: 1, 'ws:s1': 10 }, { service: 1, 'ws:s1': 10, 'ws:s2': 5 }]);
    expect(await streamRows('ws:s1')).to.deep.equal([], 'held by both snapshots');
    expect(await streamRows('service')).to.deep.equal([]);
    expect((await streamRows('ws:s2')).map((r) => r.seq)).to.deep.equal([1, 2, 3, 4, 5], 'the older snapshot lacks them');
    await a.write([insertInto(graphs.iam('s1'), 20)]);
    const b = await openStore();
    expect(b.info.snapshotSeq).to.equal(16);
    expect(b.info.recordsReplayed).to.equal(1);
    expect(await countIn(b, graphs.iam('s1'))).to.equal(11);
    expect(await countIn(b, graphs.iam('s2'))).to.equal(5);
  });
});

/** Two service instances on one PostgreSQL: requests to two workspaces race on no head. */
describe('two service instances: writes to two workspaces', function () {
  this.timeout(300_000);
  const instances: TestServer[] = [];

  before(async function () {
    requirePostgres(this);
    const url = await freshClusterUrl();
    // A long lease: its renewals (writes of the service stream) do not fall in the measured part.
    const env = { WSM_STORE: 'cluster', WSM_POSTGRES_URL: url, WSM_LEASE_MS: '600000', WSM_LOG_LEVEL: 'error' };
    instances.push(await startTestServer(env));
    instances.push(await startTestServer(env));
  });
  after(async () => {
    for (const t of instances) {
      await t.close();
      removeDir(t.dataDir);
    }
  });

  const conflicts = () => instances.reduce((sum, t) => sum + (t.server.services.store as ClusterStore).headConflicts, 0);
  const create = (t: TestServer, token: string, ws: string, alias: string) =>
    t.http.post(`/api/v1/commands/${ws}`).set(bearer(token)).send({ alias, scriptType: 'DESCRIBE', scriptContent: 'DESCRIBE <https://example.org/x>' });

  it('slash commands created at once in two workspaces through two instances: no head conflict; one alias raced in one workspace: one 200, the rest 409', async () => {
    const [one, two] = instances as [TestServer, TestServer];
    const { tokens: first } = await seedWorkspace(one, 'first');
    const { tokens: second } = await seedWorkspace(two, 'second');
    // Each instance has read each workspace once (membership, users): what follows writes only the workspaces' streams.
    for (const [t, token, ws] of [[one, first.owner, 'first'], [two, second.owner, 'second'], [one, second.owner, 'second'], [two, first.owner, 'first']] as const) {
      expect((await create(t, token, ws, `warm-${t === one ? 1 : 2}`)).status).to.equal(200);
    }
    const before = conflicts();
    for (let round = 0; round < 10; round++) {
      const answers = await Promise.all([create(one, first.owner, 'first', `a${round}`), create(two, second.owner, 'second', `b${round}`)]);
      expect(answers.map((r) => r.status), JSON.stringify(answers.map((r) => r.body))).to.deep.equal([200, 200]);
    }
    expect(conflicts() - before, 'head conflicts between two workspaces').to.equal(0);
    for (let race = 0; race < 5; race++) {
      const answers = await Promise.all([0, 1, 2, 3].map((i) => create(instances[i % 2]!, first.owner, 'first', `same${race}`)));
      expect(answers.map((r) => r.status).sort(), `race ${race}`).to.deep.equal([200, 409, 409, 409]);
    }
    const listed = await two.http.get('/api/v1/commands/first').set(bearer(first.owner));
    expect(listed.body.data.map((c: { alias: string }) => c.alias).filter((a: string) => a.startsWith('same'))).to.have.length(5);
  });
});
