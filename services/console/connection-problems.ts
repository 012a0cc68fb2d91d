/**
 * Problem types of the connection routes that the ingestion API's table (gateway/problems.ts) does not have. They
 * answer in the same RFC 9457 format, and their `type` URIs resolve to pages like the others.
 */
import { htmlResponse } from '../gateway/openapi-schemas.js';
import { registerPageSecurityHeaders } from '../http/page-security.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { htmlPage } from './html-page.js';

export const CONNECTION_PROBLEMS = {
  notConfigured: {
    slug: 'platform-not-configured',
    status: 503,
    title: 'The ad platform app is not configured',
    description:
      'Connecting an ad account uses the service\'s own app on the platform. The operator sets PLATFORM_APP_ID and PLATFORM_APP_SECRET (see the README) and restarts the service; customers need no app of their own.',
  },
} as const;

export type ConnectionProblem = (typeof CONNECTION_PROBLEMS)[keyof typeof CONNECTION_PROBLEMS];

export function sendConnectionProblem(
  request: FastifyRequest,
  reply: FastifyReply,
  publicBaseUrl: string,
  p: ConnectionProblem,
  detail: string,
): FastifyReply {
  return reply
    .code(p.status)
    .type('application/problem+json')
    .send({ type: `${publicBaseUrl}/problems/${p.slug}`, title: p.title, status: p.status, detail, instance: `urn:uuid:${request.id}` });
}

/** The pages behind the `type` URIs above (public, like the other problem pages). */
export async function connectionProblemPages(app: FastifyInstance): Promise<void> {
  await registerPageSecurityHeaders(app);
  for (const p of Object.values(CONNECTION_PROBLEMS)) {
    app.get(`/problems/${p.slug}`, { schema: { response: { 200: htmlResponse(p.title) } } }, async (_request, reply) =>
      reply.type('text/html; charset=utf-8').send(htmlPage(p.title, [`HTTP ${p.status}.`, p.description])),
    );
  }
}
