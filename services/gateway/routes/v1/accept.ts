/**
 * What both ingestion endpoints do once they know their schema and their normaliser: validate, size-check,
 * normalise into envelopes, and append them durably within the request's deadline. Throws IngestError /
 * NotDurableError, which the error handler renders in the endpoint's format.
 */
import type { ValidateFunction } from 'ajv';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { envelopeKey, type Endpoint, type EventEnvelope } from '../../../domain/envelope.js';
import { eventsIngested, logAppendDuration } from '../../../shared/metrics.js';
import type { EventLogProducer } from '../../../stream/log.js';
import { Topics } from '../../../shared/topics.js';
import type { RequestContext } from '../../normalise.js';
import { IngestError } from '../../problems.js';
import { checkEventSizes } from '../../validation/event-size.js';
import { LIMITS } from '../../validation/limits.js';
import { firstViolation } from '../../validation/validate.js';

export interface IngestDeps {
  readonly producer: EventLogProducer;
  readonly runtime: string;
}

/** Returns how many events were accepted, or undefined when the deadline already answered the request. */
export async function acceptEvents(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: IngestDeps,
  endpoint: Endpoint,
  validate: ValidateFunction,
  toEnvelope: (ctx: RequestContext, raw: unknown, index: number, count: number) => EventEnvelope,
): Promise<number | undefined> {
  const violation = firstViolation(validate, request.body);
  if (violation) throw new IngestError(violation.unhashed ? 'unhashedPii' : 'validation', violation.message);
  const events = request.body as unknown[];
  checkEventSizes(events, request.headers['content-length']);
  const key = request.apiKey!;
  const ctx: RequestContext = {
    workspaceId: key.workspaceId,
    keyMode: key.mode,
    apiKeyId: key.keyId,
    requestId: request.id,
    receivedAt: request.deadline - LIMITS.requestDeadlineMs,
  };
  const records = events.map((raw, i) => {
    const envelope = toEnvelope(ctx, raw, i, events.length);
    return { key: envelopeKey(envelope), value: envelope };
  });
  if (reply.sent) return undefined; // the deadline already answered 503
  request.appending = true;
  const end = logAppendDuration.startTimer({ runtime: deps.runtime });
  await deps.producer.append(Topics.eventsRaw, records, request.deadline);
  end();
  eventsIngested.inc({ endpoint, outcome: 'accepted', reason: '' }, records.length);
  return records.length;
}
