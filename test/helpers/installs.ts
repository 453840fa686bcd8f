import { expect } from 'chai';
import { bearer, type TestServer } from './server.js';
import { tinyPackage } from './packages.js';
import { uploadAndWait, waitForCommand, type CommandJson } from './lifecycle.js';

/**
 * Matrix knowledge put in place the way clients do it: packages uploaded
 * (P2) and uninstalled (P6), extensions created (X5), replaced (X2) and
 * deleted (X3), each waited for until its lifecycle command finished.
 */

export interface MatrixFile {
  /** The matrix URI; its Turtle declares `<uri> a mtx:Matrix`. */
  uri: string;
  turtle: string;
  /** Manifest name (default: the last segment of the URI). */
  name?: string;
}

/** Uploads a package holding these matrices and waits until it is installed (asserts the command completed). */
export async function installMatrices(
  t: TestServer, token: string, workspace: string, packageName: string, matrices: MatrixFile[], version = '1.0.0',
): Promise<CommandJson> {
  const archive = await tinyPackage({
    name: packageName,
    version,
    matrices: matrices.map((m) => ({ uri: m.uri, turtle: m.turtle, name: m.name ?? m.uri.replace(/[#/]+$/, '').split(/[#/]/).pop()! })),
  });
  const command = await uploadAndWait(t, token, workspace, archive);
  expect(command.status, JSON.stringify(command)).to.equal('completed');
  return command;
}

/** P6, waited for (asserts the command completed). */
export async function uninstallPackage(t: TestServer, token: string, workspace: string, packageName: string): Promise<CommandJson> {
  const res = await t.http.delete(`/api/v1/packages/${workspace}/${packageName}`).set(bearer(token));
  expect(res.status, JSON.stringify(res.body)).to.equal(202);
  const command = await waitForCommand(t, token, workspace, res.body.data.id);
  expect(command.status, JSON.stringify(command)).to.equal('completed');
  return command;
}

export interface ExtensionOutcome {
  id: string;
  /** The extension's REDEPLOY command, finished: `completed` (the extension is active) or `failed` (it stays inactive). */
  command: CommandJson;
  active: boolean;
}

async function outcome(t: TestServer, token: string, workspace: string, id: string, commandId: string): Promise<ExtensionOutcome> {
  const command = await waitForCommand(t, token, workspace, commandId);
  const res = await t.http.get(`/api/v1/extensions/${workspace}/${id}`).set(bearer(token));
  expect(res.status, JSON.stringify(res.body)).to.equal(200);
  return { id, command, active: res.body.data.active as boolean };
}

/** X5, then waits for its REDEPLOY. */
export async function createExtension(
  t: TestServer, token: string, workspace: string, targetMatrixUri: string, turtle: string, label = 'Test extension',
): Promise<ExtensionOutcome> {
  const res = await t.http.post(`/api/v1/extensions/${workspace}?targetMatrix=${encodeURIComponent(targetMatrixUri)}&label=${encodeURIComponent(label)}`)
    .set(bearer(token)).attach('file', Buffer.from(turtle), { filename: 'extension.ttl', contentType: 'text/turtle' });
  expect(res.status, JSON.stringify(res.body)).to.equal(200);
  return outcome(t, token, workspace, res.body.data.id, res.body.data.lastCommandId);
}

/** X2 with new Turtle, then waits for its REDEPLOY. */
export async function replaceExtension(t: TestServer, token: string, workspace: string, id: string, turtle: string): Promise<ExtensionOutcome> {
  const res = await t.http.put(`/api/v1/extensions/${workspace}/${id}`).set(bearer(token))
    .attach('file', Buffer.from(turtle), { filename: 'extension.ttl', contentType: 'text/turtle' });
  expect(res.status, JSON.stringify(res.body)).to.equal(200);
  return outcome(t, token, workspace, id, res.body.data.lastCommandId);
}

/** X3, then waits for the REDEPLOY without it (asserts it completed). */
export async function deleteExtension(t: TestServer, token: string, workspace: string, id: string): Promise<void> {
  const res = await t.http.delete(`/api/v1/extensions/${workspace}/${id}`).set(bearer(token));
  expect(res.status, JSON.stringify(res.body)).to.equal(200);
  const commandId = /command ([0-9a-f-]{36})/.exec(String(res.body.data))?.[1];
  if (!commandId) return;
  const command = await waitForCommand(t, token, workspace, commandId);
  expect(command.status, JSON.stringify(command)).to.equal('completed');
}

/** A small but real matrix specification: a matrix, three roles, two agents with their roles. */
export function supportMatrixTurtle(base = 'https://example.org/matrices/support'): string {
  return `@prefix mtx: <https://poliglot.io/os/spec/matrix#> .
@prefix iam: <https://poliglot.io/os/spec/iam#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix s: <${base}#> .

<${base}> a mtx:Matrix ;
  rdfs:label "Customer support" ;
  rdfs:comment "Roles and agents of the support desk." .

s:Triage a iam:Role ; rdfs:label "Triage" ; rdfs:comment "Sorts incoming tickets." .
s:Responder a iam:Role ; rdfs:label "Responder" ; rdfs:comment "Answers customers." .
s:Supervisor a iam:Role ; rdfs:label "Supervisor" .

s:TriageBot a iam:Agent ; rdfs:label "Triage bot" ; rdfs:comment "Labels and routes tickets." ;
  iam:hasRole s:Triage .
s:HelpBot a iam:Agent ; rdfs:label "Help bot" ;
  iam:hasRole s:Responder , s:Triage .
`;
}
