/**
 * Response and header schemas of the ingestion endpoints, for the OpenAPI document (@fastify/swagger builds it
 * from the routes, so routes and document cannot drift apart). Request bodies are documented with the very
 * schemas the handlers validate against (validation/schemas.ts).
 */
import { eventsSchemaV20261201, sgtmSchemaV20261201 } from './validation/schemas.js';
import { API_VERSIONS } from './validation/validate.js';

const stripId = <T extends { $id?: string }>(s: T): Omit<T, '$id'> => {
  const { $id: _id, ...rest } = s;
  return rest;
};

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

const problems = (...codes: number[]) => Object.fromEntries(codes.map((c) => [c, problemSchema]));

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
  body: stripId(eventsSchemaV20261201),
  response: {
    202: {
      description: 'Accepted and durable.',
      type: 'object',
      required: ['status', 'accepted', 'request_id'],
      properties: { status: { type: 'string', enum: ['accepted'] }, accepted: { type: 'integer' }, request_id: { type: 'string' } },
    },
    ...problems(400, 401, 408, 413, 415, 429, 500, 503),
  },
} as const;

export const sgtmRouteSchema = {
  summary: 'Send a batch of server-side tag events (variant B)',
  tags: ['ingestion'],
  security: [{ apiKey: [] }],
  headers: {
    type: 'object',
    properties: {
      'idempotency-key': { type: 'string', description: 'A request with a key already seen is answered success and not processed.' },
      'api-version': {
        type: 'string',
        enum: [...API_VERSIONS.keys()],
        description:
          'Optional; echoed when sent. Absent or 2026-11-01: as before. 2026-12-01: adds an optional `event_metadata.event_time` on each event. The body below is the newest version.',
      },
    },
  },
  body: stripId(sgtmSchemaV20261201),
  response: {
    200: { type: 'object', required: ['status'], properties: { status: { type: 'string', enum: ['success'] } } },
    ...Object.fromEntries([400, 401, 408, 413, 415, 429, 500, 503].map((c) => [c, sgtmErrorSchema])),
  },
} as const;

/** Ingestion routes validate in the handler (to answer in their own error format): the schema only documents. */
export const documentOnly = () => () => true;
