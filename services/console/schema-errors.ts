/**
 * Schema errors of the admin API and the console in words a person can act on: the field's path and, for an enum,
 * the allowed values (Fastify's default says only "must be equal to one of the allowed values").
 */
import type { FastifySchemaValidationError } from 'fastify/types/schema.js';
import type { ErrorObject } from 'ajv';
import { describeError } from '../gateway/validation/validate.js';

export function describeSchemaErrors(errors: FastifySchemaValidationError[], dataVar: string): Error {
  const first = errors[0];
  if (!first) return new Error(`${dataVar} is invalid`);
  const { path, message } = describeError(first as unknown as ErrorObject);
  // describeError names the root "body"; say "querystring"/"params" where that is what failed.
  const text = dataVar !== 'body' && path === 'body' ? message.replace(/^body/, dataVar) : dataVar !== 'body' ? `${dataVar}.${message}` : message;
  return new Error(text);
}
