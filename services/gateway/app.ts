/** The ingestion gateway: endpoints A and B behind the deadline, API-key auth and per-workspace rate limits. */
import type { FastifyInstance } from 'fastify';
import type { EventLogProducer } from '../stream/log.js';
import type { ApiKeyVerifier } from './auth/api-key-verifier.js';
import { registerIngestAuth } from './auth/hook.js';
import { registerDeadline } from './deadline.js';
import { registerOverloadShedding, type OverloadLimits } from './overload.js';
import type { WorkspaceRateLimiter } from './rate-limit.js';
import { eventsRoute } from './routes/v1/events.js';
import { sgtmRoute } from './routes/v1/sgtm.js';
import { LIMITS } from './validation/limits.js';

export interface GatewayDeps {
  readonly producer: EventLogProducer;
  readonly verifier: ApiKeyVerifier;
  readonly limiter: WorkspaceRateLimiter;
  /** Label for metrics: `embedded` or `kafka`. */
  readonly runtime: string;
  /** Overload shedding limits (config: GATEWAY_MAX_*). */
  readonly overload: OverloadLimits;
}

export async function gatewayPlugin(app: FastifyInstance, deps: GatewayDeps): Promise<void> {
  // Ingestion takes JSON only: without the text/plain parser, any other Content-Type is a 415.
  app.removeContentTypeParser('text/plain');
  await registerOverloadShedding(app, deps.overload, LIMITS.requestDeadlineMs);
  registerDeadline(app, LIMITS.requestDeadlineMs);
  registerIngestAuth(app, deps.verifier, deps.limiter);
  eventsRoute(app, deps);
  sgtmRoute(app, deps);
}
