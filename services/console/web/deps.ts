/**
 * What the console's pages are given by the service (compose/platform.ts): the database, the platform side's
 * repositories, flows and clients, and the data-team redrive once the runtime is open.
 */
import type { ConnectionRepo } from '../../forwarder/connection-repo.js';
import type { DestinationFlow } from '../../forwarder/destinations/flow.js';
import type { GoogleClient } from '../../forwarder/destinations/google.js';
import type { MetaClient } from '../../forwarder/destinations/meta.js';
import type { DestinationRepo } from '../../forwarder/destinations/repo.js';
import type { OAuthFlow } from '../../forwarder/oauth-flow.js';
import type { PlatformClient } from '../../forwarder/platform-client.js';
import type { Revoker } from '../../forwarder/revoker.js';
import type { Db } from '../../shared/db/db.js';
import type { AccountThrottleLimits } from './sign-in-throttle.js';

export interface ConsoleWebDeps {
  readonly db: Db;
  readonly publicBaseUrl: string;
  /** The platform's authorize page: the Connect form redirects there, so the CSP's form-action must allow it. */
  readonly platformAuthUrl: string;
  /** Secret material the session cookie's signing key is derived from (CREDENTIALS_KEY). */
  readonly secretKey: Buffer;
  readonly flow: OAuthFlow;
  readonly connections: ConnectionRepo;
  readonly revoker: Revoker;
  /** The workspace's other destinations, their connect flow, and the clients their disconnection revokes with. */
  readonly destinations: DestinationRepo;
  readonly destinationFlow: DestinationFlow;
  readonly meta: MetaClient;
  readonly google: GoogleClient;
  readonly tiktok: PlatformClient;
  /** Those platforms' authorize pages (Meta, Google): a Connect form redirects there too. */
  readonly destinationAuthUrls: readonly string[];
  readonly plans: readonly string[];
  /** Sign-in attempts per client address per minute. */
  readonly signInAttemptsPerMinute?: number;
  /** The per-account pace of sign-in attempts (sign-in-throttle.ts; its defaults when unset). */
  readonly signInAccountLimits?: AccountThrottleLimits;
  /** How long a conversion's "why this field" record is shown (CONVERSION_EXPLANATION_RETENTION_DAYS). */
  readonly explanationRetentionMs?: number;
  /** The data-team redrive (services/datateam), bound once the runtime is open; undefined: the page is read-only. */
  readonly deadLetters?: () => ConsoleDeadLetters | undefined;
}

/** What the Activity page's "Redrive" asks of the service: the admin API's redrive, by id or all, audited as the user. */
export interface ConsoleDeadLetters {
  redrive(
    workspaceId: string,
    selection: { readonly ids: readonly string[] } | { readonly all: true },
    actor: string,
  ): Promise<{ redriven: number; failed: ReadonlyArray<{ id: string; error: string }> } | { refused: string }>;
  /** "Redrive shown" of the Deliveries section: the dead and refused among these delivery records, audited as the user. */
  redriveDeliveries(workspaceId: string, deliveryIds: readonly number[], actor: string): Promise<{ redriven: number; failed: ReadonlyArray<{ id: string; error: string }> }>;
}
