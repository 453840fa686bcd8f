import { expect } from 'chai';
import oxigraph from 'oxigraph';
import { DataFactory } from 'n3';
import { AppError } from '../../../src/errors.js';
import { parseTurtle, quadsToNTriples, looksLikeRdfXml } from '../../../src/rdf/turtle.js';

function syntaxError(text: string, source = 'tracking/assembly.ttl'): AppError {
  try {
    parseTurtle(text, { source });
  } catch (error) {
    expect(error).to.be.instanceOf(AppError);
    return error as AppError;
  }
  throw new Error('expected a syntax error');
}

describe('rdf/turtle', () => {
  const matrix = `@prefix mtx: <https://poliglot.io/os/spec/matrix#> .
@prefix iam: <https://poliglot.io/os/spec/iam#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix : <https://example.org/tracking#> .

<https://example.org/tracking> a mtx:Matrix ; rdfs:label "Project tracking"@en .
:ProjectManager a iam:Role ; rdfs:label "Project manager" ;
  rdfs:comment """Plans milestones and "owns" the backlog.
Second line.""" .
:Triage a iam:Agent ; rdfs:label "Triage bot" ; iam:hasRole :ProjectManager .
`;

  it('parses Turtle into default-graph quads and resolves relative IRIs against the base', () => {
    const quads = parseTurtle('<issue> <https://example.org/p> "x" .', { baseIri: 'https://example.org/base/' });
    expect(quads).to.have.length(1);
    expect(quads[0]!.subject.value).to.equal('https://example.org/base/issue');
    expect(quads[0]!.graph.termType).to.equal('DefaultGraph');
    expect(parseTurtle(matrix)).to.have.length(8);
  });

  it('reports line and column of a parser error and names the source', () => {
    const error = syntaxError('@prefix ex: <http://e/> .\nex:a ex:b ex:c .\nex:a ex:b  ex:c ex:d .\n');
    expect(error.code).to.equal('BAD_REQUEST');
    expect(error.message).to.match(/^tracking\/assembly\.ttl: Turtle syntax error at line 3, column 17: /);
    expect(error.details).to.deep.equal({ source: 'tracking/assembly.ttl', line: 3, column: 17 });
  });

  it('computes the column of a lexer error (n3 only gives the line)', () => {
    const error = syntaxError('@prefix ex: <http://e/> .\nex:a ex:b "never closed .\n');
    expect(error.details).to.include({ line: 2, column: 11 });
    const arrow = syntaxError('@prefix ex: <http://e/> .\nex:a ex:b ex:c .\n  ex:a => ex:b .');
    expect(arrow.details).to.include({ line: 3, column: 8 });
  });

  it('refuses an undefined prefix, at its position', () => {
    const error = syntaxError('@prefix ex: <http://e/> .\n\n   foo:a ex:b ex:c .');
    expect(error.message).to.include('Undefined prefix "foo:"');
    expect(error.details).to.include({ line: 3, column: 4 });
  });

  it('is strict Turtle: no named graphs, no N3 formulas, no RDF 1.2 triple terms', () => {
    expect(syntaxError('@prefix ex: <http://e/> .\nex:g { ex:a ex:b ex:c }').details).to.include({ line: 2 });
    expect(syntaxError('@prefix ex: <http://e/> .\nex:a ex:b { ex:c ex:d ex:e } .').details).to.include({ line: 2, column: 11 });
    expect(syntaxError('@prefix ex: <http://e/> .\nex:a ex:b <<( ex:c ex:d ex:e )>> .').message).to.match(/triple terms/);
  });

  it('defaults the source name when none is given', () => {
    expect(() => parseTurtle('<a> <b> ')).to.throw(AppError, /^Turtle document: Turtle syntax error at line 1/);
  });

  it('writes N-Triples that a real store loads back to the same triples', () => {
    const quads = parseTurtle(matrix);
    const nt = quadsToNTriples(quads);
    expect(nt).to.not.include('@prefix');
    const store = new oxigraph.Store();
    store.load(nt, { format: 'application/n-triples', to_graph_name: oxigraph.namedNode('urn:g') });
    expect(store.size).to.equal(quads.length);
    const comment = store.match(null, oxigraph.namedNode('http://www.w3.org/2000/01/rdf-schema#comment'), null, null)[0];
    expect(comment!.object.value).to.equal('Plans milestones and "owns" the backlog.\nSecond line.');
  });

  it('drops the graph of named-graph quads', () => {
    const { quad, namedNode, literal } = DataFactory;
    const nt = quadsToNTriples([quad(namedNode('urn:s'), namedNode('urn:p'), literal('o'), namedNode('urn:g'))]);
    expect(nt.trim()).to.equal('<urn:s> <urn:p> "o" .');
  });

  it('sniffs RDF/XML and does not mistake Turtle for it', () => {
    expect(looksLikeRdfXml('<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"/>')).to.equal(true);
    expect(looksLikeRdfXml('\uFEFF  <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">')).to.equal(true);
    expect(looksLikeRdfXml('<!-- exported -->\n<Description xmlns="http://www.w3.org/1999/02/22-rdf-syntax-ns#"/>')).to.equal(true);
    expect(looksLikeRdfXml(matrix)).to.equal(false);
    expect(looksLikeRdfXml('<urn:x> a <urn:y> .')).to.equal(false);
    expect(looksLikeRdfXml('<http://a/b> <http://c> "xmlns=1" .')).to.equal(false);
    expect(looksLikeRdfXml('')).to.equal(false);
  });
});
