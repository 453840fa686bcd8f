import cytoscape from 'cytoscape';
import type { Triple, Term } from './rdf.js';

const short = (iri: string) => {
  const cut = Math.max(iri.lastIndexOf('#'), iri.lastIndexOf('/'));
  return cut >= 0 && cut < iri.length - 1 ? iri.slice(cut + 1) : iri;
};
const literalText = (t: Term) => (t.value.length > 40 ? `${t.value.slice(0, 39)}…` : t.value);

/** How much one press of a zoom button zooms, and the margin kept around the fitted graph, in pixels. */
const ZOOM_STEP = 1.4;
const FIT_PADDING = 24;

const button = (label: string, title: string, className: string, onclick: () => void): HTMLButtonElement => {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = `small ${className}`;
  b.textContent = label;
  b.title = title;
  b.setAttribute('aria-label', title);
  b.addEventListener('click', onclick);
  return b;
};

/**
 * Draws triples as a graph with cytoscape: resources are circles, literals
 * boxes, predicates labelled edges. The graph is fitted to its box once
 * laid out, with buttons to zoom in, zoom out and fit again (the wheel and
 * a pinch zoom too). The box's `data-zoom` holds the current zoom.
 */
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
  const canvas = document.createElement('div');
  canvas.className = 'graph-canvas';
  const controls = document.createElement('div');
  controls.className = 'graph-controls';
  controls.setAttribute('role', 'toolbar');
  controls.setAttribute('aria-label', 'Zoom');
  container.replaceChildren(canvas, controls);
  const cy = cytoscape({
    container: canvas,
    elements: [...nodes.values(), ...edges],
    // Laid out in the box's own shape (a wide box gets a wide graph), so that once fitted a few dozen triples stay readable instead of dots.
    layout: { name: 'cose', animate: false, nodeDimensionsIncludeLabels: true, randomize: false, idealEdgeLength: () => 60, nodeRepulsion: () => 9000, componentSpacing: 60, padding: FIT_PADDING, fit: true, boundingBox: { x1: 0, y1: 0, w: Math.max(canvas.clientWidth, 300), h: Math.max(canvas.clientHeight, 300) } },
    minZoom: 0.05,
    maxZoom: 6,
    wheelSensitivity: 0.3,
    style: [
      { selector: 'node', style: { label: 'data(label)', 'font-size': 12, 'text-valign': 'bottom', 'text-margin-y': 3, 'background-color': '#3b6ea8', width: 20, height: 20, color: '#1d2733', 'text-background-color': '#fff', 'text-background-opacity': 0.8, 'text-background-padding': '1px' } },
      { selector: 'node[kind = "blank"]', style: { 'background-color': '#8a97a6' } },
      { selector: 'node[kind = "literal"]', style: { shape: 'round-rectangle', 'background-color': '#f2c14e', width: 16, height: 12 } },
      { selector: 'edge', style: { label: 'data(label)', 'font-size': 10, 'curve-style': 'bezier', 'target-arrow-shape': 'triangle', width: 1, 'line-color': '#9aa9b8', 'target-arrow-color': '#9aa9b8', color: '#4a5866', 'text-rotation': 'autorotate', 'text-background-color': '#fff', 'text-background-opacity': 0.8, 'text-background-padding': '1px' } },
    ],
  });
  const showZoom = () => { container.dataset.zoom = cy.zoom().toFixed(4); };
  const zoomBy = (factor: number) => {
    cy.zoom({ level: cy.zoom() * factor, renderedPosition: { x: cy.width() / 2, y: cy.height() / 2 } });
  };
  // A small graph is not blown up past twice its size: labels stay at their size, the graph in the middle.
  const fit = () => {
    cy.fit(undefined, FIT_PADDING);
    if (cy.zoom() > 2) {
      cy.zoom(2);
      cy.center();
    }
  };
  controls.append(
    button('+', 'Zoom in', 'zoom-in', () => zoomBy(ZOOM_STEP)),
    button('−', 'Zoom out', 'zoom-out', () => zoomBy(1 / ZOOM_STEP)),
    button('Fit', 'Fit the graph in the box', 'zoom-fit', fit));
  cy.on('zoom', showZoom);
  fit();
  showZoom();
  container.dataset.nodes = String(cy.nodes().length);
  container.dataset.edges = String(cy.edges().length);
  return { nodes: cy.nodes().length, edges: cy.edges().length };
}
