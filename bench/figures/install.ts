import { readdirSync, readFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { DataFactory, Parser as TurtleParser, Store as N3Store, Writer } from 'n3';
import oxigraph from 'oxigraph';
import { Validator as ShaclEngine } from 'shacl-engine';
import * as tar from 'tar';
import { figure, installPackage, interleave, median, removeDir, ROOT, serviceWithWorkspace, workDir, type Figure } from '../lib.js';
import { packageArchive } from '../data.js';

const TRIPLES = 100_000;

/**
 * The same steps done bare, in this process: tar read, Turtle parse, SHACL
 * validation, Oxigraph load, and the write made durable: the loaded
 * N-Triples appended to a journal file and fdatasynced before it counts.
 */
async function bareInstall(archive: Buffer, shapes: N3Store, journal: string): Promise<number> {
  const started = performance.now();
  const files = new Map<string, string>();
  await new Promise<void>((resolve, reject) => {
    const parser = new tar.Parser({
      onReadEntry: (entry) => {
        const chunks: Buffer[] = [];
        entry.on('data', (c: Buffer) => chunks.push(c));
        entry.on('end', () => files.set(entry.path, Buffer.concat(chunks).toString('utf8')));
      },
    });
    parser.on('end', resolve);
    parser.on('error', reject);
    Readable.from([archive]).pipe(parser);
  });
  const manifest = JSON.parse(files.get('manifest.json')!) as { matrices: Array<{ path: string; uri: string }> };
  const store = new oxigraph.Store();
  for (const matrix of manifest.matrices) {
    const quads = new TurtleParser().parse(files.get(matrix.path)!);
    const data = new N3Store(quads);
    const report = await new ShaclEngine(shapes, { factory: { ...DataFactory, dataset: () => new N3Store() } }).validate({ dataset: data });
    // Like the service: infos and warnings are kept, only a violation fails.
    if (report.results.some((r) => r.severity.value.endsWith('Violation'))) throw new Error('bare validation found a violation');
    const nt = new Writer({ format: 'N-Triples' }).quadsToString(quads);
    store.load(nt, { format: 'application/n-triples', to_graph_name: oxigraph.namedNode(matrix.uri) });
    const file = await open(journal, 'a');
    try {
      await file.write(nt);
      await file.datasync();
    } finally {
      await file.close();
    }
  }
  return performance.now() - started;
}

/** Install of a package with one 100,000-triple matrix: P2 to completed, against the same steps done bare. */
export async function run(): Promise<Figure[]> {
  const shapesDir = path.join(ROOT, 'shapes');
  const shapes = new N3Store();
  for (const file of readdirSync(shapesDir).filter((f) => f.endsWith('.ttl'))) shapes.addQuads(new TurtleParser().parse(readFileSync(path.join(shapesDir, file), 'utf8')));
  const env = await serviceWithWorkspace();
  const journalDir = workDir('install-journal');
  try {
    const pairs = 3;
    const archives = await Promise.all(Array.from({ length: pairs }, (_, i) => packageArchive(`big-${i}`, '1.0.0', `https://bench.example/matrix/big-${i}`, TRIPLES)));
    let s = 0;
    let b = 0;
    const m = await interleave(pairs,
      async () => (await installPackage(env.svc.url, env.token, env.slug, archives[s++]!)).ms,
      () => bareInstall(archives[b++]!, shapes, path.join(journalDir, 'journal.nt')),
      (ms) => ms);
    return [figure({
      name: `install of one ${TRIPLES.toLocaleString('en')}-triple matrix, P2 to completed`, unit: 'ms',
      value: median(m.service), baseline: median(m.baseline), ratios: m.ratios, target: '<= 1.3x', check: (r) => r <= 1.3,
      note: 'baseline: tar read + Turtle parse + SHACL (shapes/) + Oxigraph load + journal append and fdatasync of the N-Triples, in process',
      cause: 'the service also runs these steps in a worker and hands the data back, checks every term, derives roles and agents, writes in slices between event-loop turns and records the lifecycle command and its events',
    })];
  } finally {
    removeDir(journalDir);
    await env.close();
  }
}
