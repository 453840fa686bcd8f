import { Parser, type Quad } from 'n3';
import { updateOp, type QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import { WSM, prefixes } from '../rdf/vocab.js';
import { sparql, iri, literal, dateTime, boolean, isValidIri } from '../rdf/sparql.js';
import { newId, UUID_PATTERN } from '../rdf/ids.js';
import { req, time } from '../rdf/bindings.js';
import { AppError, badRequest, conflict, notFound } from '../errors.js';
import { NOT_APPLIED, untilApplied } from '../store/conditional.js';
import type { Workspace } from '../workspaces/service.js';
import type { UserService } from '../users/service.js';
import type { WriteOp } from '../store/store.js';
import type { ExtensionHook } from '../packages/service.js';
import { ExtensionRdf } from './rdf.js';
import { LABEL_MAX, type Extension } from './schema.js';
import { ReservedTerms } from '../rdf/reserved.js';
import { readExtensionTurtle, type UploadedTurtle } from './input.js';

/**
 * Queues the partial re-deployment of one matrix: a REDEPLOY lifecycle
 * command on the package that owns it (`PackageService.requestRedeploy`;
 * the lifecycle runner owns commands). Resolves with the queued command.
 */
export interface Redeployer {
  requestRedeploy(workspace: Workspace, matrixUri: string, reason: string): Promise<{ id: string }>;
}

/** The extensions of one matrix, as collected for a (re)deploy. */
export interface ExtensionContribution {
  matrixUri: string;
  /** The extensions merged, each with the `updatedAt` it had when collected. */
  extensions: Array<{ id: string; label: string; updatedAt: string }>;
  /** Their triples (default graph; blank nodes kept apart per extension). */
  quads: Quad[];
}

export interface InstalledMatrix {
  id: string;
  uri: string;
  name: string;
  packageId: string | null;
}

/**
 * Matrix extensions (X1-X5 in docs/api.md; docs/extensions.md): Turtle
 * documents that extend an installed matrix. Every change is stored at once
 * (inactive) and queues a REDEPLOY of the target matrix; the deploy makes
 * the extensions of that matrix active.
 */
export class ExtensionService implements ExtensionHook {
  private readonly rdf: ExtensionRdf;
  private redeployer: Redeployer | null = null;

  constructor(
    private readonly store: QuadStore,
    private readonly graphs: Graphs,
    private readonly users: UserService,
    readonly maxContentBytes: number,
  ) {
    this.rdf = new ExtensionRdf(graphs);
  }

  /** Wires the lifecycle side (set once both services exist). */
  setRedeployer(redeployer: Redeployer): void {
    this.redeployer = redeployer;
  }

  /** The installed matrix with this URI in the workspace, or null. */
  async findMatrix(workspaceId: string, matrixUri: string): Promise<InstalledMatrix | null> {
    if (!isValidIri(matrixUri)) return null;
    const rows = await this.store.select(sparql`${prefixes}SELECT ?id ?name ?pkgId WHERE {
      GRAPH ${iri(this.graphs.packages(workspaceId))} {
        ?m a wsm:Matrix ; wsm:id ?id ; wsm:uri ${iri(matrixUri)} .
        OPTIONAL { ?m wsm:name ?name }
        OPTIONAL { ?m wsm:package ?pkg . ?pkg wsm:id ?pkgId }
      } } LIMIT 1`);
    const b = rows[0];
    if (!b) return null;
    return { id: req(b, 'id'), uri: matrixUri, name: b.name?.value ?? matrixUri, packageId: b.pkgId?.value ?? null };
  }

  async list(workspace: Workspace): Promise<Extension[]> {
    return (await this.store.select(this.rdf.selectQuery(workspace.id, '', false))).map((b) => this.rdf.fromBinding(b, false));
  }

  /** One extension with its content; 404 when the workspace has none with this id. */
  async get(workspace: Workspace, id: string): Promise<Extension> {
    const found = await this.find(workspace, id);
    if (!found) throw notFound(`Extension "${id}" not found in this workspace`);
    return found;
  }

  private async find(workspace: Workspace, id: string): Promise<Extension | null> {
    if (!UUID_PATTERN.test(id)) return null;
    const filter = sparql`FILTER (?id = ${literal(id.toLowerCase())})`;
    const rows = await this.store.select(this.rdf.selectQuery(workspace.id, filter, true));
    return rows[0] ? this.rdf.fromBinding(rows[0], true) : null;
  }

  /** X5: stores the extension (inactive) and queues the partial re-deployment of its target. */
  async create(workspace: Workspace, input: { username: string; targetMatrix: string | undefined; label: string | undefined; file: UploadedTurtle | undefined }): Promise<Extension> {
    const targetMatrix = input.targetMatrix?.trim();
    if (!targetMatrix) throw badRequest('targetMatrix is required: the URI of the installed matrix to extend (query parameter or form field)');
    if (!isValidIri(targetMatrix)) throw badRequest(`targetMatrix must be an absolute IRI, not ${JSON.stringify(targetMatrix)}`);
    const label = checkLabel(input.label);
    if (!input.file) throw badRequest('A multipart "file" part with the Turtle of the extension is required');
    // The request is checked whole (400s) before the target is looked up (404).
    const turtle = readExtensionTurtle(input.file, { baseIri: targetMatrix, maxBytes: this.maxContentBytes, reserved: new ReservedTerms(this.graphs.base) });
    const matrix = await this.findMatrix(workspace.id, targetMatrix);
    if (!matrix) throw notFound(`No matrix with URI <${targetMatrix}> is installed in this workspace`);
    const id = newId();
    const finalLabel = label ?? defaultLabel(input.file, matrix);
    const owner = await this.users.get({ username: input.username });
    if (!owner) throw notFound(`User "${input.username}" not found`);
    const now = new Date();
    await this.store.write([
      this.rdf.insertRecord({
        workspaceId: workspace.id, workspaceIri: this.graphs.resource('workspace', workspace.id), id,
        label: finalLabel, targetMatrixUri: targetMatrix,
        ownerIri: this.users.userIri(owner.id), content: turtle.text, now,
      }),
      { kind: 'load', graph: this.graphs.extension(workspace.id, id), format: 'application/n-triples', data: turtle.ntriples },
    ]);
    const commandId = await this.redeploy(workspace, id, targetMatrix, `extension "${finalLabel}" (${id}) created`);
    return { ...await this.get(workspace, id), active: false, lastCommandId: commandId };
  }

  /**
   * X2: replaces the label and/or the Turtle, makes the extension inactive
   * and re-deploys. The change is a conditional write on the `updatedAt` it
   * read (optimistic): each applied change gets an `updatedAt` strictly later
   * than the one before it, which is what lets a REDEPLOY activate exactly
   * the content it collected (`activateOps`). When another change got in
   * between, it is made again on top of that one (both requests succeed, as
   * they would one after the other); a deletion in between answers 404.
   */
  async update(workspace: Workspace, id: string, input: { targetMatrix?: string | undefined; label: string | undefined; file: UploadedTurtle | undefined }): Promise<Extension> {
    const { existing, label } = await untilApplied(() => this.updateOnce(workspace, id, input),
      () => conflict(`Extension "${id}" changed while this request ran; try again`), 100);
    const commandId = await this.redeploy(workspace, id, existing.targetMatrixUri, `extension "${label ?? existing.label}" (${id}) updated`);
    return { ...await this.get(workspace, id), active: false, lastCommandId: commandId ?? existing.lastCommandId };
  }

  private async updateOnce(workspace: Workspace, id: string, input: { targetMatrix?: string | undefined; label: string | undefined; file: UploadedTurtle | undefined }): Promise<{ existing: Extension; label: string | undefined } | typeof NOT_APPLIED> {
    const existing = await this.get(workspace, id);
    if (input.targetMatrix !== undefined && input.targetMatrix.trim() !== existing.targetMatrixUri) {
      throw badRequest('The target matrix of an extension cannot change; create a new extension for the other matrix');
    }
    const label = checkLabel(input.label);
    const turtle = input.file
      ? readExtensionTurtle(input.file, { baseIri: existing.targetMatrixUri, maxBytes: this.maxContentBytes, reserved: new ReservedTerms(this.graphs.base) })
      : null;
    // Strictly later than the previous change: a REDEPLOY that collected the old content must not activate the new one.
    const now = new Date(Math.max(Date.now(), Date.parse(existing.updatedAt) + 1));
    const ops: WriteOp[] = [];
    const set = (property: string, value: ReturnType<typeof literal>) =>
      ops.push(this.rdf.setProperty(workspace.id, id, property, value));
    if (label !== undefined) set(WSM.label, literal(label));
    if (turtle) {
      set(WSM.content, literal(turtle.text));
      ops.push(this.rdf.clearContent(workspace.id, id));
      ops.push({ kind: 'load', graph: this.graphs.extension(workspace.id, id), format: 'application/n-triples', data: turtle.ntriples });
    }
    set(WSM.active, boolean(false));
    set(WSM.updatedAt, dateTime(now));
    const g = iri(this.graphs.extensions(workspace.id));
    const unchanged = { ask: sparql`${prefixes}ASK { GRAPH ${g} { ${iri(this.rdf.extensionIri(id))} a wsm:Extension ; wsm:updatedAt ?updatedAt .
      FILTER (?updatedAt = ${dateTime(existing.updatedAt)}) } }`, expect: true };
    if (!await this.store.writeIf(unchanged, ops)) return NOT_APPLIED;
    return { existing, label };
  }

  /** X3: deletes the extension and its content, and re-deploys its target without it. */
  async remove(workspace: Workspace, id: string): Promise<{ extension: Extension; commandId: string | null }> {
    const existing = await this.get(workspace, id);
    await this.store.write(this.rdf.deleteRecord(workspace.id, id));
    const commandId = await this.redeploy(workspace, null, existing.targetMatrixUri, `extension "${existing.label}" (${id}) deleted`);
    return { extension: existing, commandId };
  }

  /**
   * Queues the REDEPLOY of the target matrix when it is installed (an
   * extension whose package was uninstalled just waits, inactive, for the
   * next install) and records it as the extension's last command.
   */
  private async redeploy(workspace: Workspace, extensionId: string | null, matrixUri: string, reason: string): Promise<string | null> {
    if (!await this.findMatrix(workspace.id, matrixUri)) return null;
    if (!this.redeployer) throw new Error('extensions: no redeployer wired');
    let commandId: string;
    try {
      ({ id: commandId } = await this.redeployer.requestRedeploy(workspace, matrixUri,
        `${reason}; partial re-deployment: only this matrix is re-derived (with its extensions), the package's other matrices are unchanged`));
    } catch (err) {
      // Uninstalled in between: the extension waits, inactive, for the next install of the matrix.
      if (err instanceof AppError && err.code === 'NOT_FOUND') return null;
      throw err;
    }
    if (extensionId) {
      await this.store.write([this.rdf.setProperty(workspace.id, extensionId, WSM.lastCommand, iri(this.rdf.commandIri(commandId)))]);
    }
    return commandId;
  }

  // ---- ExtensionHook: the deployment's side (src/packages/deployment.ts) ----

  /**
   * Called inside every INSTALL, UPDATE, REINSTALL and REDEPLOY for each
   * matrix it deploys: every extension that targets the matrix is merged
   * with it (validated together, roles and agents derived from both), and
   * becomes active in the deployment's own atomic write. A failed command
   * drops the ops, so the extensions stay as they were.
   */
  async deploy(input: { workspaceId: string; matrixUri: string }): Promise<{ quads: Quad[]; ops: WriteOp[] }> {
    const contribution = await this.collect(input.workspaceId, input.matrixUri);
    return { quads: contribution.quads, ops: this.activateOps(input.workspaceId, contribution) };
  }

  /** Called inside an UNINSTALL (and for matrices an update drops): their extensions stay, inactive. */
  undeploy(input: { workspaceId: string; matrixUris: string[] }): WriteOp[] {
    return this.deactivateOps(input.workspaceId, input.matrixUris);
  }

  /** Every extension that targets the matrix (active or not), with its triples. */
  async collect(workspaceId: string, matrixUri: string): Promise<ExtensionContribution> {
    const rows = await this.store.select(sparql`${prefixes}SELECT ?id ?label ?updatedAt WHERE {
      GRAPH ${iri(this.graphs.extensions(workspaceId))} {
        ?x a wsm:Extension ; wsm:id ?id ; wsm:label ?label ; wsm:targetMatrix ${iri(matrixUri)} ; wsm:updatedAt ?updatedAt .
      } } ORDER BY ?id`);
    const extensions = rows.map((b) => ({ id: req(b, 'id'), label: req(b, 'label'), updatedAt: time(b, 'updatedAt') }));
    const quads: Quad[] = [];
    for (const [i, extension] of extensions.entries()) {
      const nt = await this.store.dumpGraph(this.graphs.extension(workspaceId, extension.id));
      quads.push(...new Parser({ format: 'N-Triples', blankNodePrefix: `x${i}_` }).parse(nt));
    }
    return { matrixUri, extensions, quads };
  }

  /**
   * Updates that mark the collected extensions active, each only while its
   * `updatedAt` is still the one collected (not changed or deleted since).
   */
  activateOps(workspaceId: string, contribution: ExtensionContribution): WriteOp[] {
    const g = iri(this.graphs.extensions(workspaceId));
    return contribution.extensions.map((extension) => {
      const x = iri(this.rdf.extensionIri(extension.id));
      return updateOp(sparql`${prefixes}DELETE { GRAPH ${g} { ${x} wsm:active ?old } } INSERT { GRAPH ${g} { ${x} wsm:active ${boolean(true)} } }
        WHERE { GRAPH ${g} { ${x} a wsm:Extension ; wsm:active ?old ; wsm:updatedAt ?updatedAt .
          FILTER (?updatedAt = ${dateTime(extension.updatedAt)}) } }`, [this.graphs.extensions(workspaceId)]);
    });
  }

  /** Updates that mark every extension of these matrices inactive. */
  deactivateOps(workspaceId: string, matrixUris: string[]): WriteOp[] {
    const g = iri(this.graphs.extensions(workspaceId));
    return matrixUris.map((uri) => updateOp(sparql`${prefixes}DELETE { GRAPH ${g} { ?x wsm:active ?old } } INSERT { GRAPH ${g} { ?x wsm:active ${boolean(false)} } }
      WHERE { GRAPH ${g} { ?x a wsm:Extension ; wsm:targetMatrix ${iri(uri)} ; wsm:active ?old } }`, [this.graphs.extensions(workspaceId)]));
  }
}

function checkLabel(label: string | undefined): string | undefined {
  if (label === undefined) return undefined;
  const trimmed = label.trim();
  if (!trimmed) throw badRequest('label must not be empty');
  if (trimmed.length > LABEL_MAX) throw badRequest(`label must be at most ${LABEL_MAX} characters`);
  return trimmed;
}

function defaultLabel(file: UploadedTurtle, matrix: InstalledMatrix): string {
  const name = file.originalname?.replace(/\.(ttl|turtle|nt)$/i, '').trim();
  return (name && name.length <= LABEL_MAX ? name : `Extension of ${matrix.name}`).slice(0, LABEL_MAX);
}
