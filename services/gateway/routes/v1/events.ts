/** Endpoint A: POST /v1/events. */
import type { FastifyInstance } from 'fastify';
import { normaliseEvent } from '../../normalise.js';
import { documentOnly, eventsRouteSchema } from '../../openapi-schemas.js';
import { acceptEvents, type IngestDeps } from './accept.js';
import { resolveApiVersion } from './api-version.js';

export function eventsRoute(app: FastifyInstance, deps: IngestDeps): void {
  app.post(
    '/v1/events',
    { config: { variant: 'problem', ingest: 'events' }, schema: eventsRouteSchema, validatorCompiler: documentOnly },
    async (request, reply) => {
      const { version } = resolveApiVersion(request.headers['api-version']);
      reply.header('API-Version', version.date);
      const accepted = await acceptEvents(request, reply, deps, 'events', version.events, (ctx, raw, i) =>
        normaliseEvent(ctx, version.date, raw, i),
      );
      if (accepted === undefined) return reply;
      return reply.code(202).send({ status: 'accepted', accepted, request_id: request.id });
    },
  );
}
