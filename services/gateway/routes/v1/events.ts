/** Endpoint A: POST /v1/events. */
import type { FastifyInstance } from 'fastify';
import { normaliseEvent } from '../../normalise.js';
import { documentOnly, eventsRouteSchema } from '../../openapi-schemas.js';
import { IngestError } from '../../problems.js';
import { API_VERSIONS, CURRENT_API_VERSION } from '../../validation/validate.js';
import { acceptEvents, type IngestDeps } from './accept.js';

const VERSION_FORMAT = /^\d{4}-\d{2}-\d{2}$/;

function resolveApiVersion(header: string | string[] | undefined): string {
  if (header === undefined) return CURRENT_API_VERSION;
  const value = Array.isArray(header) ? header[0]! : header.trim();
  if (!VERSION_FORMAT.test(value)) {
    throw new IngestError('apiVersion', `API-Version must be a date YYYY-MM-DD; got "${value.slice(0, 40)}"`);
  }
  if (!API_VERSIONS.has(value)) {
    throw new IngestError('apiVersion', `API-Version ${value} is not supported; supported: ${[...API_VERSIONS.keys()].join(', ')}`);
  }
  return value;
}

export function eventsRoute(app: FastifyInstance, deps: IngestDeps): void {
  app.post(
    '/v1/events',
    { config: { variant: 'problem', ingest: 'events' }, schema: eventsRouteSchema, validatorCompiler: documentOnly },
    async (request, reply) => {
      const version = resolveApiVersion(request.headers['api-version']);
      reply.header('API-Version', version);
      const accepted = await acceptEvents(request, reply, deps, 'events', API_VERSIONS.get(version)!, (ctx, raw, i) =>
        normaliseEvent(ctx, version, raw, i),
      );
      if (accepted === undefined) return reply;
      return reply.code(202).send({ status: 'accepted', accepted, request_id: request.id });
    },
  );
}
