/**
 * Compiled validators and the one translation of a schema error into a sentence naming the exact field path and
 * index, e.g. `[3].event_metadata.consent.ad_storage must be one of GRANTED, DENIED, UNSPECIFIED`.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { SHA256_PATTERN, eventsSchemaV20261101, sgtmSchema } from './schemas.js';

// allErrors off: the first error is enough to name, and validation stops early on hostile bodies.
const ajv = new Ajv({ allErrors: false, strict: false });

export const CURRENT_API_VERSION = '2026-11-01';

/** Supported API-Version dates → request schema of endpoint A. Newest first. */
export const API_VERSIONS: ReadonlyMap<string, ValidateFunction> = new Map([
  [CURRENT_API_VERSION, ajv.compile(eventsSchemaV20261101)],
]);

export const validateSgtm: ValidateFunction = ajv.compile(sgtmSchema);

export interface SchemaViolation {
  /** `[3].event_metadata.consent.ad_storage` */
  readonly path: string;
  readonly message: string;
  /** A hashed field held something that is not a SHA-256 digest (plain personal data, most likely). */
  readonly unhashed: boolean;
}

/** JSON pointer `/3/event_metadata/x` → `[3].event_metadata.x`. */
export function toFieldPath(instancePath: string, extra?: string): string {
  const parts = instancePath.split('/').slice(1);
  if (extra !== undefined) parts.push(extra);
  let out = '';
  for (const raw of parts) {
    const p = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (/^\d+$/.test(p)) out += `[${p}]`;
    else out += out === '' ? p : `.${p}`;
  }
  return out === '' ? 'body' : out;
}

const TYPE_NAMES: Record<string, string> = {
  object: 'an object',
  array: 'an array',
  string: 'a string',
  boolean: 'a boolean (true or false)',
  integer: 'an integer',
  number: 'a number',
};

export function describeError(err: ErrorObject): SchemaViolation {
  const p = err.params as Record<string, unknown>;
  switch (err.keyword) {
    case 'required': {
      const path = toFieldPath(err.instancePath, String(p.missingProperty));
      return { path, message: `${path} is required`, unhashed: false };
    }
    case 'type': {
      const path = toFieldPath(err.instancePath);
      const want = String(p.type);
      return { path, message: `${path} must be ${TYPE_NAMES[want] ?? want}`, unhashed: false };
    }
    case 'enum': {
      const path = toFieldPath(err.instancePath);
      return { path, message: `${path} must be one of ${(p.allowedValues as unknown[]).join(', ')}`, unhashed: false };
    }
    case 'const': {
      const path = toFieldPath(err.instancePath);
      return { path, message: `${path} must be ${String(p.allowedValue)}`, unhashed: false };
    }
    case 'pattern': {
      const path = toFieldPath(err.instancePath);
      if (p.pattern === SHA256_PATTERN) {
        return {
          path,
          message: `${path} must be a SHA-256 hex digest (64 hexadecimal characters): hash personal data before sending`,
          unhashed: true,
        };
      }
      return { path, message: `${path} must match ${String(p.pattern)}`, unhashed: false };
    }
    case 'minLength': {
      const path = toFieldPath(err.instancePath);
      return { path, message: `${path} must not be empty`, unhashed: false };
    }
    case 'maxLength': {
      const path = toFieldPath(err.instancePath);
      return { path, message: `${path} must be at most ${String(p.limit)} characters`, unhashed: false };
    }
    case 'minItems': {
      const path = toFieldPath(err.instancePath);
      return { path, message: `${path} must hold at least ${String(p.limit)} event${p.limit === 1 ? '' : 's'}`, unhashed: false };
    }
    case 'maxItems': {
      const path = toFieldPath(err.instancePath);
      return { path, message: `${path} must hold at most ${String(p.limit)} items`, unhashed: false };
    }
    default: {
      const path = toFieldPath(err.instancePath);
      return { path, message: `${path} ${err.message ?? 'is invalid'}`, unhashed: false };
    }
  }
}

/** The first violation, or undefined when the body is valid. */
export function firstViolation(validate: ValidateFunction, body: unknown): SchemaViolation | undefined {
  if (validate(body)) return undefined;
  const errors = validate.errors ?? [];
  // if/then failures report the inner error first and a generic `if` error after it: name the inner one.
  const useful = errors.find((e) => e.keyword !== 'if' && e.keyword !== 'allOf') ?? errors[0];
  return useful ? describeError(useful) : { path: 'body', message: 'body is invalid', unhashed: false };
}
