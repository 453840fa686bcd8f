import n3 from 'n3';
import { z } from 'zod';
import { badRequest } from '../errors.js';
import { isValidIri } from '../rdf/sparql.js';
import type { BoundTerm } from '../sandbox/bind.js';

/**
 * Declared parameters of a slash command (docs/slash-commands.md, "Parameters") and the
 * arguments of one execution, turned into RDF terms.
 */

export interface Parameter {
  name: string;
  kind: 'iri' | 'literal';
  /** Literal datatype (absolute IRI); absent for IRIs and for plain (or JSON-typed) literals. */
  datatype?: string;
  required: boolean;
  description?: string;
}

export const MAX_PARAMETERS = 32;
const VARNAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const XSD = 'http://www.w3.org/2001/XMLSchema#';
const MAX_ARGUMENT_CHARS = 10_000;

export const parameterSchema = z.strictObject({
  name: z.string({ error: 'parameters[].name must be a string' }),
  kind: z.enum(['iri', 'literal'], { error: 'parameters[].kind must be "iri" or "literal"' }),
  datatype: z.string({ error: 'parameters[].datatype must be a string (an absolute IRI)' }).optional(),
  required: z.boolean({ error: 'parameters[].required must be true or false' }).default(false),
  description: z.string({ error: 'parameters[].description must be a string' }).max(4_000, 'parameters[].description must be at most 4000 characters').optional(),
}).meta({ id: 'SlashCommandParameter' });

export const parametersSchema = z.array(parameterSchema, { error: 'parameters must be an array' })
  .max(MAX_PARAMETERS, `at most ${MAX_PARAMETERS} parameters`);

/**
 * Checks declared parameters against the script's variables: each name is a
 * SPARQL variable name (without "?") that the script mentions, names are
 * unique, a datatype is an absolute IRI and only on a literal. 400 naming
 * the first problem.
 */
export function checkParameters(parameters: Parameter[], variables: Set<string>): Parameter[] {
  const seen = new Set<string>();
  return parameters.map((p, i) => {
    const where = `parameters[${i}]`;
    if (p.name.startsWith('?') || p.name.startsWith('$')) {
      throw badRequest(`${where}.name is given without "?": use ${JSON.stringify(p.name.slice(1))}, not ${JSON.stringify(p.name)}`);
    }
    if (!VARNAME.test(p.name)) throw badRequest(`${where}.name ${JSON.stringify(p.name)} is not a SPARQL variable name (letters, digits, "_")`);
    if (seen.has(p.name)) throw badRequest(`${where}.name ${JSON.stringify(p.name)} is declared twice`);
    seen.add(p.name);
    if (!variables.has(p.name)) {
      const known = [...variables].sort().map((v) => `?${v}`).join(', ') || 'none';
      throw badRequest(`${where}.name ${JSON.stringify(p.name)} is not a variable of the script (its variables: ${known})`);
    }
    if (p.datatype !== undefined) {
      if (p.kind === 'iri') throw badRequest(`${where}.datatype is only for literal parameters; ${JSON.stringify(p.name)} is an iri`);
      if (!isValidIri(p.datatype)) throw badRequest(`${where}.datatype must be an absolute IRI, not ${JSON.stringify(p.datatype)}`);
    }
    return {
      name: p.name, kind: p.kind, required: p.required,
      ...(p.datatype !== undefined ? { datatype: p.datatype } : {}),
      ...(p.description !== undefined ? { description: p.description } : {}),
    };
  });
}

/** Lexical forms of the common XSD datatypes, so a wrong value is a 400 rather than an ill-typed literal. */
const LEXICAL: Record<string, RegExp> = {
  [`${XSD}integer`]: /^[+-]?\d+$/,
  [`${XSD}int`]: /^[+-]?\d+$/,
  [`${XSD}long`]: /^[+-]?\d+$/,
  [`${XSD}nonNegativeInteger`]: /^\+?\d+$/,
  [`${XSD}positiveInteger`]: /^\+?0*[1-9]\d*$/,
  [`${XSD}decimal`]: /^[+-]?(\d+(\.\d*)?|\.\d+)$/,
  [`${XSD}double`]: /^([+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|[+-]?INF|NaN)$/,
  [`${XSD}float`]: /^([+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|[+-]?INF|NaN)$/,
  [`${XSD}boolean`]: /^(true|false|1|0)$/,
  [`${XSD}date`]: /^-?\d{4,}-\d{2}-\d{2}(Z|[+-]\d{2}:\d{2})?$/,
  [`${XSD}dateTime`]: /^-?\d{4,}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?$/,
};

const describeValue = (value: unknown): string =>
  value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value === 'object' ? 'an object' : `a ${typeof value}`;

function literalTerm(p: Parameter, value: unknown): BoundTerm {
  const where = `arguments.${p.name}`;
  let lexical: string;
  let datatype = p.datatype;
  if (typeof value === 'string') lexical = value;
  else if (typeof value === 'number' && Number.isFinite(value)) {
    lexical = String(value);
    datatype ??= Number.isInteger(value) ? `${XSD}integer` : `${XSD}double`;
  } else if (typeof value === 'boolean') {
    lexical = String(value);
    datatype ??= `${XSD}boolean`;
  } else {
    throw badRequest(`${where} must be a literal value (a string, number or boolean), not ${describeValue(value)}`);
  }
  if (lexical.length > MAX_ARGUMENT_CHARS) throw badRequest(`${where} is longer than ${MAX_ARGUMENT_CHARS} characters`);
  const pattern = datatype ? LEXICAL[datatype] : undefined;
  if (pattern && !pattern.test(lexical)) {
    throw badRequest(`${where} ${JSON.stringify(lexical)} is not a valid <${datatype}> value`);
  }
  return datatype && datatype !== `${XSD}string`
    ? n3.DataFactory.literal(lexical, n3.DataFactory.namedNode(datatype))
    : n3.DataFactory.literal(lexical);
}

/**
 * The RDF terms of one execution's arguments: 400 for an argument the
 * command does not declare, a missing required one, or a value of the wrong
 * kind (an IRI that is not an absolute IRI, a literal that is not a string,
 * number or boolean, or does not fit its datatype).
 */
export function argumentTerms(parameters: Parameter[], args: Record<string, unknown>, alias: string): Record<string, BoundTerm> {
  const declared = new Map(parameters.map((p) => [p.name, p]));
  for (const name of Object.keys(args)) {
    if (!declared.has(name)) {
      const names = parameters.map((p) => p.name).join(', ') || 'none';
      throw badRequest(`Slash command "${alias}" has no parameter ${JSON.stringify(name)} (its parameters: ${names})`);
    }
  }
  const terms: Record<string, BoundTerm> = {};
  for (const p of parameters) {
    const value = args[p.name];
    if (value === undefined || value === null) {
      if (p.required) throw badRequest(`arguments.${p.name} is required by slash command "${alias}"`);
      continue;
    }
    if (p.kind === 'iri') {
      if (typeof value !== 'string') throw badRequest(`arguments.${p.name} must be an IRI given as a string, not ${describeValue(value)}`);
      if (!isValidIri(value) || value.length > MAX_ARGUMENT_CHARS) {
        throw badRequest(`arguments.${p.name} must be an absolute IRI (scheme:..., no spaces, <, >, " or braces), not ${JSON.stringify(value.slice(0, 200))}`);
      }
      terms[p.name] = n3.DataFactory.namedNode(value);
    } else {
      terms[p.name] = literalTerm(p, value);
    }
  }
  return terms;
}

/** JSON Schema of the arguments object (MCP tools' input schema). */
export function argumentsJsonSchema(parameters: Parameter[]): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (const p of parameters) {
    const schema: Record<string, unknown> = p.kind === 'iri'
      ? { type: 'string', format: 'iri' }
      : { type: ['string', 'number', 'boolean'] };
    const what = p.kind === 'iri' ? 'An absolute IRI' : p.datatype ? `A literal of datatype <${p.datatype}>` : 'A literal';
    schema.description = p.description ? `${p.description} (${what})` : what;
    properties[p.name] = schema;
  }
  const required = parameters.filter((p) => p.required).map((p) => p.name);
  return { type: 'object', properties, ...(required.length ? { required } : {}), additionalProperties: false };
}
