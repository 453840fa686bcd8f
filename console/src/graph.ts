import cytoscape from 'cytoscape';
import type { Triple, Term } from './rdf.js';

const short = (iri: string) => {
  const cut = Math.max(iri.lastIndexOf('#'), iri.lastIndexOf('/'));
  return cut >= 0 && cut < iri.length - 1 ? iri.slice(cut + 1) : iri;
};
const literalText = (t: Term) => (t.value.length > 40 ? `${t.value.slice(0, 39)}…` : t.value);

/** Draws triples as a graph with cytoscape: resources are circles, literals boxes, predicates labelled edges. */
export function drawGraph(container: HTMLElement, triples: Triple[]): { nodes: number; edges: number } {
  const nodes = new Map<string, cytoscape.ElementDefinition>();
  const edges: cytoscape.ElementDefinition[] = [];
  const nodeOf = (t: Term, index: number): string => {
    const id = t.kind === 'literal' ? `lit:${index}` : t.value;
    if (!nodes.has(id)) {
      nodes.set(id, { data: { id, label: t.kind === 'literal' ? literalText(t) : short(t.value), full: t.value, kind: t.kind } });
    }
    return id;
  };
  triples.forEach((t, i) => {
    const source = nodeOf(t.s, i);
    const target = nodeOf(t.o, i);
    edges.push({ data: { id: `e${i}`, source, target, label: short(t.p.value), full: t.p.value } });
  });
  container.replaceChildren();
  const cy = cytoscape({
    container,
    elements: [...nodes.values(), ...edges],
    layout: { name: 'cose', animate: false, nodeDimensionsIncludeLabels: true, randomize: false },
    wheelSensitivity: 0.3,
    style: [
      { selector: 'node', style: { label: 'data(label)', 'font-size': 10, 'text-valign': 'bottom', 'text-margin-y': 3, 'background-color': '#3b6ea8', width: 18, height: 18, color: '#1d2733' } },
      { selector: 'node[kind = "blank"]', style: { 'background-color': '#8a97a6' } },
      { selector: 'node[kind = "literal"]', style: { shape: 'round-rectangle', 'background-color': '#f2c14e', width: 14, height: 10 } },
      { selector: 'edge', style: { label: 'data(label)', 'font-size': 8, 'curve-style': 'bezier', 'target-arrow-shape': 'triangle', width: 1, 'line-color': '#9aa9b8', 'target-arrow-color': '#9aa9b8', color: '#4a5866', 'text-rotation': 'autorotate' } },
    ],
  });
  container.dataset.nodes = String(cy.nodes().length);
  container.dataset.edges = String(cy.edges().length);
  return { nodes: cy.nodes().length, edges: cy.edges().length };
}
