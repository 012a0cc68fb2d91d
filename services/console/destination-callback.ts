/**
 * The browser's side of connecting a destination (public routes, no admin token), as oauth-callback.ts does for
 * the workspace's TikTok connection: GET /oauth/destination/start binds the flow to this browser (a cookie) and
 * sends it to the platform's dialog; GET /oauth/destination/callback is honoured only with that cookie.
 * This callback URL must be among the platform app's allowed redirect URIs (README, "Destinations").
 */
import cookie from '@fastify/cookie';
import { randomBytes } from 'node:crypto';
import { documentOnly } from '../gateway/openapi-schemas.js';
import { page, pageOrProblem, queryValue, token } from './oauth-callback.js';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { DESTINATION_CALLBACK_PATH, DESTINATION_START_PATH, DESTINATION_STATE_TTL_MS, type DestinationFlow } from '../forwarder/destinations/flow.js';
import { GoogleNotConfiguredError } from '../forwarder/destinations/google.js';
import { MetaNotConfiguredError } from '../forwarder/destinations/meta.js';
import { PlatformNotConfiguredError } from '../forwarder/platform-client.js';
import { sha256Hex } from '../shared/ids.js';
import { registerPageSecurityHeaders } from '../http/page-security.js';
import { htmlPage } from './html-page.js';

const first = (v: unknown): string | undefined => (typeof v === 'string' ? v : Array.isArray(v) && typeof v[0] === 'string' ? v[0] : undefined);
const cookieName = (state: string): string => `dst_binding_${sha256Hex(state).slice(0, 16)}`;

const startSchema = {
  summary: "The link an admin opens to connect a destination: binds the flow to this browser, then redirects to the platform's authorization page",
  querystring: { type: 'object', properties: { state: token(128) } },
  response: {
    302: { description: "Redirect to the platform's authorization page.", type: 'null' },
    400: pageOrProblem('The link is unknown, expired or already used (a page says which).'),
    404: page('The destination was removed meanwhile.'),
    503: page('Connecting is not available (the platform app is not configured).'),
  },
} as const;

const callbackSchema = {
  summary: "Where Meta, Google or TikTok (a second TikTok destination) sends the browser back after a destination's authorization",
  querystring: {
    type: 'object',
    properties: { state: token(128), code: queryValue, auth_code: queryValue, error: token(128), error_description: { type: 'string', maxLength: 480 } },
  },
  response: {
    200: page('Connected.'),
    400: pageOrProblem('Access was not granted, or the link is unknown, expired, used or from another browser (a page says which).'),
    404: page('The destination was removed meanwhile.'),
    500: page('The connection could not be completed.'),
    502: page('The platform did not complete the connection.'),
    503: page('Connecting is not available (the platform app is not configured).'),
  },
} as const;

export async function destinationCallbackRoutes(app: FastifyInstance, deps: { flow: DestinationFlow; secureCookies: boolean }): Promise<void> {
  await app.register(cookie);
  await registerPageSecurityHeaders(app);
  const cookieOptions = { path: '/oauth/', httpOnly: true, sameSite: 'lax' as const, secure: deps.secureCookies };
  const page = (reply: FastifyReply): FastifyReply =>
    reply.header('cache-control', 'no-store').header('referrer-policy', 'no-referrer').type('text/html; charset=utf-8');

  app.get(DESTINATION_START_PATH, { schema: startSchema, validatorCompiler: documentOnly }, async (request, reply) => {
    page(reply);
    const state = first((request.query as Record<string, unknown> | undefined)?.state) ?? '';
    const name = cookieName(state);
    const binding = request.cookies[name] ?? randomBytes(32).toString('base64url');
    let bound;
    try {
      bound = await deps.flow.bind(state, binding);
    } catch (err) {
      if (err instanceof MetaNotConfiguredError || err instanceof GoogleNotConfiguredError || err instanceof PlatformNotConfiguredError) return reply.code(503).send(htmlPage('Connecting is not available', [err.message]));
      throw err;
    }
    if (!bound.ok) return reply.code(bound.status as 400 | 404).send(htmlPage('This link cannot be used', [bound.message, 'Nothing was changed.']));
    reply.setCookie(name, binding, { ...cookieOptions, maxAge: Math.ceil(DESTINATION_STATE_TTL_MS / 1000) });
    return reply.redirect(bound.authorizeUrl, 302);
  });

  app.get(DESTINATION_CALLBACK_PATH, { schema: callbackSchema, validatorCompiler: documentOnly }, async (request, reply) => {
    page(reply);
    const q = (request.query ?? {}) as Record<string, unknown>;
    const query = Object.fromEntries(['state', 'code', 'auth_code', 'error', 'error_description'].map((k) => [k, first(q[k])]));
    const name = cookieName(query.state ?? '');
    let result;
    try {
      result = await deps.flow.complete(query, request.cookies[name]);
    } catch (err) {
      request.log.error({ err }, 'destination callback failed');
      return reply.code(500).send(htmlPage('Something went wrong', ['The connection could not be completed. Start connecting again.']));
    }
    if (result.ok || result.reason !== 'other_browser') reply.clearCookie(name, cookieOptions);
    if (result.ok) {
      return reply.code(200).send(
        htmlPage('Destination connected', [
          `Destination ${result.destinationId} is now connected (account ${result.accountId}).`,
          'Conversions are forwarded there from now on, including those that waited for this connection. You can close this page.',
        ]),
      );
    }
    return reply.code(result.status as 400 | 404 | 502).send(htmlPage('The destination was not connected', [result.message, 'Nothing was changed.']));
  });
}
