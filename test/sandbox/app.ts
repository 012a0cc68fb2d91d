import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import { API_PREFIX, PlatformCode } from './codes.js';
import { registerAdvertiserRoutes } from './advertiser.js';
import { registerBenchControlRoutes } from './bench-control.js';
import { CONTROL_PREFIX, registerControlRoutes } from './control.js';
import { registerEventRoutes } from './events.js';
import { registerOAuthRoutes } from './oauth.js';
import { requestPath, sendApi } from './respond.js';
import { createState, type FaultKey, type SandboxOptions, type SandboxState } from './state.js';

export type { SandboxOptions, SandboxState } from './state.js';

/** The sandbox app; `sandbox` exposes the per-instance state to in-process tests. */
export type SandboxApp = FastifyInstance & { readonly sandbox: SandboxState };

/** 1000 records with full user data can exceed Fastify's 1 MiB default. */
const BODY_LIMIT = 16 * 1024 * 1024;

const ENDPOINT_BY_PATH: Readonly<Record<string, FaultKey>> = {
  [`${API_PREFIX}/event/track/`]: 'events',
  [`${API_PREFIX}/oauth2/access_token/`]: 'token',
  [`${API_PREFIX}/oauth2/refresh_token/`]: 'refresh',
  [`${API_PREFIX}/oauth2/revoke_token/`]: 'revoke',
  [`${API_PREFIX}/advertiser/info/`]: 'advertiser',
};

function endpointFor(path: string): FaultKey | null {
  return ENDPOINT_BY_PATH[path.endsWith('/') ? path : `${path}/`] ?? null;
}

export function buildSandbox(opts: SandboxOptions = {}): SandboxApp {
  const state = createState(opts);
  const app: FastifyInstance = Fastify({
    logger: opts.logger ?? false,
    bodyLimit: BODY_LIMIT,
    routerOptions: { ignoreTrailingSlash: true },
    // A test double should stop at once: close() destroys keep-alive and never-used client connections
    // (otherwise a pooled fetch connection holds close() for the client's keep-alive timeout).
    forceCloseConnections: true,
  });
  app.decorate('sandbox', state);

  // Same JSON parser as Fastify's, except that an empty body is "no body" rather than an error.
  const defaultJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    return defaultJson(request, text, done);
  });

  registerOAuthRoutes(app, state);
  registerAdvertiserRoutes(app, state);
  registerEventRoutes(app, state);
  registerControlRoutes(app, state);
  registerBenchControlRoutes(app, state);

  app.setNotFoundHandler((request, reply) => {
    if (requestPath(request).startsWith(CONTROL_PREFIX)) {
      return reply.code(404).send({ error: `Not found: ${request.method} ${requestPath(request)}` });
    }
    return sendApi(state, request, reply, {
      endpoint: null,
      code: PlatformCode.NOT_FOUND,
      message: `Not found: ${request.method} ${requestPath(request)}`,
      httpStatus: 404,
    });
  });

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const path = requestPath(request);
    const clientError = typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500;
    if (path.startsWith(CONTROL_PREFIX)) {
      return reply.code(clientError ? (error.statusCode ?? 400) : 500).send({ error: error.message });
    }
    if (!clientError) request.log.error({ err: error }, 'sandbox handler failed');
    // Like the platform: a malformed request is HTTP 200 with code 40002; an internal failure is a 500.
    return sendApi(state, request, reply, {
      endpoint: endpointFor(path),
      code: clientError ? PlatformCode.PARAM_ERROR : PlatformCode.SYSTEM_ERROR,
      message: clientError ? `Invalid request: ${error.message}` : undefined,
      httpStatus: clientError ? 200 : 500,
    });
  });

  return app as SandboxApp;
}
