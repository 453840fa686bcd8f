import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { Header, type HeaderData } from 'tar';
import { buildPackageArchive } from '../../src/packages/build-archive.js';
import { EXAMPLES_DIR } from '../../src/packages/examples.js';

/** One raw tar entry; lets tests write archives no well-behaved packer would. */
export interface TarEntry {
  path: string;
  content?: string | Buffer;
  type?: HeaderData['type'];
  linkpath?: string;
  /** Size written in the header when it must differ from the content's. */
  size?: number;
}

/** A gzip-compressed tar of exactly these entries, in this order. */
export function tarGz(entries: TarEntry[]): Buffer {
  return gzipSync(tarBytes(entries));
}

/** An uncompressed tar of exactly these entries, in this order. */
export function tarBytes(entries: TarEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const body = e.content === undefined ? Buffer.alloc(0) : Buffer.from(e.content);
    const header = new Header({
      path: e.path,
      type: e.type ?? 'File',
      mode: e.type === 'Directory' ? 0o755 : 0o644,
      size: e.size ?? body.length,
      linkpath: e.linkpath,
      mtime: new Date(0),
      uid: 0,
      gid: 0,
    });
    const block = Buffer.alloc(512);
    header.encode(block, 0);
    blocks.push(block, body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

/** A small, valid matrix: one role and one agent holding it. */
export function sampleMatrixTurtle(uri: string, label = 'Sample matrix'): string {
  return `@prefix mtx: <https://poliglot.io/os/spec/matrix#> .
@prefix iam: <https://poliglot.io/os/spec/iam#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .

<${uri}> a mtx:Matrix ;
  rdfs:label "${label}" ;
  rdfs:comment "A matrix written by the tests." .

<${uri}#reviewer> a iam:Role ;
  rdfs:label "Reviewer" ;
  rdfs:comment "Reviews work before it ships." .

<${uri}#review-bot> a iam:Agent ;
  rdfs:label "Review bot" ;
  rdfs:comment "Reviews every change automatically." ;
  iam:hasRole <${uri}#reviewer> .
`;
}

export interface TinyPackageOptions {
  name: string;
  version?: string;
  engineVersion?: string;
  description?: string;
  /** Defaults to one matrix "main" at https://example.org/packages/<name>/main. */
  matrices?: Array<{ name: string; uri: string; turtle: string; path?: string }>;
  /** Entries appended after the manifest and the matrices. */
  extraEntries?: TarEntry[];
  /** Replaces the manifest object written to manifest.json (a string is written as is). */
  manifest?: unknown;
}

/** A package archive built in memory from the options. */
export async function tinyPackage(opts: TinyPackageOptions): Promise<Buffer> {
  const matrices = opts.matrices ?? [{
    name: 'main',
    uri: `https://example.org/packages/${opts.name}/main`,
    turtle: sampleMatrixTurtle(`https://example.org/packages/${opts.name}/main`),
  }];
  const withPaths = matrices.map((m) => ({ ...m, path: m.path ?? `${m.name}/assembly.ttl` }));
  const manifest = opts.manifest ?? {
    name: opts.name,
    version: opts.version ?? '1.0.0',
    engineVersion: opts.engineVersion ?? '>=1.0 <2.0',
    ...(opts.description === undefined ? {} : { description: opts.description }),
    matrices: withPaths.map(({ name, path: p, uri }) => ({ name, path: p, uri })),
  };
  return tarGz([
    { path: 'manifest.json', content: typeof manifest === 'string' ? manifest : JSON.stringify(manifest, null, 2) },
    ...withPaths.map((m) => ({ path: m.path, content: m.turtle })),
    ...(opts.extraEntries ?? []),
  ]);
}

/** The archive of one example package directory under examples/packages/. */
export function examplePackage(dir: string): Promise<Buffer> {
  return buildPackageArchive(path.join(EXAMPLES_DIR, dir));
}
