/**
 * Composes the platform side of the service for one process: the client, the token cipher, the repositories, and
 * per role the intake stage + sender (forwarder), the refresher + revocation retries (refresher), and the connection
 * routes + OAuth callback (console). service.ts calls it and hands the routes to buildApp.
 */
import { hostname } from 'node:os';
import type { FastifyInstance } from 'fastify';
import { oauthCallbackRoutes } from '../console/oauth-callback.js';
import { connectionProblemPages } from '../console/connection-problems.js';
import { connectionRoutes } from '../console/routes/connection.js';
import { consoleWebPlugin, type ConsoleDeadLetters } from '../console/web/plugin.js';
import { WorkspaceRepo } from '../console/workspace-repo.js';
import type { Config } from '../shared/config.js';
import type { Db } from '../shared/db/db.js';
import { randomBase62 } from '../shared/ids.js';
import type { Logger } from '../shared/logger.js';
import type { Stage } from '../stream/contract.js';
import { CREDENTIALS_UNREADABLE } from '../forwarder/connection-credentials.js';
import { ConnectionRepo } from '../forwarder/connection-repo.js';
import { connectionFaults, forwardedConversions } from '../forwarder/metrics.js';
import { createForwarderIntake } from '../forwarder/intake.js';
import { OAuthFlow } from '../forwarder/oauth-flow.js';
import { OutboxRepo } from '../forwarder/outbox-repo.js';
import { PlatformClient } from '../forwarder/platform-client.js';
import { TokenRefresher } from '../forwarder/refresher.js';
import { Revoker } from '../forwarder/revoker.js';
import { ForwardSender } from '../forwarder/sender.js';
import { TokenCipher } from '../forwarder/token-cipher.js';
import type { DestinationKind } from '../forwarder/destinations/kind.js';
import { MetaClient, metaKind, type MetaSetup } from '../forwarder/destinations/meta.js';
import { GoogleClient, googleKind, parseGoogleGrant, type GoogleSetup } from '../forwarder/destinations/google.js';
import type { RefreshOutcome } from '../forwarder/destinations/sender.js';
import { DestinationRepo, type Destination } from '../forwarder/destinations/repo.js';
import { DestinationSender } from '../forwarder/destinations/sender.js';
import { refreshTiktok, tiktokDestinationKind } from '../forwarder/destinations/tiktok.js';
import type { ForwardingSetupInput } from '../domain/forwarding-setup.js';
import { DestinationFlow } from '../forwarder/destinations/flow.js';
import { destinationRoutes } from '../console/routes/destinations.js';
import { DeliveryRepo } from '../forwarder/delivery-repo.js';
import { destinationCallbackRoutes } from '../console/destination-callback.js';

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
  readonly deliveries: DeliveryRepo;
  readonly flow: OAuthFlow;
  readonly refresher: TokenRefresher;
  /** The intake stage on conversions.ready (forwarder role): the runtime drives it like the pipeline's stages. */
  readonly intake: Stage<unknown, never> | undefined;
  readonly sender: ForwardSender | undefined;
  /** The workspace's other destinations (beyond its first TikTok one), their clients and their sender. */
  readonly destinations: DestinationRepo;
  readonly metaClient: MetaClient;
  readonly googleClient: GoogleClient;
  readonly destinationSender: DestinationSender | undefined;
  /** Connecting a destination in the browser (the console's routes drive it; tests too). */
  readonly destinationFlow: DestinationFlow;
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
  readonly credentialsKey: Buffer;
  readonly logger: Logger;
  readonly roles: PlatformRoles;
  /** The data-team redrive for the console's Activity page (bound once the runtime is open). */
  readonly consoleDeadLetters?: () => ConsoleDeadLetters | undefined;
}): PlatformSide {
  const { config, db, roles } = deps;
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
  const connections = new ConnectionRepo(db, cipher, (workspace, parked, reason) => {
    connectionFaults.inc({ reason: CREDENTIALS_UNREADABLE });
    if (parked > 0) forwardedConversions.inc({ outcome: 'parked', code: CREDENTIALS_UNREADABLE }, parked);
    logger.error({ workspace, parked, reason }, 'stored credentials cannot be opened: connection parked');
  });
  const outbox = new OutboxRepo(db);
  const deliveries = new DeliveryRepo(db);
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
    onRestored: () => sender?.wake(),
  });
  // The first TikTok destination's sender and the other destinations' send on the same terms.
  const senderOptions = {
    lingerMs: f.lingerMs,
    batchSize: f.batchSize,
    concurrency: f.concurrency,
    leaseMs,
    backoff,
    ledgerRetentionMs: f.ledgerRetentionMs,
    parkMaxAgeMs: f.parkMaxAgeMs,
  };
  const sender = roles.forwarder
    ? new ForwardSender({
        db,
        connections,
        outbox,
        deliveries,
        client,
        refresher,
        logger,
        owner,
        options: senderOptions,
      })
    : undefined;
  const destinations = new DestinationRepo(db, cipher);
  const metaClient = new MetaClient({
    apiBase: config.meta.apiBase,
    appId: config.meta.appId,
    appSecret: config.meta.appSecret,
    timeoutMs: f.requestTimeoutMs,
  });
  const googleClient = new GoogleClient({
    apiBase: config.google.apiBase,
    tokenUrl: config.google.tokenUrl,
    revokeUrl: config.google.revokeUrl,
    clientId: config.google.clientId,
    clientSecret: config.google.clientSecret,
    timeoutMs: f.requestTimeoutMs,
  });
  const kindFor = (d: Destination): DestinationKind | null => {
    if (d.kind === 'meta') return metaClient.configured ? metaKind(metaClient, d.setup as unknown as MetaSetup) : null;
    if (d.kind === 'google') return googleClient.configured ? googleKind(googleClient, d.setup as unknown as GoogleSetup) : null;
    if (d.kind === 'tiktok') return client.configured ? tiktokDestinationKind(client, d.setup as unknown as ForwardingSetupInput, d.timeZone) : null;
    return null;
  };
  const refreshDestination = async (d: Destination, refreshToken: string): Promise<RefreshOutcome> => {
    if (d.kind === 'tiktok' && client.configured) return refreshTiktok(client, refreshToken);
    if (d.kind !== 'google' || !googleClient.configured) return { error: `a ${d.kind} destination has no refresh here`, transient: false };
    const answer = await googleClient.refresh(refreshToken);
    const grant = parseGoogleGrant(answer);
    if (!('error' in grant)) return { accessToken: grant.accessToken, expiresIn: grant.expiresIn };
    // No answer, throttling or a server error: the grant may well be fine.
    const transient = answer.transportError !== null || answer.httpStatus === 429 || answer.httpStatus >= 500;
    return { error: grant.error, transient };
  };
  const destinationSender = roles.forwarder
    ? new DestinationSender({
        destinations,
        deliveries,
        kindFor,
        refresh: refreshDestination,
        logger,
        owner,
        options: senderOptions,
      })
    : undefined;
  const intake = roles.forwarder
    ? createForwarderIntake({
        onQueued: () => {
          sender?.wake();
          destinationSender?.wake();
        },
      })
    : undefined;
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
  const destinationFlow = new DestinationFlow({
    db,
    cipher,
    destinations,
    tiktok: client,
    tiktokAuthUrl: config.platform.authUrl,
    meta: metaClient,
    metaAuthUrl: config.meta.authUrl,
    google: googleClient,
    googleAuthUrl: config.google.authUrl,
    publicBaseUrl: config.publicBaseUrl,
    logger,
    onConnected: () => destinationSender?.wake(),
  });

  return {
    connections,
    outbox,
    deliveries,
    flow,
    refresher,
    intake,
    sender,
    destinations,
    metaClient,
    googleClient,
    destinationSender,
    destinationFlow,
    adminExtensions: roles.console
      ? [
          (app) => connectionRoutes(app, { workspaces, connections, flow, revoker, publicBaseUrl: config.publicBaseUrl }),
          (app) =>
            destinationRoutes(app, {
              db,
              workspaces,
              destinations,
              destinationFlow,
              meta: metaClient,
              google: googleClient,
              tiktok: client,
              connections,
              flow,
              revoker,
              publicBaseUrl: config.publicBaseUrl,
            }),
        ]
      : [],
    publicExtensions: roles.console
      ? [
          (app) => oauthCallbackRoutes(app, { flow, secureCookies: config.publicBaseUrl.startsWith('https:') }),
          connectionProblemPages,
          (app) => destinationCallbackRoutes(app, { flow: destinationFlow, secureCookies: config.publicBaseUrl.startsWith('https:') }),
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
              destinations,
              destinationFlow,
              meta: metaClient,
              google: googleClient,
              tiktok: client,
              destinationAuthUrls: [config.meta.authUrl, config.google.authUrl],
              plans: Object.keys(config.planLimits),
              explanationRetentionMs: config.privacy.explanationRetentionMs,
              deadLetters: deps.consoleDeadLetters,
            }),
        ]
      : [],
    start() {
      sender?.start();
      destinationSender?.start();
      if (roles.refresher) refresher.start();
    },
    async close() {
      await sender?.stop();
      await destinationSender?.stop();
      await refresher.stop();
    },
  };
}
