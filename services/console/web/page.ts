/**
 * One console page: rendered in the layout with the signed-in user, a fresh CSRF token and the flash notice.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Membership } from '../user-repo.js';

export const SESSION_COOKIE = 'console_session';

export interface PageData {
  readonly title: string;
  readonly ws?: Membership;
  readonly tab?: string;
  readonly [k: string]: unknown;
}

const fmt = (iso: string | null | undefined): string => (iso ? `${iso.slice(0, 16).replace('T', ' ')} UTC` : '—');

/** Renders a page in the layout, with the signed-in user and a fresh CSRF token; never cached. */
export async function renderPage(request: FastifyRequest, reply: FastifyReply, template: string, data: PageData, status = 200): Promise<FastifyReply> {
  const flash = request.session.flash;
  if (flash !== undefined) request.session.flash = undefined;
  const csrfToken = reply.generateCsrf();
  const html = await reply.viewAsync(template, { notice: flash, ...data, user: request.session.user, csrf: csrfToken, fmt });
  return reply.code(status).header('cache-control', 'no-store').type('text/html; charset=utf-8').send(html);
}
