import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseTurtle } from '../../../src/rdf/turtle.js';
import { WSM, RDF, RDFS } from '../../../src/rdf/vocab.js';

const OWL = 'http://www.w3.org/2002/07/owl#';
const DECLARATIONS = ['Class', 'ObjectProperty', 'DatatypeProperty', 'NamedIndividual'].map((t) => `${OWL}${t}`);
const file = fileURLToPath(new URL('../../../ontology/wsm.ttl', import.meta.url));

describe('ontology/wsm.ttl', () => {
  const quads = parseTurtle(readFileSync(file, 'utf8'), { source: 'ontology/wsm.ttl' });
  const values = (subject: string, predicate: string) =>
    quads.filter((q) => q.subject.value === subject && q.predicate.value === predicate).map((q) => q.object.value);
  const terms = Object.entries(WSM).filter(([key]) => key !== 'ns').map(([, iri]) => iri);

  it('declares every term of WSM as exactly one of class, object property, datatype property or individual', () => {
    expect(terms.length).to.be.greaterThan(60);
    const undeclared = terms.filter((iri) => values(iri, RDF.type).filter((t) => DECLARATIONS.includes(t)).length !== 1);
    expect(undeclared).to.deep.equal([]);
  });

  it('labels and explains every term', () => {
    expect(terms.filter((iri) => values(iri, RDFS.label).length !== 1)).to.deep.equal([]);
    expect(terms.filter((iri) => values(iri, RDFS.comment).length !== 1)).to.deep.equal([]);
  });

  it('declares nothing in wsm: that the code does not know (no stale terms)', () => {
    const declared = new Set(quads.filter((q) => q.subject.value.startsWith(WSM.ns)).map((q) => q.subject.value));
    expect([...declared].filter((iri) => !terms.includes(iri))).to.deep.equal([]);
  });

  it('types the classes the model uses as classes and the links as object properties', () => {
    for (const cls of [WSM.Workspace, WSM.Role, WSM.Agent, WSM.Principal, WSM.LifecycleCommand]) {
      expect(values(cls, RDF.type), cls).to.deep.equal([`${OWL}Class`]);
    }
    for (const link of [WSM.workspace, WSM.role, WSM.actor, WSM.matrix, WSM.uri]) {
      expect(values(link, RDF.type), link).to.deep.equal([`${OWL}ObjectProperty`]);
    }
    expect(values(WSM.createdAt, `${RDFS.ns}range`)).to.deep.equal(['http://www.w3.org/2001/XMLSchema#dateTime']);
  });
});
