/**
 * Response and header schemas of the ingestion endpoints, for the OpenAPI document (@fastify/swagger builds it
 * from the routes, so routes and document cannot drift apart). Request bodies are documented with the very
 * schemas the handlers validate against (validation/schemas.ts).
 */
import { eventsSchemaV20261201, sgtmSchemaV20261201 } from './validation/schemas.js';
import { LIMITS } from './validation/limits.js';
import { API_VERSIONS } from './validation/validate.js';

const stripId = <T extends { $id?: string }>(s: T): Omit<T, '$id'> => {
  const { $id: _id, ...rest } = s;
  return rest;
};

/**
 * The document's copy of a body schema with `event_time` as what validation/event-time.ts takes: an RFC 3339
 * date-time or an integer of Unix seconds (the validator's schema leaves the format to that module, to answer
 * `invalid-event-time`). Its bounds are relative to the request's time, which no schema can say.
 */
function withEventTimeFormat<T>(schema: T): T {
  const copy = structuredClone(schema);
  const visit = (node: unknown): void => {
    if (node === null || typeof node !== 'object') return;
    const props = (node as { properties?: Record<string, unknown> }).properties;
    if (props?.event_time && typeof props.event_time === 'object') {
      const { type: _type, ...rest } = props.event_time as Record<string, unknown>;
      props.event_time = { ...rest, oneOf: [{ type: 'string', format: 'date-time' }, { type: 'integer' }] };
    }
    for (const value of Object.values(node)) visit(value);
  };
  visit(copy);
  return copy;
}

export const problemSchema = {
  type: 'object',
  description: 'RFC 9457 problem document (application/problem+json); `type` resolves to a page describing the error.',
  required: ['type', 'title', 'status', 'detail', 'instance'],
  properties: {
    type: { type: 'string', format: 'uri' },
    title: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string' },
    instance: { type: 'string', format: 'uri-reference' },
  },
} as const;

export const sgtmErrorSchema = {
  type: 'object',
  required: ['error', 'message'],
  properties: { error: { type: 'string' }, message: { type: 'string' } },
} as const;

/** What each error status means wherever it is answered (the problem's `type` and `detail` say more). */
const ERROR_MEANINGS: Readonly<Record<number, string>> = {
  400: 'The request breaks the schema, or is not valid (`detail` names the field).',
  401: 'Missing, malformed or unknown credentials.',
  404: 'No such resource (e.g. an unknown workspace).',
  405: 'The route does not take this method; `Allow` lists those it takes.',
  408: 'The request did not arrive within the deadline.',
  409: 'Conflicts with what exists.',
  413: 'The body is too large.',
  414: 'The URL is too long.',
  415: 'The body is not JSON (Content-Type must be application/json).',
  422: 'Well-formed, but refused for what it asks (`detail` says why).',
  429: 'Rate limit exceeded; `Retry-After` says when to retry.',
  500: 'An unexpected error; nothing was changed.',
  503: 'Unavailable for now (shutting down, overloaded, or the store is too slow); retry after `Retry-After`.',
};

/** Error answers as documented: RFC 9457 problem documents, served as application/problem+json. */
export const problemResponse = (status: number) => ({
  description: ERROR_MEANINGS[status] ?? 'An error.',
  content: { 'application/problem+json': { schema: problemSchema } },
});
export const problems = (...codes: number[]) => Object.fromEntries(codes.map((c) => [c, problemResponse(c)]));

/** A page for people (the error-type pages, the OAuth browser steps). */
export const htmlResponse = (description: string) => ({ description, content: { 'text/html': { schema: { type: 'string' } } } });

/** A success answer with no body. */
export const noContent = (description: string) => ({ description, type: 'null' }) as const;

interface ParamsSchema {
  type: 'object';
  required?: string[];
  properties: Record<string, unknown>;
}
/**
 * An id in the path: the service's ids are made of URL-safe characters, and the router refuses a segment over 100
 * characters as sent (percent-encoded) with a 414, so ids are 1 to 100 of the characters that are never encoded.
 */
export const PATH_SEGMENT = { type: 'string', minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9._~-]+$' } as const;

/**
 * The error statuses every route of the admin API and the public pages can answer, from what the route is: any can
 * be 400 (a bad URL, two Authorization headers), 414, 500 or 503 (the service is closing); a route with credentials
 * 401; with path parameters 404; with a JSON body 413 and 415. Statuses a route declares itself are kept.
 */
export function documentErrors(route: { method: string | string[]; url: string; schema?: Record<string, unknown>; config?: unknown }): void {
  if ((route.config as { variant?: string } | undefined)?.variant === 'sgtm') return;
  const schema = (route.schema ??= {}) as { hide?: boolean; body?: unknown; params?: ParamsSchema; response?: Record<string, unknown> };
  if (schema.hide) return;
  // Path parameters the route leaves open are what the router takes: 1 to 100 characters (longer is a 414).
  const names = route.url.split('/').filter((s) => s.startsWith(':')).map((s) => s.slice(1));
  if (names.length > 0) {
    const params: ParamsSchema = { type: 'object', ...schema.params, required: names, properties: { ...schema.params?.properties } };
    for (const name of names) params.properties[name] ??= PATH_SEGMENT;
    schema.params = params;
  }
  const methods = Array.isArray(route.method) ? route.method : [route.method];
  if (methods.includes('HEAD') && methods.length === 1) return;
  const codes = [400, 414, 500, 503];
  if (route.url.startsWith('/admin/') || route.url.startsWith('/v1/')) codes.push(401);
  if (route.url.includes('/:')) codes.push(404);
  if (schema.body !== undefined) codes.push(413, 415);
  const response = { ...(schema.response ?? {}) };
  for (const code of codes) if (response[code] === undefined && response[String(code)] === undefined) response[code] = problemResponse(code);
  schema.response = response;
}

export const eventsRouteSchema = {
  summary: 'Send a batch of web and server events (variant A)',
  tags: ['ingestion'],
  security: [{ apiKey: [] }],
  headers: {
    type: 'object',
    properties: {
      'api-version': {
        type: 'string',
        pattern: '^\\d{4}-\\d{2}-\\d{2}$',
        enum: [...API_VERSIONS.keys()],
        description:
          'Request schema version, echoed in the answer. 2026-11-01 (the default when absent): the spec as written. 2026-12-01: adds an optional `event_time` on each event. The body below is the newest version.',
      },
    },
  },
  body: withEventTimeFormat(stripId(eventsSchemaV20261201)),
  response: {
    202: {
      description: 'Accepted and durable.',
      type: 'object',
      required: ['status', 'accepted', 'request_id'],
      properties: { status: { type: 'string', enum: ['accepted'] }, accepted: { type: 'integer' }, request_id: { type: 'string' } },
    },
    ...problems(400, 401, 408, 413, 414, 415, 429, 500, 503),
  },
} as const;

export const sgtmRouteSchema = {
  summary: 'Send a batch of server-side tag events (variant B)',
  tags: ['ingestion'],
  security: [{ apiKey: [] }],
  headers: {
    type: 'object',
    properties: {
      'idempotency-key': {
        type: 'string',
        minLength: 1,
        maxLength: LIMITS.maxKeyLength,
        pattern: '\\S',
        description: 'Optional; when sent, not empty or only spaces. A request with a key already seen is answered success and not processed.',
      },
      'api-version': {
        type: 'string',
        enum: [...API_VERSIONS.keys()],
        description:
          'Optional; echoed when sent. Absent or 2026-11-01: as before. 2026-12-01: adds an optional `event_metadata.event_time` on each event. The body below is the newest version.',
      },
    },
  },
  body: withEventTimeFormat(stripId(sgtmSchemaV20261201)),
  response: {
    200: { type: 'object', required: ['status'], properties: { status: { type: 'string', enum: ['success'] } } },
    ...Object.fromEntries(
      [400, 401, 408, 413, 414, 415, 429, 500, 503].map((c) => [c, { description: ERROR_MEANINGS[c], content: { 'application/json': { schema: sgtmErrorSchema } } }]),
    ),
  },
} as const;

/** Ingestion routes validate in the handler (to answer in their own error format): the schema only documents. */
export const documentOnly = () => () => true;
