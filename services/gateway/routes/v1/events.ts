/** Endpoint A: POST /v1/events. */
import type { FastifyInstance } from 'fastify';
import { envelopeKey } from '../../../shared/envelope.js';
import { eventsIngested, logAppendDuration } from '../../../shared/metrics.js';
import type { EventLogProducer } from '../../../shared/runtime/log.js';
import { Topics } from '../../../shared/topics.js';
import { normaliseEvent } from '../../normalise.js';
import { documentOnly, eventsRouteSchema } from '../../openapi-schemas.js';
import { IngestError } from '../../problems.js';
import { checkEventSizes } from '../../validation/event-size.js';
import { LIMITS } from '../../validation/limits.js';
import { API_VERSIONS, CURRENT_API_VERSION, firstViolation } from '../../validation/validate.js';

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

export function eventsRoute(app: FastifyInstance, deps: { producer: EventLogProducer; runtime: string }): void {
  app.post(
    '/v1/events',
    { config: { variant: 'problem', ingest: 'events' }, schema: eventsRouteSchema, validatorCompiler: documentOnly },
    async (request, reply) => {
      const version = resolveApiVersion(request.headers['api-version']);
      reply.header('API-Version', version);
      const violation = firstViolation(API_VERSIONS.get(version)!, request.body);
      if (violation) throw new IngestError(violation.unhashed ? 'unhashedPii' : 'validation', violation.message);
      const events = request.body as unknown[];
      checkEventSizes(events, request.headers['content-length']);
      const key = request.apiKey!;
      const ctx = {
        workspaceId: key.workspaceId,
        keyMode: key.mode,
        apiKeyId: key.keyId,
        requestId: request.id,
        receivedAt: request.deadline - LIMITS.requestDeadlineMs,
      };
      const records = events.map((e, i) => {
        const envelope = normaliseEvent(ctx, version, e, i);
        return { key: envelopeKey(envelope), value: envelope };
      });
      if (reply.sent) return reply; // the deadline already answered 503
      request.appending = true;
      const end = logAppendDuration.startTimer({ runtime: deps.runtime });
      await deps.producer.append(Topics.eventsRaw, records, request.deadline);
      end();
      eventsIngested.inc({ endpoint: 'events', outcome: 'accepted', reason: '' }, records.length);
      return reply.code(202).send({ status: 'accepted', accepted: records.length, request_id: request.id });
    },
  );
}
