/**
 * The one JSON body parser of the HTTP surface (ingestion and admin API). A body is accepted only when the store
 * and the platform can hold every value of it, decided here, before anything is stored:
 * - `Content-Encoding` other than `identity`: 415. NOTE: gzip is refused, not decoded (docs/decisions.md):
 *   batches are at most 1 MiB, senders (the sGTM template, the node kit) do not compress, and not inflating keeps
 *   the body limit a limit on work (no decompression bombs);
 * - a `charset` other than UTF-8 (RFC 8259 §8.1: JSON exchanged between systems is UTF-8): 415;
 * - bytes that are not UTF-8 (invalid or overlong sequences, encoded surrogates): 400 `malformed-json`;
 * - not JSON, or `__proto__` / `constructor.prototype` keys (prototype poisoning): 400 `malformed-json`;
 * - I-JSON (RFC 7493) on top of JSON: strings without U+0000 (Postgres text and jsonb cannot hold it) and without
 *   lone surrogates (not Unicode: no UTF-8 encoding), numbers within the double range (`1e400` would become
 *   Infinity, then null) and at most MAX_NUMBER_CHARS characters long, nesting at most MAX_DEPTH deep: 400
 *   `unsupported-json-value`, naming where.
 * The checks after JSON.parse are one iterative pass over the text (no recursion, so no depth can overflow the
 * stack), cheap next to the parse itself.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import secureJson from 'secure-json-parse';
import { IngestError } from '../problems.js';
import { LIMITS } from './limits.js';

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** Parses a JSON request body under the rules above; throws IngestError (rendered in the route's format). */
export function parseJsonBody(body: Buffer, contentType: string | undefined, contentEncoding: string | string[] | undefined): unknown {
  checkEncoding(contentEncoding);
  checkCharset(contentType);
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    throw new IngestError('malformedJson', 'the body is not valid UTF-8: send JSON encoded as UTF-8');
  }
  let value: unknown;
  try {
    value = secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch (err) {
    throw new IngestError('malformedJson', `the body is not valid JSON: ${(err as Error).message}`);
  }
  const problem = unstorable(text);
  if (problem) throw new IngestError('unsupportedJsonValue', problem);
  return value;
}

function checkEncoding(header: string | string[] | undefined): void {
  if (header === undefined) return;
  const codings = (Array.isArray(header) ? header.join(',') : header)
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  if (codings.length > 0) {
    throw new IngestError(
      'mediaType',
      `Content-Encoding ${codings.join(', ').slice(0, 60)} is not supported: send the body uncompressed (no Content-Encoding)`,
    );
  }
}

function checkCharset(contentType: string | undefined): void {
  if (contentType === undefined) return;
  const m = /;\s*charset\s*=\s*"?([^";\s]*)"?/i.exec(contentType);
  if (!m) return;
  const charset = m[1]!.toLowerCase();
  if (charset !== 'utf-8' && charset !== 'utf8') {
    throw new IngestError('mediaType', `charset ${m[1]!.slice(0, 40)} is not supported: JSON must be sent as UTF-8 (charset=utf-8 or none)`);
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

const isHigh = (u: number): boolean => u >= 0xd800 && u <= 0xdbff;
const isLow = (u: number): boolean => u >= 0xdc00 && u <= 0xdfff;

/** The code unit of a `\uXXXX` escape starting at text[i] (the backslash), or -1 when there is none. */
function escapedUnit(text: string, i: number): number {
  if (text.charCodeAt(i) !== BACKSLASH || text.charCodeAt(i + 1) !== 0x75) return -1;
  return Number.parseInt(text.slice(i + 2, i + 6), 16);
}

function where(text: string, i: number): string {
  let line = 1;
  let col = 1;
  for (let k = 0; k < i; k++) {
    if (text.charCodeAt(k) === 0x0a) {
      line++;
      col = 1;
    } else col++;
  }
  return `at line ${line}, column ${col} (character ${i})`;
}

/**
 * Why valid JSON text cannot be accepted, or undefined. One pass, no recursion: depth is a counter. Raw control
 * characters and raw lone surrogates cannot occur here (JSON.parse refuses the former, the UTF-8 decoder the
 * latter), so only escapes need a look.
 */
export function unstorable(text: string): string | undefined {
  const n = text.length;
  let depth = 0;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      // A string: walk to its closing quote, checking escapes.
      for (i++; i < n; i++) {
        const s = text.charCodeAt(i);
        if (s === QUOTE) break;
        if (s !== BACKSLASH) continue;
        const unit = escapedUnit(text, i);
        if (unit < 0) {
          i++; // a two-character escape such as \" or \n
          continue;
        }
        if (unit === 0) return `a string holds \\u0000 ${where(text, i)}: strings cannot contain U+0000`;
        if (isHigh(unit)) {
          const next = escapedUnit(text, i + 6);
          if (!isLow(next)) return `a string holds a lone surrogate \\u${text.slice(i + 2, i + 6)} ${where(text, i)}: strings must be valid Unicode`;
          i += 11;
          continue;
        }
        if (isLow(unit)) return `a string holds a lone surrogate \\u${text.slice(i + 2, i + 6)} ${where(text, i)}: strings must be valid Unicode`;
        i += 5;
      }
      continue;
    }
    if (c === 0x5b || c === 0x7b) {
      if (++depth > LIMITS.maxJsonDepth) {
        return `the body nests arrays and objects more than ${LIMITS.maxJsonDepth} levels deep ${where(text, i)}`;
      }
      continue;
    }
    if (c === 0x5d || c === 0x7d) {
      depth--;
      continue;
    }
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      let end = i + 1;
      for (; end < n; end++) {
        const d = text.charCodeAt(end);
        if (!((d >= 0x30 && d <= 0x39) || d === 0x2e || d === 0x65 || d === 0x45 || d === 0x2b || d === 0x2d)) break;
      }
      const length = end - i;
      if (length > LIMITS.maxNumberChars) {
        return `a number of ${length} characters ${where(text, i)}: numbers may have at most ${LIMITS.maxNumberChars} characters`;
      }
      if (length > 15 || text.slice(i, end).search(/[eE]/) >= 0) {
        if (!Number.isFinite(Number(text.slice(i, end)))) {
          return `the number ${text.slice(i, end)} ${where(text, i)} is out of range: numbers must fit a 64-bit float (at most about 1.8e308)`;
        }
      }
      i = end - 1;
    }
  }
  return undefined;
}

/**
 * Replaces the JSON parser of a scope (the root: ingestion and admin API alike) with parseJsonBody. The body limit
 * stays Fastify's (checked while the body streams in).
 */
export function registerJsonBodyParser(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request: FastifyRequest, body, done) => {
    try {
      done(null, parseJsonBody(body as Buffer, request.headers['content-type'], request.headers['content-encoding']));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}
