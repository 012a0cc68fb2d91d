/** Endpoint B: POST /v1/sgtm (the server-side tag template's endpoint). */
import type { FastifyInstance } from 'fastify';
import { normaliseSgtmEvent } from '../../normalise.js';
import { documentOnly, sgtmRouteSchema } from '../../openapi-schemas.js';
import { IngestError } from '../../problems.js';
import { LIMITS } from '../../validation/limits.js';
import { acceptEvents, type IngestDeps } from './accept.js';
import { resolveApiVersion } from './api-version.js';

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
      // NOTE: endpoint B had no API-Version before 2026-12-01: without the header it behaves exactly as it did.
      const { version, explicit } = resolveApiVersion(request.headers['api-version']);
      if (explicit) reply.header('API-Version', version.date);
      const idempotencyKey = requestKey(request.headers['idempotency-key']);
      const accepted = await acceptEvents(request, reply, deps, 'sgtm', version.sgtm, (ctx, raw, i, count) =>
        normaliseSgtmEvent(ctx, raw, i, idempotencyKey, count, explicit ? version.date : null),
      );
      if (accepted === undefined) return reply;
      return reply.code(200).send({ status: 'success' });
    },
  );
}
