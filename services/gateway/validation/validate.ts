/**
 * Compiled validators and the one translation of a schema error into a sentence naming the exact field path and
 * index, e.g. `[3].event_metadata.consent.ad_storage must be one of GRANTED, DENIED, UNSPECIFIED`.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { SHA256_PATTERN, eventsSchemaV20261101, eventsSchemaV20261201, sgtmSchema, sgtmSchemaV20261201 } from './schemas.js';

// allErrors off: the first error is enough to name, and validation stops early on hostile bodies.
const ajv = new Ajv({ allErrors: false, strict: false });

/** The version applied when a request has no `API-Version` header: requests without it behave as they always did. */
export const CURRENT_API_VERSION = '2026-11-01';
/** The newest version: adds an optional event time to both endpoints. */
export const LATEST_API_VERSION = '2026-12-01';

export interface ApiVersion {
  readonly date: string;
  /** Request schema of endpoint A and of endpoint B under this version. */
  readonly events: ValidateFunction;
  readonly sgtm: ValidateFunction;
  /**
   * 2026-12-01 and later: events may carry their own time (A: `event_time`; B: `event_metadata.event_time`) and B
   * knows the `phone` alias type.
   */
  readonly eventTime: boolean;
}

/** Supported API-Version dates, newest first. */
export const API_VERSIONS: ReadonlyMap<string, ApiVersion> = new Map([
  [
    LATEST_API_VERSION,
    { date: LATEST_API_VERSION, events: ajv.compile(eventsSchemaV20261201), sgtm: ajv.compile(sgtmSchemaV20261201), eventTime: true },
  ],
  [
    CURRENT_API_VERSION,
    { date: CURRENT_API_VERSION, events: ajv.compile(eventsSchemaV20261101), sgtm: ajv.compile(sgtmSchema), eventTime: false },
  ],
]);

/** Whether this API-Version has the 2026-12-01 additions (event time; B's phone alias). */
export const isV20261201OrLater = (apiVersion: string | null): boolean =>
  apiVersion !== null && API_VERSIONS.get(apiVersion)?.eventTime === true;

export const validateSgtm: ValidateFunction = API_VERSIONS.get(CURRENT_API_VERSION)!.sgtm;

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
      const want = Array.isArray(p.type) ? (p.type as string[]) : String(p.type).split(',');
      const names = want.map((t) => TYPE_NAMES[t] ?? t).join(' or ');
      return { path, message: `${path} must be ${names}`, unhashed: false };
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
      const message = Number(p.limit) <= 1 ? `${path} must not be empty` : `${path} must be at least ${String(p.limit)} characters`;
      return { path, message, unhashed: false };
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
