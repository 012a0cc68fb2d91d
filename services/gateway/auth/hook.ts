/**
 * Folder-scoped auth and rate limiting for the ingestion routes: runs before the body is read, so a request with
 * a bad key or over its limit costs no parsing.
 */
import type { FastifyInstance } from 'fastify';
import { IngestError } from '../problems.js';
import type { WorkspaceRateLimiter } from '../rate-limit.js';
import type { ApiKeyVerifier, VerifiedKey } from './api-key-verifier.js';

declare module 'fastify' {
  interface FastifyRequest {
    apiKey: VerifiedKey | null;
  }
}

export function registerIngestAuth(app: FastifyInstance, verifier: ApiKeyVerifier, limiter: WorkspaceRateLimiter): void {
  app.decorateRequest('apiKey', null);
  // The event names a workspace sends, for the console's Forwarding picker: counted once accepted, flushed in batches.
  app.addHook('onResponse', async (request, reply) => {
    if (!request.apiKey || reply.statusCode >= 300 || !Array.isArray(request.body)) return;
    const names = (request.body as unknown[]).map((e) => (e as { event_name?: unknown } | null)?.event_name).filter((n): n is string => typeof n === 'string');
    verifier.usage.eventsSent(request.apiKey.workspaceId, names);
  });
  app.addHook('onClose', async () => verifier.usage.close());
  app.addHook('onRequest', async (request, reply) => {
    const result = await verifier.verify(request.headers.authorization);
    if (result.code !== 'VALID') {
      request.log.info({ auth: result.code }, 'ingest request refused: authentication');
      throw new IngestError('unauthorized', 'Invalid or missing API key.', { 'WWW-Authenticate': 'Bearer' });
    }
    request.apiKey = result.key;
    verifier.usage.keyUsed(result.key.keyId);
    request.log = request.log.child({ key_id: result.key.keyId, workspace_id: result.key.workspaceId });
    const decision = await limiter.consume(result.key.workspaceId, result.key.plan);
    if (decision.policy) {
      reply.header('RateLimit-Policy', decision.policy);
      reply.header('RateLimit-Limit', String(decision.limit));
      reply.header('RateLimit-Remaining', String(decision.remaining));
      reply.header('RateLimit-Reset', String(decision.resetSeconds));
    }
    if (!decision.allowed) {
      throw new IngestError(
        'rateLimited',
        `The workspace's plan allows ${decision.policy.split(';')[0]} requests per second; try again later, in ${decision.resetSeconds} s.`,
        { 'Retry-After': String(decision.resetSeconds) },
      );
    }
  });
}
