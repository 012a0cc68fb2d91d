/**
 * The console's form posts are urlencoded (@fastify/formbody), so the root JSON parser's checks
 * (services/gateway/validation/json-body.ts) never see them. The same two rules apply to every field name and value
 * before a route runs: no U+0000 (Postgres text cannot hold it: the insert fails, a 500) and no lone surrogates (not
 * Unicode). NOTE: the urlencoded parser decodes only valid UTF-8 escapes, so a lone surrogate cannot arrive that way
 * today; the check stays so that a parser change cannot let one through.
 */

/** A form the console refuses: rendered as 400 with the message by the console's error handler. */
export class UnstorableFormValueError extends Error {
  readonly statusCode = 400;
}

const NOTHING_CHANGED = 'Nothing was changed: go back, remove it and send the form again.';

function problemOf(text: string): string | undefined {
  if (text.includes('\u0000')) return 'holds U+0000 (a null character): text cannot contain U+0000';
  if (!text.isWellFormed()) return 'holds a lone surrogate: text must be valid Unicode';
  return undefined;
}

/** Why a parsed form body cannot be accepted, or undefined. Values are strings, or arrays of them for repeated fields. */
export function unstorableFormValue(body: unknown): string | undefined {
  if (body === null || typeof body !== 'object') return undefined;
  for (const [field, value] of Object.entries(body)) {
    const nameProblem = problemOf(field);
    if (nameProblem) return `A field name ${nameProblem}. ${NOTHING_CHANGED}`;
    for (const one of Array.isArray(value) ? value : [value]) {
      if (typeof one !== 'string') continue;
      const problem = problemOf(one);
      if (problem) return `The field "${field}" ${problem}. ${NOTHING_CHANGED}`;
    }
  }
  return undefined;
}
