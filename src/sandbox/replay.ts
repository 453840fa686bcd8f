import sparqljs from 'sparqljs';

/*
 * What a journaled update does to some graphs, told from its parsed form,
 * so a query worker can bring its copy of those graphs up to date from the
 * journal (`worker.ts`, "Where a worker's data comes from" in
 * docs/slash-commands.md) without the store's other graphs. Only effects
 * that depend on nothing but the update's own text are replayed: clearing
 * or dropping a graph, and INSERT DATA / DELETE DATA. Any other operation
 * that may write one of the graphs (DELETE/INSERT ... WHERE, ADD, MOVE,
 * COPY, LOAD, a template whose graph is a variable) makes that graph
 * "unreplayable": its content depends on graphs the worker does not hold,
 * so the service sends it whole instead.
 */

/** One step of a replay: empty graphs, or run an update (data only) on the worker's store. */
export type ReplayStep = { clear: string[] } | { update: string };

type Operation = sparqljs.UpdateOperation;
type GraphRef = { type?: 'graph'; name?: { termType: string; value: string }; default?: true; named?: true; all?: true };
type QuadsBlock = { type: 'bgp' | 'graph'; name?: { termType: string; value: string }; triples: unknown[] };

const parser = new sparqljs.Parser();
const generator = new sparqljs.Generator();

/** The graphs of `graphs` a graph reference (of CLEAR, DROP, ADD...) names. */
function named(ref: GraphRef | undefined, graphs: ReadonlySet<string>): string[] {
  if (!ref) return [];
  if (ref.all || ref.named) return [...graphs];
  if (ref.name && ref.name.termType === 'NamedNode') return graphs.has(ref.name.value) ? [ref.name.value] : [];
  return [];
}

/** The graphs of `graphs` a quads template may write: a variable graph name may be any of them. */
function written(blocks: QuadsBlock[] | undefined, withGraph: string | undefined, graphs: ReadonlySet<string>): string[] {
  const out = new Set<string>();
  for (const block of blocks ?? []) {
    const name = block.type === 'graph' ? block.name : undefined;
    if (!name) {
      if (withGraph !== undefined && graphs.has(withGraph)) out.add(withGraph);
    } else if (name.termType !== 'NamedNode') {
      for (const g of graphs) out.add(g);
    } else if (graphs.has(name.value)) {
      out.add(name.value);
    }
  }
  return [...out];
}

/**
 * The steps that give `graphs` (the worker's graphs this update declares)
 * the effect of `update`, and the graphs it cannot replay. Steps only touch
 * graphs of `graphs` that are not unreplayable.
 */
export function replaySteps(update: string, graphs: ReadonlySet<string>): { steps: ReplayStep[]; unreplayable: string[] } {
  const parsed = parser.parse(update);
  if (parsed.type !== 'update') return { steps: [], unreplayable: [...graphs] };
  const operations = parsed.updates as Operation[];
  const lost = new Set<string>();
  for (const op of operations) {
    if ('type' in op) {
      const o = op as unknown as { type: string; graph?: GraphRef; source?: GraphRef | { termType: string; value: string }; destination?: GraphRef | { termType: string; value: string } };
      if (o.type === 'clear' || o.type === 'drop' || o.type === 'create') continue;
      if (o.type === 'load') {
        const into = o.destination as { termType: string; value: string } | undefined;
        if (into && graphs.has(into.value)) lost.add(into.value);
        continue;
      }
      // ADD, MOVE, COPY: the destination takes the source's content (MOVE also empties the source).
      for (const g of [...named(o.destination as GraphRef, graphs), ...named(o.source as GraphRef, graphs)]) lost.add(g);
      continue;
    }
    const o = op as unknown as { updateType: string; graph?: { value: string }; insert?: QuadsBlock[]; delete?: QuadsBlock[] };
    if (o.updateType === 'insert' || o.updateType === 'delete') continue;
    for (const g of [...written(o.insert, o.graph?.value, graphs), ...written(o.delete, o.graph?.value, graphs)]) lost.add(g);
  }
  const live = new Set([...graphs].filter((g) => !lost.has(g)));
  const steps: ReplayStep[] = [];
  if (live.size === 0) return { steps, unreplayable: [...lost] };
  for (const op of operations) {
    if ('type' in op) {
      const o = op as unknown as { type: string; graph?: GraphRef };
      if (o.type === 'clear' || o.type === 'drop') {
        const cleared = named(o.graph, live);
        if (cleared.length) steps.push({ clear: cleared });
      }
      continue;
    }
    const o = op as unknown as { updateType: string; insert?: QuadsBlock[]; delete?: QuadsBlock[] };
    if (o.updateType !== 'insert' && o.updateType !== 'delete') continue;
    const key = o.updateType as 'insert' | 'delete';
    const blocks = (o[key] ?? []).filter((b) => b.type === 'graph' && b.name?.termType === 'NamedNode' && live.has(b.name.value));
    if (blocks.length === 0) continue;
    steps.push({ update: generator.stringify({ type: 'update', prefixes: {}, updates: [{ updateType: key, [key]: blocks }] } as unknown as sparqljs.Update) });
  }
  return { steps, unreplayable: [...lost] };
}
