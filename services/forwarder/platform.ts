/**
 * Composes the platform side of the service for one process: the client, the token cipher, the repositories, and
 * per role the intake + sender (forwarder), the refresher + revocation retries (refresher), and the connection
 * routes + OAuth callback (console). service.ts calls it and hands the routes to buildApp.
 */
import { hostname } from 'node:os';
import type { FastifyInstance } from 'fastify';
import { oauthCallbackRoutes } from '../console/oauth-callback.js';
import { connectionProblemPages } from '../console/connection-problems.js';
import { connectionRoutes } from '../console/routes/connection.js';
import { consoleWebPlugin } from '../console/web/plugin.js';
import { WorkspaceRepo } from '../console/workspace-repo.js';
import type { Config } from '../shared/config.js';
import type { Db } from '../shared/db/db.js';
import { randomBase62 } from '../shared/ids.js';
import type { Logger } from '../shared/logger.js';
import type { EmbeddedLog } from '../shared/runtime/embedded-log.js';
import { ConnectionRepo } from './connection-repo.js';
import { ConversionIntake } from './intake.js';
import { OAuthFlow } from './oauth-flow.js';
import { OutboxRepo } from './outbox-repo.js';
import { PlatformClient } from './platform-client.js';
import { TokenRefresher } from './refresher.js';
import { Revoker } from './revoker.js';
import { ForwardSender } from './sender.js';
import { TokenCipher } from './token-cipher.js';

export interface PlatformRoles {
  /** Intake of conversions.ready and the sender. */
  readonly forwarder: boolean;
  /** The background token refresher and revocation retries. */
  readonly refresher: boolean;
  /** The admin connection routes and the OAuth callback. */
  readonly console: boolean;
}

export interface PlatformSide {
  readonly connections: ConnectionRepo;
  readonly outbox: OutboxRepo;
  readonly flow: OAuthFlow;
  readonly refresher: TokenRefresher;
  readonly intake: ConversionIntake | undefined;
  readonly sender: ForwardSender | undefined;
  /** For buildApp's adminExtensions (empty without the console role). */
  readonly adminExtensions: ReadonlyArray<(app: FastifyInstance) => void>;
  /** For buildApp's publicExtensions: the OAuth callback and the connection problem pages. */
  readonly publicExtensions: ReadonlyArray<(app: FastifyInstance) => void | Promise<void>>;
  start(): void;
  /** Stops the loops; batches and refreshes in flight finish first. */
  close(): Promise<void>;
}

export function createPlatformSide(deps: {
  readonly config: Config;
  readonly db: Db;
  readonly log: EmbeddedLog;
  readonly credentialsKey: Buffer;
  readonly logger: Logger;
  readonly roles: PlatformRoles;
  /**
   * Whether conversions.ready is the embedded log (true) or a Kafka topic (false: the Kafka runtime's
   * KafkaConversionIntake files conversions into the same outbox instead).
   */
  readonly embeddedIntake: boolean;
}): PlatformSide {
  const { config, db, log, roles } = deps;
  const f = config.forwarder;
  const logger = deps.logger.child({ component: 'platform' });
  const owner = `${hostname()}:${process.pid}:${randomBase62(8)}`;
  // A lease must outlive the platform call it protects, or a second holder could start the same work.
  const leaseMs = f.requestTimeoutMs * 2 + 1_000;
  const backoff = { baseMs: f.retryBaseMs, maxMs: f.retryMaxMs };

  const cipher = new TokenCipher(config.credentialsKeyId, deps.credentialsKey, config.previousCredentialsKeys);
  const client = new PlatformClient({
    apiBase: config.platform.apiBase,
    appId: config.platform.appId,
    appSecret: config.platform.appSecret,
    timeoutMs: f.requestTimeoutMs,
  });
  const connections = new ConnectionRepo(db, cipher);
  const outbox = new OutboxRepo(db);
  const revoker = new Revoker({ db, cipher, client, logger, backoff, leaseMs });
  const refresher = new TokenRefresher({
    connections,
    client,
    revoker,
    logger,
    owner,
    intervalMs: f.refreshIntervalMs,
    leaseMs,
    backoff,
  });
  const sender = roles.forwarder
    ? new ForwardSender({
        db,
        connections,
        outbox,
        client,
        refresher,
        logger,
        owner,
        options: {
          lingerMs: f.lingerMs,
          batchSize: f.batchSize,
          concurrency: f.concurrency,
          leaseMs,
          backoff,
          ledgerRetentionMs: f.ledgerRetentionMs,
          parkMaxAgeMs: f.parkMaxAgeMs,
        },
      })
    : undefined;
  const intake = roles.forwarder && deps.embeddedIntake ? new ConversionIntake({ db, log, logger, onQueued: () => sender?.wake() }) : undefined;
  const flow = new OAuthFlow({
    db,
    cipher,
    client,
    connections,
    logger,
    publicBaseUrl: config.publicBaseUrl,
    authUrl: config.platform.authUrl,
    onConnected: () => sender?.wake(),
  });
  const workspaces = new WorkspaceRepo(db);

  return {
    connections,
    outbox,
    flow,
    refresher,
    intake,
    sender,
    adminExtensions: roles.console
      ? [(app) => connectionRoutes(app, { workspaces, connections, flow, revoker, publicBaseUrl: config.publicBaseUrl })]
      : [],
    publicExtensions: roles.console
      ? [
          (app) => oauthCallbackRoutes(app, { flow }),
          connectionProblemPages,
          // The workspace settings console at /console, in its own scope (its sessions, CSRF and CSP cover only it).
          (app) =>
            consoleWebPlugin(app, {
              db,
              publicBaseUrl: config.publicBaseUrl,
              platformAuthUrl: config.platform.authUrl,
              secretKey: deps.credentialsKey,
              flow,
              connections,
              revoker,
              plans: Object.keys(config.planLimits),
            }),
        ]
      : [],
    start() {
      intake?.start();
      sender?.start();
      if (roles.refresher) refresher.start();
    },
    async close() {
      await intake?.stop();
      await sender?.stop();
      await refresher.stop();
    },
  };
}
