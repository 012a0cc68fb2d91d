/**
 * Error types of the ingestion API. Endpoint A answers RFC 9457 problem documents whose `type` resolves to a page
 * served at /problems/{slug}; endpoint B answers `{error, message}` with the spec's texts. One table serves both.
 */
import { ServiceError } from '../shared/errors.js';
export interface ProblemType {
  readonly slug: string;
  readonly status: number;
  readonly title: string;
  /** Endpoint B's `error` text. */
  readonly sgtmError: string;
  /** What the page at /problems/{slug} says: the cause and what to do. */
  readonly description: string;
}

const table = {
  validation: {
    slug: 'validation-error',
    status: 400,
    title: 'Request body is invalid',
    sgtmError: 'Invalid request format',
    description:
      'The body did not match the request schema. `detail` names the first failing field as a path from the top of the array, e.g. `[3].event_metadata.consent.ad_storage`. Fix that field and resend the whole batch: nothing of a rejected request was accepted.',
  },
  malformedJson: {
    slug: 'malformed-json',
    status: 400,
    title: 'Body is not valid JSON',
    sgtmError: 'Invalid request format',
    description: 'The body could not be parsed as JSON. Send a JSON array with `Content-Type: application/json`.',
  },
  unsupportedJsonValue: {
    slug: 'unsupported-json-value',
    status: 400,
    title: 'Body holds a value the service cannot accept',
    sgtmError: 'Invalid request format',
    description:
      'The body is JSON but holds something the service cannot store or forward, named in `detail` with its line and column: a string with `\\u0000` or a lone surrogate (strings must be valid Unicode without U+0000), a number out of the 64-bit float range (e.g. `1e400`) or longer than 100 characters, or arrays and objects nested more than 32 levels deep. The rules are I-JSON (RFC 7493). Nothing of the request was accepted.',
  },
  apiVersion: {
    slug: 'unsupported-api-version',
    status: 400,
    title: 'API-Version is not supported',
    sgtmError: 'Invalid request format',
    description:
      'The `API-Version` header must be a date `YYYY-MM-DD` naming one of the supported request schema versions, listed in `detail`. Omit the header to use the current version.',
  },
  eventTime: {
    slug: 'invalid-event-time',
    status: 400,
    title: 'Event time is invalid or out of range',
    sgtmError: 'Invalid request format',
    description:
      'With `API-Version: 2026-12-01` an event may carry its own time (endpoint A: `event_time` on the event; endpoint B: `event_metadata.event_time`): an RFC 3339 date-time with its offset (`2026-11-21T18:04:05Z`, `2026-11-21T19:04:05+01:00`) or an integer of Unix seconds. It must be at most 7 days before the request and at most 5 minutes after it. `detail` names the event and the bound it broke. Nothing of the request was accepted: fix or drop that event and resend.',
  },
  unhashedPii: {
    slug: 'unhashed-personal-data',
    status: 400,
    title: 'Personal data must be hashed',
    sgtmError: 'Invalid request format',
    description:
      'A field that carries personal data (email, phone) must hold its SHA-256 digest as 64 hexadecimal characters. Normalise first (email: lowercase and trim; phone: E.164 with and without the plus sign), then hash; the SDK (`clients/node`: `hashEmail`, `hashPhone`) and the server-side tag template do it for you, and docs/identifiers.md has the rules with test vectors. The service never stores or forwards plain personal data, so the request was refused whole.',
  },
  mediaType: {
    slug: 'unsupported-media-type',
    status: 415,
    title: 'Content-Type must be application/json',
    sgtmError: 'Unsupported Media Type',
    description: 'Send the body as JSON with the header `Content-Type: application/json`.',
  },
  tooLarge: {
    slug: 'payload-too-large',
    status: 413,
    title: 'Request is too large',
    sgtmError: 'Payload Too Large',
    description:
      'The body, the number of events or one event exceeds the limits in `detail` (see the README, "Limits"). Split the batch and resend.',
  },
  unauthorized: {
    slug: 'unauthorized',
    status: 401,
    title: 'Authentication failed',
    sgtmError: 'Unauthorized',
    description:
      'Send `Authorization: Bearer <API key>` with a key created in the workspace settings (API Key). Revoked keys stop working within seconds.',
  },
  rateLimited: {
    slug: 'rate-limited',
    status: 429,
    title: 'Rate limit exceeded',
    sgtmError: 'Rate limit exceeded',
    description:
      "The workspace's plan allows a number of requests per second with a burst; wait for the seconds in `Retry-After` and try again. The `RateLimit-*` headers show the limit and what remains.",
  },
  uriTooLong: {
    slug: 'uri-too-long',
    status: 414,
    title: 'Request URL is too long',
    sgtmError: 'URI Too Long',
    description: 'The URL (path and query) exceeds 8 KiB, or one path segment exceeds 100 characters. Send data in the body, not the URL.',
  },
  headersTooLarge: {
    slug: 'request-headers-too-large',
    status: 431,
    title: 'Request headers are too large',
    sgtmError: 'Request Header Fields Too Large',
    description: 'The request line and headers together exceed 16 KiB. Send fewer or shorter headers (cookies are a common cause).',
  },
  duplicateAuthorization: {
    slug: 'duplicate-authorization',
    status: 400,
    title: 'More than one Authorization header',
    sgtmError: 'Invalid request format',
    description:
      'The request carried the `Authorization` header more than once. Which one counts would depend on the server or proxy that reads it, so none does: send exactly one `Authorization: Bearer …`.',
  },
  badRequest: {
    slug: 'bad-request',
    status: 400,
    title: 'The request is not valid HTTP',
    sgtmError: 'Bad Request',
    description: 'The request could not be read as HTTP/1.1 (e.g. a malformed request line or header). The connection was closed.',
  },
  timeout: {
    slug: 'request-timeout',
    status: 408,
    title: 'Request was not received in time',
    sgtmError: 'Request Timeout',
    description:
      'The whole request must arrive and be answered within 1.5 s of its first byte. Nothing of this request was accepted; resend it (idempotency keys make a resend safe).',
  },
  unavailable: {
    slug: 'service-unavailable',
    status: 503,
    title: 'Events could not be stored in time',
    sgtmError: 'Service Unavailable',
    description:
      'The service could not make the events durable within its 1.5 s deadline. Nothing of this request was accepted; retry after `Retry-After` seconds with the same idempotency keys.',
  },
  overloaded: {
    slug: 'overloaded',
    status: 503,
    title: 'Service is overloaded',
    sgtmError: 'Service Unavailable',
    description:
      'This instance is at its limit (requests in progress, or event-loop delay) and answered at once rather than late. Nothing of the request was accepted; retry after `Retry-After` seconds with the same idempotency keys, ideally with backoff and jitter.',
  },
  internal: {
    slug: 'internal-error',
    status: 500,
    title: 'Internal server error',
    sgtmError: 'Internal Server Error',
    description: 'An unexpected error. Nothing of this request was accepted; retry later. The request id in `instance` helps support find it.',
  },
  notFound: {
    slug: 'not-found',
    status: 404,
    title: 'Not found',
    sgtmError: 'Not Found',
    description: 'No such route or resource.',
  },
  methodNotAllowed: {
    slug: 'method-not-allowed',
    status: 405,
    title: 'Method not allowed',
    sgtmError: 'Method Not Allowed',
    description: 'The route exists, but not with this method. The `Allow` header lists the methods it takes.',
  },
  conflict: {
    slug: 'conflict',
    status: 409,
    title: 'Conflicts with what exists',
    sgtmError: 'Conflict',
    description: 'The request contradicts a resource that already exists (e.g. a console user with that email). `detail` says which; change the request or the resource first.',
  },
  forbidden: {
    slug: 'forbidden',
    status: 403,
    title: 'Not allowed',
    sgtmError: 'Forbidden',
    description: 'You are signed in, but your role or the form does not allow this (e.g. a member changing owner-only settings, or a form sent without its CSRF token). Reload the page and try again, or ask an owner of the workspace.',
  },
  unprocessable: {
    slug: 'unprocessable',
    status: 422,
    title: 'Well-formed, but cannot be done',
    sgtmError: 'Unprocessable',
    description:
      'Every field is valid on its own, but together they ask for something that cannot be done (e.g. a range whose `to` is not after its `from`). `detail` says what; change the request.',
  },
  outOfRetention: {
    slug: 'out-of-retention',
    status: 422,
    title: 'Range reaches past what the log still holds',
    sgtmError: 'Unprocessable',
    description:
      'A replay or an export asked for events older than the raw log keeps (RAW_LOG_RETENTION_DAYS). `detail` names the oldest time still held: ask again from that time or later.',
  },
} as const satisfies Record<string, ProblemType>;

export type ProblemKey = keyof typeof table;
export const PROBLEMS: Readonly<Record<ProblemKey, ProblemType>> = table;
export const problemBySlug = new Map<string, ProblemType>(Object.values(table).map((p) => [p.slug, p]));

export interface ProblemDocument {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  readonly instance: string;
}

export function problemDocument(baseUrl: string, key: ProblemKey, detail: string, requestId: string): ProblemDocument {
  const p = PROBLEMS[key];
  return { type: `${baseUrl}/problems/${p.slug}`, title: p.title, status: p.status, detail, instance: `urn:uuid:${requestId}` };
}

/** Thrown inside the ingestion routes; the error handler renders it in the endpoint's format. */
export class IngestError extends ServiceError {
  constructor(
    readonly problem: ProblemKey,
    readonly detail: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    // The client may send the same request again after a 429 or a 503; anything else it must change first.
    super(detail, { retryable: PROBLEMS[problem].status === 429 || PROBLEMS[problem].status === 503 });
  }
  get statusCode(): number {
    return PROBLEMS[this.problem].status;
  }
}
