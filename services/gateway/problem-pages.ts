/** Serves the page each problem `type` URI points at: what the error means and what to do about it. */
import type { FastifyInstance } from 'fastify';
import { htmlResponse } from './openapi-schemas.js';
import { IngestError, PROBLEMS, problemBySlug } from './problems.js';

const escape = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
const inline = (s: string): string => escape(s).replace(/`([^`]+)`/g, '<code>$1</code>');

export function problemPages(app: FastifyInstance): void {
  app.get('/problems', { schema: { response: { 200: htmlResponse('The list of error types.') } } }, async (_request, reply) => {
    const items = Object.values(PROBLEMS)
      .map((p) => `<li><a href="/problems/${p.slug}">${p.slug}</a> (${p.status}): ${escape(p.title)}</li>`)
      .join('');
    return reply.type('text/html; charset=utf-8').send(page('Error types', `<ul>${items}</ul>`));
  });
  app.get<{ Params: { slug: string } }>('/problems/:slug', { schema: { response: { 200: htmlResponse('What the error type means and what to do.') } } }, async (request, reply) => {
    const p = problemBySlug.get(request.params.slug);
    if (!p) throw new IngestError('notFound', `no error type ${request.params.slug}`);
    const body = `<p><strong>HTTP ${p.status}</strong> — ${escape(p.title)}</p><p>${inline(p.description)}</p>
<p>Endpoint <code>POST /v1/events</code> answers an <code>application/problem+json</code> document (RFC 9457) with
<code>type</code>, <code>title</code>, <code>status</code>, <code>detail</code> and <code>instance</code>.
Endpoint <code>POST /v1/sgtm</code> answers <code>{"error": "${escape(p.sgtmError)}", "message": "…"}</code>.</p>`;
    return reply.type('text/html; charset=utf-8').send(page(p.title, body));
  });
}

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title></head>
<body style="font-family:system-ui,sans-serif;max-width:44rem;margin:2rem auto;line-height:1.5"><h1>${escape(title)}</h1>${body}
<p><a href="/problems">All error types</a></p></body></html>`;
}
