/**
 * The one error handler of the HTTP surface. Every error becomes the answer format of the route's variant:
 * `problem` (RFC 9457, endpoint A, admin API, everything else) or `sgtm` (`{error, message}`, endpoint B).
 * 5xx answers never carry internals; they are logged with the request id instead.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { eventsIngested, eventsInBody } from '../shared/metrics.js';
import { NotDurableError } from '../stream/log.js';
import { IngestError, PROBLEMS, problemDocument, type ProblemKey } from './problems.js';

export type ErrorVariant = 'problem' | 'sgtm';

declare module 'fastify' {
  interface FastifyContextConfig {
    variant?: ErrorVariant;
    /** Metrics label of an ingestion endpoint. */
    ingest?: 'events' | 'sgtm';
  }
}

/** Maps any thrown error to a problem key, a detail and extra headers. */
export function classify(err: unknown): { key: ProblemKey; detail: string; headers: Record<string, string> } {
  if (err instanceof IngestError) return { key: err.problem, detail: err.detail, headers: { ...err.headers } };
  if (err instanceof NotDurableError) {
    return {
      key: 'unavailable',
      detail: 'The events could not be stored within the 1.5 s deadline; nothing was accepted. Retry with the same idempotency keys.',
      headers: { 'Retry-After': String(err.retryAfterSeconds) },
    };
  }
  const fe = err as Partial<FastifyError>;
  switch (fe.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { key: 'tooLarge', detail: `the body exceeds the limit of ${1024 * 1024} bytes`, headers: { Connection: 'close' } };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_TYPE':
      return { key: 'mediaType', detail: 'Content-Type must be application/json', headers: {} };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { key: 'validation', detail: 'body is required: a JSON array of events', headers: {} };
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { key: 'validation', detail: 'Content-Length does not match the body', headers: {} };
    default:
      break;
  }
  if (fe.statusCode === 400 && (err instanceof SyntaxError || fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY')) {
    return { key: 'malformedJson', detail: `the body is not valid JSON: ${fe.message ?? ''}`.trim(), headers: {} };
  }
  if (fe.statusCode === 413) return { key: 'tooLarge', detail: fe.message ?? 'request too large', headers: {} };
  if (fe.statusCode === 415) return { key: 'mediaType', detail: 'Content-Type must be application/json', headers: {} };
  if (fe.statusCode === 404) return { key: 'notFound', detail: fe.message ?? 'not found', headers: {} };
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
    return { key: 'validation', detail: fe.message ?? 'invalid request', headers: {} };
  }
  return { key: 'internal', detail: 'An unexpected error occurred; nothing of this request was accepted.', headers: {} };
}

export function sendError(
  request: FastifyRequest,
  reply: FastifyReply,
  err: unknown,
  publicBaseUrl: string,
): FastifyReply {
  const { key, detail, headers } = classify(err);
  const p = PROBLEMS[key];
  if (p.status >= 500) request.log.error({ err }, 'request failed');
  const ingest = request.routeOptions.config?.ingest;
  if (ingest) eventsIngested.inc({ endpoint: ingest, outcome: 'rejected', reason: p.slug }, eventsInBody(request.body));
  reply.code(p.status).headers(headers);
  if (request.routeOptions.config?.variant === 'sgtm') {
    return reply.type('application/json').send({ error: p.sgtmError, message: detail });
  }
  return reply.type('application/problem+json').send(problemDocument(publicBaseUrl, key, detail, request.id));
}

export function registerErrorHandling(app: FastifyInstance, publicBaseUrl: string): void {
  app.setErrorHandler((err, request, reply) => sendError(request, reply, err, publicBaseUrl));
  app.setNotFoundHandler((request, reply) =>
    sendError(request, reply, new IngestError('notFound', `no route ${request.method} ${request.url.split('?')[0]}`), publicBaseUrl),
  );
}
