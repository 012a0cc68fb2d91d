/**
 * Composes the whole service for one process from its config: the runtime (embedded default, or Kafka), the
 * database, the HTTP surface and the roles this process runs. main.ts calls it; tests call it too.
 */
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { forwardingRoutes } from '../console/routes/forwarding.js';
import { pipelineRoutes } from '../console/routes/pipeline.js';
import { createPlatformSide, type PlatformSide } from './platform.js';
import { ApiKeyVerifier } from '../gateway/auth/api-key-verifier.js';
import { createRateLimiter } from '../gateway/rate-limit.js';
import { pipelineStages } from './pipeline.js';
import type { Config, ServiceRole } from '../shared/config.js';
import { resolveCredentialsKey } from '../shared/credentials-key.js';
import type { Db } from '../shared/db/db.js';
import { openDatabase } from '../shared/db/open.js';
import type { Logger } from '../shared/logger.js';
import type { StageRunner } from '../stream/contract.js';
import type { EmbeddedLog } from '../stream/embedded/log.js';
import { openRuntime } from './runtime.js';
import { replayRoutes } from '../replay/routes.js';
import { ReplayWorker } from '../replay/worker.js';
import { ReplayRepo, viewOf } from '../replay/jobs.js';
import { createForwarderIntake } from '../forwarder/intake.js';
import { DeadLetterRepo } from '../datateam/dead-letter-repo.js';
import { NotDeadLetters, Redriver, UnknownDeadLetters } from '../datateam/redrive.js';
import type { ConsoleDeadLetters } from '../console/web/plugin.js';
import { dataTeamRoutes } from '../datateam/routes.js';
import { deliveryRoutes } from '../console/routes/deliveries.js';
import { redriveDeliveries } from '../datateam/delivery-redrive.js';
import { erasureSteps } from '../privacy/erasure-steps.js';
import { ErasureWorker } from '../privacy/erasures.js';
import { startRetentionSweeper } from '../privacy/retention.js';
import { privacyRoutes } from '../privacy/routes.js';

export interface RunningService {
  readonly app: FastifyInstance;
  readonly db: Db;
  readonly log: EmbeddedLog | undefined;
  readonly runners: ReadonlyArray<StageRunner>;
  /** The ad platform side: forwarder, token refresher, connection routes (docs/platform.md). */
  readonly platform: PlatformSide;
  /** Stops taking requests, finishes in-flight work, closes everything. */
  close(): Promise<void>;
}

const runs = (role: ServiceRole, ...roles: ServiceRole[]): boolean => role === 'all' || roles.includes(role);

export async function startService(config: Config, logger: Logger, opts: { inMemoryDb?: boolean } = {}): Promise<RunningService> {
  const db = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, inMemory: opts.inMemoryDb, logger });
  const credentialsKey = resolveCredentialsKey(config.credentialsKey, config.dataDir, logger);
  // The console's redrive is the data-team redrive, which needs the runtime (opened after the platform side).
  let consoleDeadLetters: ConsoleDeadLetters | undefined;
  const platform = createPlatformSide({
    config,
    db,
    credentialsKey,
    logger,
    consoleDeadLetters: () => consoleDeadLetters,
    roles: {
      forwarder: runs(config.role, 'forwarder'),
      refresher: runs(config.role, 'refresher'),
      console: runs(config.role, 'console'),
    },
  });
  // The embedded default or Kafka (runtime.ts): the gateway's log and the stage runners, the forwarder's intake among them.
  const runtime = await openRuntime({
    config,
    db,
    logger,
    stages: () => pipelineStages({ dedupeWindowMs: config.dedupeWindowMs, graphRetentionMs: config.privacy.graphRetentionMs, forwarderIntake: platform.intake }),
    stageInputs: pipelineStages({ dedupeWindowMs: config.dedupeWindowMs, forwarderIntake: createForwarderIntake() }).map((s) => ({ stage: s.name, topic: s.input })),
  });
  const deadLetters = new DeadLetterRepo(db);
  // A redriven conversion may be for any destination: both senders look.
  const redriver = new Redriver({
    db,
    repo: deadLetters,
    log: runtime.dataTeam.redriveLog,
    onQueued: () => {
      platform.sender?.wake();
      platform.destinationSender?.wake();
    },
  });
  consoleDeadLetters = {
    async redrive(ws, selection, actor) {
      try {
        return await redriver.redriveSelection(ws, selection, actor);
      } catch (err) {
        if (err instanceof UnknownDeadLetters || err instanceof NotDeadLetters) return { refused: err.message };
        throw err;
      }
    },
    redriveDeliveries: (ws, deliveryIds, actor) =>
      redriveDeliveries({ db, deliveries: platform.deliveries, deadLetters, redriver }, ws, { deliveryIds }, actor),
  };
  const log = runtime.log;
  // Privacy (docs/privacy.md): erasure jobs and the retention sweep run with the admin API.
  const privacyRole = runs(config.role, 'console');
  const erasures = new ErasureWorker({ db, steps: erasureSteps(runtime.kind, runtime.dataTeam.redriveLog), logger, pollMs: config.privacy.erasurePollMs });
  const rateLimit = await createRateLimiter(config, (message) =>
    logger.warn({ err: message }, 'redis unavailable; rate limits fall back to this process'),
  );

  const app = await buildApp({
    config,
    db,
    logger,
    ingest:
      runs(config.role, 'gateway') && runtime.producer
        ? {
            producer: runtime.producer,
            verifier: new ApiKeyVerifier(db),
            limiter: rateLimit.limiter,
            runtime: runtime.kind,
          }
        : undefined,
    admin: runs(config.role, 'console'),
    adminExtensions: [
      (scope) => forwardingRoutes(scope, { db }),
      (scope) =>
        pipelineRoutes(scope, {
          runtime: runtime.kind,
          positions: runtime.dataTeam.positions,
          deadLetters,
          listRunningReplays: async () => (await new ReplayRepo(db).active()).map(viewOf),
        }),
      (scope) =>
        dataTeamRoutes(scope, { db, deadLetters, redriver, acceptedEvents: runtime.dataTeam.acceptedEvents, topicRecords: runtime.dataTeam.topicRecords }),
      (scope) => deliveryRoutes(scope, { db, deliveries: platform.deliveries, deadLetters, redriver }),
      (scope) => replayRoutes(scope, { db, rawLogRetentionMs: config.rawLogRetentionMs }),
      (scope) => privacyRoutes(scope, { db, onErasure: () => erasures.wake(), explanationRetentionMs: config.privacy.explanationRetentionMs }),
      ...platform.adminExtensions,
    ],
    publicExtensions: [...platform.publicExtensions],
  });
  await runtime.start();
  platform.start();
  // Replays run where enrich runs (the embedded default: in the one process).
  const replays = runs(config.role, 'enrich')
    ? new ReplayWorker({
        db,
        reader: runtime.rangeReader,
        logger: logger.child({ component: 'replay' }),
        maxEventsPerSecond: config.replay.maxEventsPerSecond,
        liveBacklog: () => runtime.liveBacklog(),
        onQueued: () => platform.sender?.wake(),
      })
    : undefined;
  replays?.start();
  if (privacyRole) erasures.start();
  const sweeper = privacyRole ? startRetentionSweeper(db, config.privacy, logger) : undefined;

  return {
    app,
    db,
    log: runtime.kind === 'embedded' ? log : undefined,
    runners: runtime.runners,
    platform,
    async close() {
      await app.close(); // stops accepting, waits for in-flight requests
      await replays?.stop(); // the chunk in flight commits; the job is handed back for the next start
      await runtime.closeProducer(); // finishes queued appends
      await runtime.close(); // stages finish their batches in flight
      await log.close();
      await platform.close(); // batches and refreshes in flight finish
      await erasures.close(); // a running erasure finishes
      await sweeper?.stop();
      rateLimit.close();
      await db.close();
    },
  };
}
