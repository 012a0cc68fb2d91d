/** Endpoint B: POST /v1/sgtm (the server-side tag template's endpoint). */
import type { FastifyInstance } from 'fastify';
import { normaliseSgtmEvent } from '../../normalise.js';
import { documentOnly, sgtmRouteSchema } from '../../openapi-schemas.js';
import { IngestError } from '../../problems.js';
import { LIMITS } from '../../validation/limits.js';
import { validateSgtm } from '../../validation/validate.js';
import { acceptEvents, type IngestDeps } from './accept.js';

function requestKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const value = (Array.isArray(header) ? header[0]! : header).trim();
  if (value === '') throw new IngestError('validation', 'Idempotency-Key must not be empty when sent');
  if (value.length > LIMITS.maxKeyLength) {
    throw new IngestError('validation', `Idempotency-Key must be at most ${LIMITS.maxKeyLength} characters`);
  }
  return value;
}

export function sgtmRoute(app: FastifyInstance, deps: IngestDeps): void {
  app.post(
    '/v1/sgtm',
    { config: { variant: 'sgtm', ingest: 'sgtm' }, schema: sgtmRouteSchema, validatorCompiler: documentOnly },
    async (request, reply) => {
      const idempotencyKey = requestKey(request.headers['idempotency-key']);
      const accepted = await acceptEvents(request, reply, deps, 'sgtm', validateSgtm, (ctx, raw, i, count) =>
        normaliseSgtmEvent(ctx, raw, i, idempotencyKey, count),
      );
      if (accepted === undefined) return reply;
      return reply.code(200).send({ status: 'success' });
    },
  );
}
