/**
 * The browser's side of connecting an ad account (public routes, no admin token):
 * - GET /oauth/start?state=…: the `authorize_url` the admin API hands out. It binds the flow to this browser (a
 *   cookie holding a random value, whose hash is stored with the state) and redirects to the platform's
 *   authorization page.
 * - GET /oauth/callback: where the platform sends the browser back. Honoured only with the cookie of the browser
 *   that opened the start link, then the one-time `state` completes the flow.
 * Both answer small pages (or a redirect); the URLs carry a state and a code, so nothing is cached and no URL
 * leaks as a referrer. Security headers (CSP, frame-ancestors 'none', X-Frame-Options, nosniff) come from
 * @fastify/helmet, registered in this scope only.
 */
import cookie from '@fastify/cookie';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { randomBytes } from 'node:crypto';
import { STATE_TTL_MS, type CallbackQuery, type OAuthFlow } from '../forwarder/oauth-flow.js';
import { PlatformNotConfiguredError } from '../forwarder/platform-client.js';
import { sha256Hex } from '../shared/ids.js';
import { documentOnly, problemSchema } from '../gateway/openapi-schemas.js';
import { htmlPage } from './html-page.js';
import { registerPageSecurityHeaders } from '../http/page-security.js';

const TITLES: Readonly<Record<string, string>> = {
  denied: 'Access was not granted',
  exchange_failed: 'The platform did not complete the connection',
  advertiser_failed: 'The ad account could not be read',
  no_advertiser: 'No ad account was selected',
  other_browser: 'Finish connecting in the browser you started in',
};

function firstString(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (Array.isArray(v) && typeof v[0] === 'string') return v[0];
  return undefined;
}

/** One cookie per flow (named after the state's hash), so connecting two workspaces at once in one browser works. */
export function bindingCookieName(state: string): string {
  return `oauth_binding_${sha256Hex(state).slice(0, 16)}`;
}

/**
 * The values the platform sends back: tokens of URL-safe characters, and a free-text description, kept short enough
 * that a URL carrying all of them stays under the service's 8 KiB limit however it is encoded.
 */
export const token = (maxLength: number) => ({ type: 'string', maxLength, pattern: '^[\\x21-\\x7e]*$' }) as const;
export const queryValue = token(256);
/** A page for the person in the browser; a URL the service cannot read at all is a problem document instead. */
export const page = (description: string) => ({ description, content: { 'text/html': { schema: { type: 'string' } } } });
export const pageOrProblem = (description: string) => ({
  description,
  content: { 'text/html': { schema: { type: 'string' } }, 'application/problem+json': { schema: problemSchema } },
});
const startSchema = {
  summary: "The link an admin opens to connect: binds the flow to this browser, then redirects to the platform's authorization page",
  querystring: { type: 'object', properties: { state: token(128) } },
  response: {
    302: { description: "Redirect to the platform's authorization page.", type: 'null' },
    400: pageOrProblem('The link is unknown, expired or already used (a page says which).'),
    502: page('The platform could not be reached.'),
    503: page('Connecting is not available (the platform app is not configured).'),
  },
} as const;
const callbackSchema = {
  summary: 'Where the platform sends the browser back after authorization',
  querystring: {
    type: 'object',
    properties: { state: token(128), auth_code: queryValue, code: queryValue, error: token(128), error_description: { type: 'string', maxLength: 480 } },
  },
  response: {
    200: page('Connected.'),
    400: pageOrProblem('Access was not granted, or the link is unknown, expired, used or from another browser (a page says which).'),
    500: page('The connection could not be completed.'),
    502: page('The platform did not complete the connection, or the ad account could not be read.'),
    503: page('Connecting is not available (the platform app is not configured).'),
  },
} as const;

export interface OAuthBrowserRouteDeps {
  readonly flow: OAuthFlow;
  /** Secure cookies (PUBLIC_BASE_URL is https). */
  readonly secureCookies: boolean;
}

export async function oauthCallbackRoutes(app: FastifyInstance, deps: OAuthBrowserRouteDeps): Promise<void> {
  await app.register(cookie);
  await registerPageSecurityHeaders(app);
  const cookieOptions = {
    path: '/oauth/',
    httpOnly: true,
    // Lax: sent on the platform's top-level redirect back to the callback, never on cross-site subrequests.
    sameSite: 'lax' as const,
    secure: deps.secureCookies,
  };
  const pageHeaders = (reply: FastifyReply): FastifyReply =>
    reply.header('cache-control', 'no-store').header('referrer-policy', 'no-referrer').type('text/html; charset=utf-8');

  // The schemas document; the handlers read the query themselves, so anything unexpected gets a page, not JSON.
  app.get('/oauth/start', { schema: startSchema, validatorCompiler: documentOnly }, async (request, reply) => {
    pageHeaders(reply);
    const state = firstString((request.query as Record<string, unknown> | undefined)?.state) ?? '';
    const name = bindingCookieName(state);
    // The same browser opening the link again keeps its binding.
    const binding = request.cookies[name] ?? randomBytes(32).toString('base64url');
    let bound;
    try {
      bound = await deps.flow.bind(state, binding);
    } catch (err) {
      if (err instanceof PlatformNotConfiguredError) return reply.code(503).send(htmlPage('Connecting is not available', [err.message]));
      throw err;
    }
    if (!bound.ok) return reply.code(bound.status).send(htmlPage(TITLES[bound.reason] ?? 'This link cannot be used', [bound.message, 'Nothing was changed.']));
    reply.setCookie(name, binding, { ...cookieOptions, maxAge: Math.ceil(STATE_TTL_MS / 1000) });
    return reply.redirect(bound.authorizeUrl, 302);
  });

  app.get('/oauth/callback', { schema: callbackSchema, validatorCompiler: documentOnly }, async (request, reply) => {
    pageHeaders(reply);
    const q = (request.query ?? {}) as Record<string, unknown>;
    const query: CallbackQuery = {
      state: firstString(q.state),
      auth_code: firstString(q.auth_code),
      code: firstString(q.code),
      error: firstString(q.error),
      error_description: firstString(q.error_description),
    };
    const name = bindingCookieName(query.state ?? '');
    let result;
    try {
      result = await deps.flow.complete(query, request.cookies[name]);
    } catch (err) {
      if (err instanceof PlatformNotConfiguredError) {
        return reply.code(503).send(htmlPage('Connecting is not available', [err.message]));
      }
      request.log.error({ err }, 'OAuth callback failed');
      return reply
        .code(500)
        .send(htmlPage('Something went wrong', ['The connection could not be completed. Start connecting again from the workspace settings.']));
    }
    // The binding has served (or the state is spent): forget it, except when another browser knocked.
    if (result.ok || result.reason !== 'other_browser') reply.clearCookie(name, cookieOptions);
    if (result.ok) {
      return reply.code(200).send(
        htmlPage('Ad account connected', [
          `Workspace ${result.workspaceId} is now connected to ad account ${result.advertiserId} (time zone ${result.timeZone}).`,
          'Conversions are forwarded from now on, including those that waited for this connection. You can close this page.',
        ]),
      );
    }
    const title = TITLES[result.reason] ?? 'This link cannot be used';
    return reply.code(result.status).send(htmlPage(title, [result.message, 'Nothing was changed.']));
  });
}
