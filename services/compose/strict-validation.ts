/**
 * The admin API's validators: a JSON body is taken as typed, never coerced (`{"name": false}` is not the name
 * "false", `"dry_run": 0` is not false), while the query string, path parameters and headers, which are text on the
 * wire, still have numbers and booleans read from their text (`?limit=10`).
 */
import { Ajv, type Options } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';

/** Fastify's own defaults (@fastify/ajv-compiler), with the app's removeAdditional: false. */
const BASE: Options = { useDefaults: true, removeAdditional: false, addUsedSchema: false, allErrors: false };

function ajv(options: Options): Ajv {
  const instance = new Ajv({ ...BASE, ...options });
  addFormats.default(instance);
  return instance;
}

export function strictBodyValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const body = ajv({ coerceTypes: false });
  const text = ajv({ coerceTypes: 'array' });
  return ({ schema, httpPart }) => (httpPart === 'body' ? body : text).compile(schema as object) as never;
}
