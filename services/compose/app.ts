/**
 * The HTTP surface on PORT, as one Fastify plugin tree: ingestion (/v1), the admin API (/admin/v1), health,
 * the OpenAPI document and the error-type pages. server.ts alone listens.
 */
import swagger from '@fastify/swagger';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { adminPlugin } from '../console/app.js';
import type { ApiKeyVerifier } from '../gateway/auth/api-key-verifier.js';
import { gatewayPlugin } from '../gateway/app.js';
import { clientErrorHandler, registerErrorHandling, sendError } from '../gateway/errors.js';
import { documentErrors } from '../gateway/openapi-schemas.js';
import { problemPages } from '../gateway/problem-pages.js';
import { IngestError } from '../gateway/problems.js';
import type { WorkspaceRateLimiter } from '../gateway/rate-limit.js';
import { registerJsonBodyParser } from '../gateway/validation/json-body.js';
import { LIMITS } from '../gateway/validation/limits.js';
import type { Config } from '../shared/config.js';
import type { Db } from '../shared/db/db.js';
import { newRequestId } from '../shared/ids.js';
import { registerPageSecurityHeaders } from '../http/page-security.js';
import type { Logger } from '../shared/logger.js';
import { httpDuration, httpRequests } from '../shared/metrics.js';
import type { EventLogProducer } from '../stream/log.js';
import { strictBodyValidatorCompiler } from './strict-validation.js';

export interface AppDeps {
  readonly config: Config;
  readonly db: Db;
  readonly logger: Logger;
  /** Present when this process serves ingestion (roles all, gateway). */
  readonly ingest?: {
    readonly producer: EventLogProducer;
    readonly verifier: ApiKeyVerifier;
    readonly limiter: WorkspaceRateLimiter;
    readonly runtime: 'embedded' | 'kafka';
  };
  /** Present when this process serves the admin API (roles all, console). */
  readonly admin?: boolean;
  /** Extra plugins for the admin scope (forwarding setup, connection). */
  readonly adminExtensions?: ReadonlyArray<(app: FastifyInstance) => void | Promise<void>>;
  /** Extra public routes (e.g. the OAuth callback). */
  readonly publicExtensions?: ReadonlyArray<(app: FastifyInstance) => void | Promise<void>>;
  /** Readiness beyond the database: e.g. the log producer and the stages. */
  readonly ready?: () => Promise<boolean>;
}

/** The document's frame; @fastify/swagger fills `paths` from the routes' schemas. */
export const OPENAPI_INFO = {
  openapi: '3.1.0',
  info: {
    title: 'Event ingestion and conversion forwarding',
    version: '1.0.0',
    description:
      'Ingestion endpoints A (/v1/events) and B (/v1/sgtm), the admin API and the OAuth callback. Errors: see /problems.',
  },
  components: {
    securitySchemes: {
      apiKey: { type: 'http', scheme: 'bearer', description: 'A workspace API key (evk_live_… or evk_test_…).' },
      adminToken: { type: 'http', scheme: 'bearer', description: 'ADMIN_TOKEN.' },
    },
  },
} as const;

const authorizationHeaders = (raw: readonly string[]): number => {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === 'authorization') n++;
  return n;
};

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => newRequestId(),
    // A property the schema does not know is an error, not silently dropped: a misspelt `dryrun` must not start a
    // real replay, nor a misspelt setting be saved as its default.
    ajv: { customOptions: { removeAdditional: false } },
    bodyLimit: LIMITS.maxBodyBytes,
    // Slow-loris guard: an idle socket is closed; the per-request deadline is in gateway/deadline.ts.
    connectionTimeout: 10_000,
    keepAliveTimeout: 5_000,
    forceCloseConnections: 'idle',
    return503OnClosing: true,
    // 414, 431 and unparseable requests are problem documents too (gateway/errors.ts).
    frameworkErrors: (err, request, reply) => sendError(request, reply, err, deps.config.publicBaseUrl),
    clientErrorHandler: clientErrorHandler(deps.config.publicBaseUrl),
  });
  registerErrorHandling(app, deps.config.publicBaseUrl);
  // The document says every status a route answers (its own, and those any route of its kind can).
  app.addHook('onRoute', (route) => documentErrors(route as never));
  // One JSON parser for ingestion and the admin API: every value it lets through can be stored.
  registerJsonBodyParser(app);
  await app.register(swagger, { openapi: structuredClone(OPENAPI_INFO) as never });
  // Two Authorization headers: Node keeps the first, a proxy may keep the last; neither is trusted.
  app.addHook('onRequest', async (request) => {
    if (authorizationHeaders(request.raw.rawHeaders) > 1) {
      throw new IngestError('duplicateAuthorization', 'The request carries more than one Authorization header; send exactly one.');
    }
  });

  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    httpRequests.inc({ route, method: request.method, status: String(reply.statusCode) });
    httpDuration.observe({ route, method: request.method }, reply.elapsedTime / 1000);
    // One line per request (reqId is the request id its events carry to the forwarder's batch line). The route
    // template, never the URL: a query string may hold an OAuth code or state.
    const line = {
      route,
      method: request.method,
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 10) / 10,
      ...(request.apiKey ? { workspace: request.apiKey.workspaceId, key_id: request.apiKey.keyId } : {}),
      ...(request.routeOptions.config?.ingest ? { events: Array.isArray(request.body) ? request.body.length : 0 } : {}),
    };
    if (route === '/healthz' || route === '/readyz') request.log.debug(line, 'request');
    else request.log.info(line, 'request');
  });

  const status = (description: string, values: string[]) => ({
    description,
    type: 'object',
    required: ['status'],
    properties: { status: { type: 'string', enum: values } },
  });
  app.get('/healthz', { schema: { response: { 200: status('The process is up.', ['ok']) } } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { response: { 200: status('Ready to take requests.', ['ready']), 503: status('Not ready (the store, the log or a stage is not).', ['not ready']) } } }, async (_request, reply) => {
    let ok = true;
    try {
      await deps.db.query('SELECT 1');
      if (deps.ingest) ok = await deps.ingest.producer.healthy();
      if (ok && deps.ready) ok = await deps.ready();
    } catch {
      ok = false;
    }
    return reply.code(ok ? 200 : 503).send({ status: ok ? 'ready' : 'not ready' });
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  await app.register(async (scope) => {
    await registerPageSecurityHeaders(scope);
    problemPages(scope);
  });

  if (deps.ingest) {
    const ingest = deps.ingest;
    await app.register(async (scope) => gatewayPlugin(scope, { ...ingest, overload: deps.config.overload }));
  }
  if (deps.admin) {
    await app.register(async (scope) => {
      // The admin API takes JSON only: without the text/plain parser, any other Content-Type is a 415.
      scope.removeContentTypeParser('text/plain');
      scope.setValidatorCompiler(strictBodyValidatorCompiler());
      // Every admin route is documented as needing the admin token.
      scope.addHook('onRoute', (route) => {
        route.schema = { tags: ['admin'], security: [{ adminToken: [] }], ...route.schema };
      });
      await adminPlugin(scope, { db: deps.db, adminToken: deps.config.adminToken, plans: Object.keys(deps.config.planLimits) });
      for (const ext of deps.adminExtensions ?? []) await ext(scope);
    });
  }
  for (const ext of deps.publicExtensions ?? []) await app.register(async (scope) => ext(scope));
  return app;
}
