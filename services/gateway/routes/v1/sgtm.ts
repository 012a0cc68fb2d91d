/** Endpoint B: POST /v1/sgtm (the server-side tag template's endpoint). */
import type { FastifyInstance } from 'fastify';
import { envelopeKey } from '../../../shared/envelope.js';
import { eventsIngested, logAppendDuration } from '../../../shared/metrics.js';
import type { EventLogProducer } from '../../../shared/runtime/log.js';
import { Topics } from '../../../shared/topics.js';
import { normaliseSgtmEvent } from '../../normalise.js';
import { documentOnly, sgtmRouteSchema } from '../../openapi-schemas.js';
import { IngestError } from '../../problems.js';
import { checkEventSizes } from '../../validation/event-size.js';
import { LIMITS } from '../../validation/limits.js';
import { firstViolation, validateSgtm } from '../../validation/validate.js';

function requestKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const value = (Array.isArray(header) ? header[0]! : header).trim();
  if (value === '') throw new IngestError('validation', 'Idempotency-Key must not be empty when sent');
  if (value.length > LIMITS.maxKeyLength) {
    throw new IngestError('validation', `Idempotency-Key must be at most ${LIMITS.maxKeyLength} characters`);
  }
  return value;
}

export function sgtmRoute(app: FastifyInstance, deps: { producer: EventLogProducer; runtime: string }): void {
  app.post(
    '/v1/sgtm',
    { config: { variant: 'sgtm', ingest: 'sgtm' }, schema: sgtmRouteSchema, validatorCompiler: documentOnly },
    async (request, reply) => {
      const idempotencyKey = requestKey(request.headers['idempotency-key']);
      const violation = firstViolation(validateSgtm, request.body);
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
        const envelope = normaliseSgtmEvent(ctx, e, i, idempotencyKey, events.length);
        return { key: envelopeKey(envelope), value: envelope };
      });
      if (reply.sent) return reply; // the deadline already answered 503
      request.appending = true;
      const end = logAppendDuration.startTimer({ runtime: deps.runtime });
      await deps.producer.append(Topics.eventsRaw, records, request.deadline);
      end();
      eventsIngested.inc({ endpoint: 'sgtm', outcome: 'accepted', reason: '' }, records.length);
      return reply.code(200).send({ status: 'success' });
    },
  );
}
