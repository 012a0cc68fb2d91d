/**
 * Composes the whole service for one process from its config: the runtime (embedded default, or Kafka), the
 * database, the HTTP surface and the roles this process runs. main.ts calls it; tests call it too.
 */
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { forwardingRoutes } from './console/routes/forwarding.js';
import { pipelineRoutes } from './console/routes/pipeline.js';
import { createPlatformSide, type PlatformSide } from './forwarder/platform.js';
import { ApiKeyVerifier } from './gateway/auth/api-key-verifier.js';
import { createRateLimiter } from './gateway/rate-limit.js';
import { pipelineStages } from './pipeline.js';
import type { Config, ServiceRole } from './shared/config.js';
import { resolveCredentialsKey } from './shared/credentials-key.js';
import type { Db } from './shared/db/db.js';
import { openDatabase } from './shared/db/open.js';
import type { Logger } from './shared/logger.js';
import { EmbeddedLog } from './shared/runtime/embedded-log.js';
import { EmbeddedStageRunner } from './shared/runtime/embedded-runner.js';

export interface RunningService {
  readonly app: FastifyInstance;
  readonly db: Db;
  readonly log: EmbeddedLog | undefined;
  readonly runners: ReadonlyArray<EmbeddedStageRunner<unknown, unknown>>;
  /** The ad platform side: forwarder, token refresher, connection routes (docs/platform.md). */
  readonly platform: PlatformSide;
  /** Stops taking requests, finishes in-flight work, closes everything. */
  close(): Promise<void>;
}

const runs = (role: ServiceRole, ...roles: ServiceRole[]): boolean => role === 'all' || roles.includes(role);

export async function startService(config: Config, logger: Logger, opts: { inMemoryDb?: boolean } = {}): Promise<RunningService> {
  if (config.kafka) {
    throw new Error('the Kafka runtime is configured (KAFKA_BROKERS) but not available in this build');
  }
  const db = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, inMemory: opts.inMemoryDb });
  const credentialsKey = resolveCredentialsKey(config.credentialsKey, config.dataDir, logger);
  const log = new EmbeddedLog(db);
  const platform = createPlatformSide({
    config,
    db,
    log,
    credentialsKey,
    logger,
    roles: {
      forwarder: runs(config.role, 'forwarder'),
      refresher: runs(config.role, 'refresher'),
      console: runs(config.role, 'console'),
    },
  });
  const rateLimit = await createRateLimiter(config, (message) =>
    logger.warn({ err: message }, 'redis unavailable; rate limits fall back to this process'),
  );

  const runners = runs(config.role, 'dedupe', 'enrich', 'forwarder')
    ? pipelineStages({ dedupeWindowMs: config.dedupeWindowMs }).map(
        (p) => new EmbeddedStageRunner(db, log, p, { logger: logger.child({ stage: p.name }) }),
      )
    : [];

  const app = await buildApp({
    config,
    db,
    logger,
    ingest: runs(config.role, 'gateway')
      ? {
          producer: log,
          verifier: new ApiKeyVerifier(db),
          limiter: rateLimit.limiter,
          runtime: 'embedded',
        }
      : undefined,
    admin: runs(config.role, 'console'),
    adminExtensions: [(scope) => forwardingRoutes(scope, { db }), (scope) => pipelineRoutes(scope, { db }), ...platform.adminExtensions],
    publicExtensions: [...platform.publicExtensions],
  });
  for (const r of runners) r.start();
  platform.start();

  return {
    app,
    db,
    log,
    runners,
    platform,
    async close() {
      await app.close(); // stops accepting, waits for in-flight requests
      await log.close(); // finishes queued appends
      await Promise.all(runners.map((r) => r.stop()));
      await platform.close(); // batches and refreshes in flight finish
      rateLimit.close();
      await db.close();
    },
  };
}
