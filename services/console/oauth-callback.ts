/**
 * GET /oauth/callback: where the platform sends the browser back after the customer granted (or refused) access.
 * Public (no admin token): the one-time `state` is what authenticates the request. Answers a small page; the URL
 * carries a code and a state, so the page is never cached and never leaks its URL as a referrer.
 */
import type { FastifyInstance } from 'fastify';
import type { CallbackQuery, OAuthFlow } from '../forwarder/oauth-flow.js';
import { PlatformNotConfiguredError } from '../forwarder/platform-client.js';
import { htmlPage } from './html-page.js';

const TITLES: Readonly<Record<string, string>> = {
  denied: 'Access was not granted',
  exchange_failed: 'The platform did not complete the connection',
  advertiser_failed: 'The ad account could not be read',
  no_advertiser: 'No ad account was selected',
};

function firstString(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (Array.isArray(v) && typeof v[0] === 'string') return v[0];
  return undefined;
}

export function oauthCallbackRoutes(app: FastifyInstance, deps: { flow: OAuthFlow }): void {
  app.get('/oauth/callback', async (request, reply) => {
    reply.header('cache-control', 'no-store').header('referrer-policy', 'no-referrer').type('text/html; charset=utf-8');
    const q = (request.query ?? {}) as Record<string, unknown>;
    const query: CallbackQuery = {
      state: firstString(q.state),
      auth_code: firstString(q.auth_code),
      code: firstString(q.code),
      error: firstString(q.error),
      error_description: firstString(q.error_description),
    };
    let result;
    try {
      result = await deps.flow.complete(query);
    } catch (err) {
      if (err instanceof PlatformNotConfiguredError) {
        return reply.code(503).send(htmlPage('Connecting is not available', [err.message]));
      }
      request.log.error({ err }, 'OAuth callback failed');
      return reply
        .code(500)
        .send(htmlPage('Something went wrong', ['The connection could not be completed. Start connecting again from the workspace settings.']));
    }
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
