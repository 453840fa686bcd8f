import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import n3 from 'n3';
import { startTestServer, removeDir, bearer, seedWorkspace, type TestServer } from '../helpers/server.js';
import { installMatrices, uninstallPackage, createExtension, supportMatrixTurtle } from '../helpers/installs.js';

const S = 'https://example.org/matrices/support';
const B = 'https://example.org/matrices/billing';
const A = 'https://example.org/matrices/audit';
const MTX = 'https://poliglot.io/os/spec/matrix#';
const IAM = 'https://poliglot.io/os/spec/iam#';
const RDFS = 'http://www.w3.org/2000/01/rdf-schema#';
const TYPE = 'http://www.w3.org/1999/02/22-rdf-syntax-ns#type';
const OV = 'https://example.org/overview#';

/** Installed before billing and uninstalled after it, so billing's agent holds a role no matrix defines any more. */
const AUDIT = `@prefix mtx: <${MTX}> . @prefix iam: <${IAM}> . @prefix rdfs: <${RDFS}> .
<${A}> a mtx:Matrix ; rdfs:label "Audit" .
<${A}#Auditor> a iam:Role ; rdfs:label "Auditor" ; rdfs:comment "Reads the books." .
`;

const BILLING = `@prefix mtx: <${MTX}> . @prefix iam: <${IAM}> . @prefix rdfs: <${RDFS}> .
@prefix b: <${B}#> . @prefix s: <${S}#> . @prefix a: <${A}#> .
<${B}> a mtx:Matrix ; rdfs:label "Billing" ; mtx:imports <${S}> .
b:Biller a iam:Role ; rdfs:label "Biller" ; rdfs:comment "Sends invoices." .
b:Refunds a iam:Role ; rdfs:label "Refunds" .
b:InvoiceBot a iam:Agent ; rdfs:label "Invoice bot" ; rdfs:comment "Writes invoices." ;
  iam:hasRole b:Biller , s:Supervisor , a:Auditor .
`;

const ACTIVE_EXTENSION = `@prefix iam: <${IAM}> . @prefix rdfs: <${RDFS}> . @prefix s: <${S}#> .
s:Escalation a iam:Role ; rdfs:label "Escalation" .
s:TriageBot iam:hasRole s:Escalation .
`;
/** Its role has no label: the REDEPLOY fails validation and the extension stays inactive. */
const INACTIVE_EXTENSION = `@prefix iam: <${IAM}> . @prefix s: <${S}#> .
s:Ghost a iam:Role . s:HelpBot iam:hasRole s:Ghost .
`;

/** The example commands of docs/slash-commands.md: alias -> script. */
function documentedExamples(): Map<string, string> {
  const doc = readFileSync(new URL('../../docs/slash-commands.md', import.meta.url), 'utf8');
  const examples = new Map<string, string>();
  for (const m of doc.matchAll(/^### `\/([\w:-]+)`[\s\S]*?```sparql\n([\s\S]*?)```/gm)) examples.set(m[1]!, m[2]!);
  return examples;
}

/** N-Triples as comparable lines `s p o` (literals quoted, datatype left out). */
function triples(text: string): string[] {
  return new n3.Parser({ format: 'N-Triples' }).parse(text)
    .map((q) => `${q.subject.value} ${q.predicate.value} ${q.object.termType === 'Literal' ? JSON.stringify(q.object.value) : q.object.value}`)
    .sort();
}

const label = (s: string, l: string) => `${s} ${RDFS}label ${JSON.stringify(l)}`;
const type = (s: string, c: string) => `${s} ${TYPE} ${c}`;
const hasRole = (a: string, r: string) => `${a} ${IAM}hasRole ${r}`;

const EXPECTED: Record<string, string[]> = {
  'roles-of-agent': [
    type(`${S}#TriageBot`, `${IAM}Agent`), label(`${S}#TriageBot`, 'Triage bot'),
    hasRole(`${S}#TriageBot`, `${S}#Triage`), hasRole(`${S}#TriageBot`, `${S}#Escalation`),
    type(`${S}#HelpBot`, `${IAM}Agent`), label(`${S}#HelpBot`, 'Help bot'),
    hasRole(`${S}#HelpBot`, `${S}#Responder`), hasRole(`${S}#HelpBot`, `${S}#Triage`),
    type(`${B}#InvoiceBot`, `${IAM}Agent`), label(`${B}#InvoiceBot`, 'Invoice bot'),
    hasRole(`${B}#InvoiceBot`, `${B}#Biller`), hasRole(`${B}#InvoiceBot`, `${S}#Supervisor`), hasRole(`${B}#InvoiceBot`, `${A}#Auditor`),
    label(`${S}#Triage`, 'Triage'), label(`${S}#Responder`, 'Responder'), label(`${S}#Escalation`, 'Escalation'),
    label(`${B}#Biller`, 'Biller'), label(`${S}#Supervisor`, 'Supervisor'),
  ],
  'matrix-overview': [
    type(S, `${MTX}Matrix`), label(S, 'Customer support'), `${S} ${RDFS}comment "Roles and agents of the support desk."`,
    `${S} ${OV}roleCount "3"`, `${S} ${OV}agentCount "2"`,
    type(B, `${MTX}Matrix`), label(B, 'Billing'), `${B} ${MTX}imports ${S}`,
    `${B} ${OV}roleCount "2"`, `${B} ${OV}agentCount "1"`,
  ],
  'unassigned-roles': [type(`${B}#Refunds`, `${IAM}Role`), label(`${B}#Refunds`, 'Refunds')],
  'dangling-roles': [hasRole(`${B}#InvoiceBot`, `${A}#Auditor`)],
  undocumented: [
    type(`${S}#Supervisor`, `${IAM}Role`), label(`${S}#Supervisor`, 'Supervisor'),
    type(`${S}#HelpBot`, `${IAM}Agent`), label(`${S}#HelpBot`, 'Help bot'),
    type(`${S}#Escalation`, `${IAM}Role`), label(`${S}#Escalation`, 'Escalation'),
    type(`${B}#Refunds`, `${IAM}Role`), label(`${B}#Refunds`, 'Refunds'),
  ],
  'role-catalog': [
    type(`${S}#Triage`, `${IAM}Role`), label(`${S}#Triage`, 'Triage'), `${S}#Triage ${RDFS}comment "Sorts incoming tickets."`,
    type(`${S}#Responder`, `${IAM}Role`), label(`${S}#Responder`, 'Responder'), `${S}#Responder ${RDFS}comment "Answers customers."`,
    type(`${S}#Supervisor`, `${IAM}Role`), label(`${S}#Supervisor`, 'Supervisor'),
    type(`${S}#Escalation`, `${IAM}Role`), label(`${S}#Escalation`, 'Escalation'),
    type(`${B}#Biller`, `${IAM}Role`), label(`${B}#Biller`, 'Biller'), `${B}#Biller ${RDFS}comment "Sends invoices."`,
    type(`${B}#Refunds`, `${IAM}Role`), label(`${B}#Refunds`, 'Refunds'),
  ],
};

describe('docs/slash-commands.md: the example commands run on real matrix Turtle', () => {
  let t: TestServer;
  let tokens: Awaited<ReturnType<typeof seedWorkspace>>['tokens'];
  const examples = documentedExamples();

  before(async () => {
    t = await startTestServer();
    const seeded = await seedWorkspace(t, 'acme');
    tokens = seeded.tokens;
    await installMatrices(t, tokens.owner, 'acme', 'support', [{ uri: S, turtle: supportMatrixTurtle(S) }]);
    const active = await createExtension(t, tokens.owner, 'acme', S, ACTIVE_EXTENSION, 'Escalation');
    expect(active.active, JSON.stringify(active.command)).to.equal(true);
    // Last on this matrix: every later deployment of it would include (and fail on) this extension.
    const inactive = await createExtension(t, tokens.owner, 'acme', S, INACTIVE_EXTENSION, 'Ghost');
    expect(inactive.command.status).to.equal('failed');
    expect(inactive.active).to.equal(false);
    await installMatrices(t, tokens.owner, 'acme', 'audit', [{ uri: A, turtle: AUDIT }]);
    await installMatrices(t, tokens.owner, 'acme', 'billing', [{ uri: B, turtle: BILLING }]);
    await uninstallPackage(t, tokens.owner, 'acme', 'audit');
  });
  after(async () => { await t.close(); removeDir(t.dataDir); });

  it('documents every expected example', () => {
    expect([...examples.keys()].sort()).to.deep.equal(Object.keys(EXPECTED).sort());
  });

  for (const alias of Object.keys(EXPECTED)) {
    it(`/${alias}`, async () => {
      const script = examples.get(alias);
      expect(script, `example /${alias} in the docs`).to.be.a('string');
      const scriptType = /^\s*(?:PREFIX[^\n]*\n\s*)*DESCRIBE/i.test(script!) ? 'DESCRIBE' : 'CONSTRUCT';
      const created = await t.http.post('/api/v1/commands/acme').set(bearer(tokens.owner)).send({ alias, scriptType, scriptContent: script });
      expect(created.status, JSON.stringify(created.body)).to.equal(200);
      const res = await t.http.post(`/api/v1/commands/acme/alias/${alias}/execute`).set(bearer(tokens.member)).set('Accept', 'application/n-triples');
      expect(res.status, res.text).to.equal(200);
      expect(triples(res.text)).to.deep.equal([...EXPECTED[alias]!].sort());
      expect(res.text).to.not.include('Ghost');
    });
  }
});
