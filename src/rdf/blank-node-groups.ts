/**
 * Groups of linked blank nodes (union-find over their labels): two labels
 * are in one group when a triple names both, directly or through others.
 * A writer that sends RDF in several calls keeps each group in one call,
 * because each call reads blank node labels afresh.
 */
export class BlankNodeGroups {
  private readonly parent = new Map<string, string>();

  /** Records the blank node labels of one triple (its subject's and its object's): they are one group from now on. */
  link(labels: readonly string[]): void {
    for (const label of labels) if (!this.parent.has(label)) this.parent.set(label, label);
    if (labels.length === 2) {
      const a = this.group(labels[0]!);
      const b = this.group(labels[1]!);
      if (a !== b) this.parent.set(a, b);
    }
  }

  /** The label standing for the group of `label` (recorded by `link`). */
  group(label: string): string {
    let root = label;
    for (let up = this.parent.get(root)!; up !== root; up = this.parent.get(root)!) root = up;
    for (let at = label, up = this.parent.get(at)!; up !== root; at = up, up = this.parent.get(at)!) this.parent.set(at, root);
    return root;
  }
}
