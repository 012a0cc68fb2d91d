/**
 * The workspace settings console at /console: server-rendered pages (eta via @fastify/view), a stylesheet and one
 * small script served from here. Everything that guards it is registered in THIS plugin's scope, so it covers the
 * console and nothing else: sessions in the database (@fastify/session, HttpOnly SameSite cookies), CSRF tokens on
 * every form (@fastify/csrf-protection), security headers with a strict CSP (@fastify/helmet) and a rate limit on
 * sign-in (@fastify/rate-limit). README.md (section Console) says what each page does; docs/decisions.md
 * ("The workspace settings console") says why.
 */
import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import cookie from '@fastify/cookie';
import csrf from '@fastify/csrf-protection';
import formbody from '@fastify/formbody';
import helmet from '@fastify/helmet';
import rateLimit from '@fastify/rate-limit';
import session from '@fastify/session';
import fastifyStatic from '@fastify/static';
import view from '@fastify/view';
import { Eta } from 'eta';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { repoRoot } from '../../shared/repo-root.js';
import type { ConsoleUser, Membership } from '../user-repo.js';
import { UnstorableFormValueError, unstorableFormValue } from './form-values.js';
import { destinationsRoutes } from './destinations-routes.js';
import { settingsRoutes } from './settings-routes.js';
import { DbSessionStore } from './session-store.js';
import { signInRoutes } from './sign-in-routes.js';
import { renderPage, SESSION_COOKIE } from './page.js';

import type { ConsoleWebDeps } from './deps.js';

export { renderPage, SESSION_COOKIE, type PageData } from './page.js';
export type { ConsoleDeadLetters, ConsoleWebDeps } from './deps.js';

declare module 'fastify' {
  interface Session {
    user?: ConsoleUser;
    /** When the user signed in (epoch ms): the session ends SESSION_ABSOLUTE_MS later, however active. */
    signedInAt?: number;
    /** A one-time notice shown on the next page (post, redirect, get). */
    flash?: string;
  }
}

/** A session ends after this long without a request (each request moves it forward)… */
export const SESSION_MAX_AGE_MS = 8 * 3600_000;
/** …and this long after sign-in whatever the activity: a stolen cookie is not good forever. */
export const SESSION_ABSOLUTE_MS = 12 * 3600_000;
const WEB_DIR = join(repoRoot(), 'services', 'console', 'web');

export async function consoleWebPlugin(app: FastifyInstance, deps: ConsoleWebDeps): Promise<void> {
  await app.register(async (scope) => consoleScope(scope, deps), { prefix: '/console' });
}

async function consoleScope(app: FastifyInstance, deps: ConsoleWebDeps): Promise<void> {
  const https = deps.publicBaseUrl.startsWith('https:');
  // HTML pages for people, not API: kept out of the OpenAPI document.
  app.addHook('onRoute', (route) => {
    route.schema = { ...route.schema, hide: true };
  });
  await app.register(formbody);
  await app.register(cookie);
  await app.register(session, {
    // A key of its own, derived from CREDENTIALS_KEY: the same on every replica, never the token key itself.
    secret: createHmac('sha256', deps.secretKey).update('console-session-cookie').digest('base64'),
    cookieName: SESSION_COOKIE,
    store: new DbSessionStore(deps.db, SESSION_MAX_AGE_MS),
    saveUninitialized: false,
    cookie: { path: '/console', httpOnly: true, sameSite: 'lax', secure: https, maxAge: SESSION_MAX_AGE_MS },
  });
  // A session past its absolute lifetime is ended before anything reads it: the request goes on signed out.
  app.addHook('onRequest', async (request) => {
    const { user, signedInAt } = request.session;
    if (user && !(typeof signedInAt === 'number' && Date.now() - signedInAt < SESSION_ABSOLUTE_MS)) {
      request.log.info({ user_id: user.id }, 'console session reached its absolute lifetime');
      await request.session.regenerate();
    }
  });
  await app.register(csrf, { sessionPlugin: '@fastify/session', getToken: (request) => (request.body as { _csrf?: string } | undefined)?._csrf });
  await app.register(helmet, {
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'none'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'"],
        imgSrc: ["'self'"],
        connectSrc: ["'self'"],
        formAction: ["'self'", ...new Set([deps.platformAuthUrl, ...deps.destinationAuthUrls].map((u) => new URL(u).origin))],
        frameAncestors: ["'none'"],
        baseUri: ["'none'"],
      },
    },
    // For browsers without CSP's frame-ancestors: the same 'none' (helmet's default would be SAMEORIGIN).
    xFrameOptions: { action: 'deny' },
    strictTransportSecurity: https,
    referrerPolicy: { policy: 'same-origin' },
  });
  await app.register(rateLimit, { global: false });
  await app.register(view, {
    engine: { eta: new Eta({ views: join(WEB_DIR, 'views'), cache: true }) },
    root: join(WEB_DIR, 'views'),
    viewExt: 'eta',
    layout: 'layout',
    production: true,
  });
  await app.register(fastifyStatic, { root: join(WEB_DIR, 'assets'), prefix: '/assets/', maxAge: 3600_000, index: false });

  app.setErrorHandler(async (err: FastifyError, request, reply) => {
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 600 ? err.statusCode : 500;
    if (status >= 500) request.log.error({ err }, 'console request failed');
    let heading = 'This request cannot be completed';
    let message = status >= 500 ? 'Something went wrong on our side; nothing was changed. Try again shortly.' : err.message;
    if (err.code?.startsWith('FST_CSRF')) {
      heading = 'This form cannot be accepted';
      message =
        'It was sent without its security token (CSRF check), or the token expired with your session. Nothing was changed: go back, reload the page and send it again.';
    } else if (status === 429) {
      heading = 'Too many attempts';
    } else if (status === 400) {
      heading = 'The form is not valid';
    } else if (status === 404) {
      heading = 'Not found';
    } else if (status === 403) {
      heading = 'Not allowed';
    }
    return renderPage(request, reply, 'error', { title: heading, heading, message }, status);
  });
  app.setNotFoundHandler(async (request, reply) =>
    renderPage(request, reply, 'error', { title: 'Not found', heading: 'Not found', message: `There is no console page at ${request.url.split('?')[0]}.` }, 404),
  );
  // Every form value must be storable (U+0000, lone surrogates: 400), checked once the body is parsed, before any
  // route runs: urlencoded forms do not go through the JSON parser's checks. The query too: a GET form (Activity's
  // "Why this field") looks its value up in the database.
  app.addHook('preValidation', async (request) => {
    const problem = unstorableFormValue(request.query) ?? (request.method === 'POST' ? unstorableFormValue(request.body) : undefined);
    if (problem) throw new UnstorableFormValueError(problem);
  });
  // Every form post carries its CSRF token; checked once the body is parsed.
  app.addHook('preHandler', (request, reply, done) => {
    if (request.method === 'POST') app.csrfProtection(request, reply, done);
    else done();
  });

  signInRoutes(app, deps);
  settingsRoutes(app, deps);
  destinationsRoutes(app, deps);
}
