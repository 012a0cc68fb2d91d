/**
 * The one error handler of the HTTP surface. Every error becomes the answer format of the route's variant:
 * `problem` (RFC 9457, endpoint A, admin API, everything else) or `sgtm` (`{error, message}`, endpoint B).
 * 5xx answers never carry internals; they are logged with the request id instead.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { eventsIngested, eventsInBody } from '../shared/metrics.js';
import { newRequestId } from '../shared/ids.js';
import { NotDurableError } from '../stream/log.js';
import { IngestError, PROBLEMS, problemDocument, type ProblemKey } from './problems.js';
import { LIMITS } from './validation/limits.js';

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
      return { key: 'tooLarge', detail: `the body exceeds the limit of ${LIMITS.maxBodyBytes} bytes`, headers: {} };
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return { key: 'uriTooLong', detail: 'a path segment is longer than 100 characters', headers: {} };
    case 'FST_ERR_BAD_URL':
      return { key: 'validation', detail: 'the URL is not valid (bad percent-encoding)', headers: {} };
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
  if (key === 'tooLarge') {
    // Fastify asks to close after a body error; the drain below reads the rest instead (bounded).
    reply.removeHeader('connection');
    drainRejectedBody(request);
  }
  logServerSide(request, key, err);
  const ingest = request.routeOptions.config?.ingest;
  if (ingest) eventsIngested.inc({ endpoint: ingest, outcome: 'rejected', reason: p.slug }, eventsInBody(request.body));
  reply.code(p.status).headers(headers);
  if (request.routeOptions.config?.variant === 'sgtm') {
    return reply.type('application/json').send({ error: p.sgtmError, message: detail });
  }
  return reply.type('application/problem+json').send(problemDocument(publicBaseUrl, key, detail, request.id));
}

/**
 * 5xx answers are logged with the request id, at a level that says whether anyone must act. A shed request
 * (`overloaded`) is the overload behaviour working, thousands a second under a storm: counted
 * (gateway_shed_requests_total) and logged only at debug, since a line with a stack each would slow the shedding.
 * Events the store did not make durable in time (`unavailable`) are a warning; anything else is logged with its stack.
 */
function logServerSide(request: FastifyRequest, key: ProblemKey, err: unknown): void {
  if (PROBLEMS[key].status < 500) return;
  if (key === 'overloaded') request.log.debug({ problem: key }, 'request shed');
  else if (key === 'unavailable') request.log.warn({ problem: key, reason: (err as Error).message }, 'request not accepted in time');
  else request.log.error({ err }, 'request failed');
}

/**
 * After a 413 the rest of the body is still on its way. Closing the socket then would reset it, and a client that
 * writes its whole body before reading (most do) would see ECONNRESET, not the 413. So the rest is read and
 * discarded, up to LIMITS.maxDrainBytes; past that the connection is closed.
 */
function drainRejectedBody(request: FastifyRequest): void {
  const raw = request.raw;
  if (raw.readableEnded || raw.destroyed) return;
  raw.unpipe();
  let seen = 0;
  raw.on('data', (chunk: Buffer) => {
    seen += chunk.length;
    if (seen > LIMITS.maxDrainBytes) raw.socket?.destroy();
  });
  raw.on('error', () => undefined);
  raw.resume();
}

/**
 * Errors Node's HTTP parser meets before a request exists (headers over 16 KiB, a malformed request line): a
 * problem document written to the socket, then the connection ends.
 */
export function clientErrorHandler(publicBaseUrl: string): (err: NodeJS.ErrnoException, socket: import('node:net').Socket) => void {
  return (err, socket) => {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    const key: ProblemKey =
      err.code === 'HPE_HEADER_OVERFLOW' ? 'headersTooLarge' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'timeout' : 'badRequest';
    const p = PROBLEMS[key];
    const detail =
      key === 'headersTooLarge'
        ? 'the request line and headers exceed 16 KiB'
        : key === 'timeout'
          ? 'the request did not arrive in time'
          : 'the request is not valid HTTP/1.1';
    const body = JSON.stringify(problemDocument(publicBaseUrl, key, detail, newRequestId()));
    if (socket.writable) {
      socket.write(
        `HTTP/1.1 ${p.status} ${p.sgtmError}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    }
    socket.end();
    socket.destroySoon();
  };
}

export function registerErrorHandling(app: FastifyInstance, publicBaseUrl: string): void {
  const routes = new RouteMethods();
  app.addHook('onRoute', (route) => routes.add(route.url, route.method));
  /** 405 naming the methods when the path is a route's but the method is not; else undefined. */
  const wrongMethod = (request: FastifyRequest): IngestError | undefined => {
    const path = request.url.split('?')[0]!;
    const allowed = routes.methodsOf(path);
    if (allowed.length === 0 || allowed.includes(request.method)) return undefined;
    return new IngestError('methodNotAllowed', `${path} does not take ${request.method}; it takes ${allowed.join(', ')}`, { Allow: allowed.join(', ') });
  };
  // A request no route takes for its method can still fail before the not-found handler (a body method without
  // Content-Type), or reach a looser route (GET …/dead-letters/redrive is GET …/dead-letters/:id): 405 all the same.
  // Only those two cases look at the routes: a shed under overload must stay cheap.
  app.setErrorHandler((err, request, reply) =>
    sendError(request, reply, ((request.is404 || (err as FastifyError).validation) && wrongMethod(request)) || err, publicBaseUrl),
  );
  // Long URLs: 414 as a problem document (a path segment over 100 characters is the router's own 414).
  app.addHook('onRequest', async (request) => {
    if (request.url.length > LIMITS.maxUrlChars) {
      throw new IngestError('uriTooLong', `the URL has ${request.url.length} characters; at most ${LIMITS.maxUrlChars} are allowed`);
    }
  });
  app.setNotFoundHandler((request, reply) =>
    sendError(request, reply, wrongMethod(request) ?? new IngestError('notFound', `no route ${request.method} ${request.url.split('?')[0]}`), publicBaseUrl),
  );
}

/**
 * The methods each route pattern takes, so a known path asked with another method is a 405 naming them, not a 404.
 * As the router does, the most specific pattern wins: `…/dead-letters/redrive` is not `…/dead-letters/:id`.
 */
class RouteMethods {
  private readonly byPattern = new Map<string, { match: RegExp; fixed: number; methods: Set<string> }>();

  add(url: string, method: string | string[]): void {
    let entry = this.byPattern.get(url);
    if (!entry) {
      const source = url
        .split('/')
        .map((segment) => (segment === '*' ? '.*' : segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
        .join('/');
      const fixed = url.split('/').filter((segment) => segment !== '*' && !segment.startsWith(':')).length;
      entry = { match: new RegExp(`^${source}$`), fixed, methods: new Set() };
      this.byPattern.set(url, entry);
    }
    for (const m of Array.isArray(method) ? method : [method]) entry.methods.add(m.toUpperCase());
  }

  methodsOf(path: string): string[] {
    let best = -1;
    let methods = new Set<string>();
    for (const { match, fixed, methods: m } of this.byPattern.values()) {
      if (fixed < best || !match.test(path)) continue;
      if (fixed > best) {
        best = fixed;
        methods = new Set();
      }
      for (const one of m) methods.add(one);
    }
    return [...methods].sort();
  }
}
