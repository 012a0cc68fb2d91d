/**
 * Error types of the ingestion API. Endpoint A answers RFC 9457 problem documents whose `type` resolves to a page
 * served at /problems/{slug}; endpoint B answers `{error, message}` with the spec's texts. One table serves both.
 */
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
  apiVersion: {
    slug: 'unsupported-api-version',
    status: 400,
    title: 'API-Version is not supported',
    sgtmError: 'Invalid request format',
    description:
      'The `API-Version` header must be a date `YYYY-MM-DD` naming one of the supported request schema versions, listed in `detail`. Omit the header to use the current version.',
  },
  unhashedPii: {
    slug: 'unhashed-personal-data',
    status: 400,
    title: 'Personal data must be hashed',
    sgtmError: 'Invalid request format',
    description:
      'A field that carries personal data (email, phone) must hold its SHA-256 digest as 64 hexadecimal characters. Normalise first (email: lowercase and trim; phone: E.164 with and without the plus sign), then hash. The service never stores or forwards plain personal data, so the request was refused whole.',
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
export class IngestError extends Error {
  constructor(
    readonly problem: ProblemKey,
    readonly detail: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(detail);
    this.name = 'IngestError';
  }
  get statusCode(): number {
    return PROBLEMS[this.problem].status;
  }
}
