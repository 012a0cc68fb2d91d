/**
 * The token refresher: renews access tokens ahead of expiry (refreshLeadMs), one refresh per connection at a time
 * across replicas (the row lease in ConnectionRepo.leaseForRefresh), storing the rotated refresh token in the same
 * UPDATE as the new access token. A refresh refused as invalid flips the connection to needs_reauth (its
 * conversions stay parked in the outbox); a transient failure retries with backoff. The sender calls refreshNow()
 * when the platform answers an events call with a token code.
 */
import type { Logger } from '../shared/logger.js';
import { retryDelayMs, type BackoffPolicy } from './backoff.js';
import { classify } from './classify.js';
import type { LeasedConnection } from './connection-credentials.js';
import type { ConnectionRepo } from './connection-repo.js';
import { BackgroundLoop } from './loop.js';
import { forwardedConversions, tokenRefreshes } from './metrics.js';
import { parseTokenGrant, type PlatformClient } from './platform-client.js';
import type { Revoker } from './revoker.js';

/**
 * refreshed: new tokens stored · invalid: the grant is gone, connection now needs_reauth · transient: try later ·
 * rejected: the platform refused for another reason (e.g. the app's credentials), try later ·
 * busy: another refresher holds the lease · not_due: not yet time (without force) · not_connected: nothing to
 * refresh (not connected, or no refresh token) · lease_lost: refreshed, but the
 * connection changed meanwhile (reconnected or disconnected), nothing stored.
 */
export type RefreshOutcome =
  | 'refreshed'
  | 'invalid'
  | 'transient'
  | 'rejected'
  | 'busy'
  | 'not_due'
  | 'not_connected'
  | 'lease_lost';

export interface RefresherDeps {
  readonly connections: ConnectionRepo;
  readonly client: PlatformClient;
  readonly revoker: Revoker;
  readonly logger: Logger;
  /** Identifies this refresher in row leases (unique per process and instance). */
  readonly owner: string;
  readonly intervalMs: number;
  /** Longer than a platform call can take: the lease must outlive the call it protects. */
  readonly leaseMs: number;
  readonly backoff: BackoffPolicy;
  /** Called when a connection parked for unreadable credentials is connected again (wakes the sender). */
  readonly onRestored?: (workspaceId: string) => void;
}

const RESEAL_EVERY_MS = 60_000;
/** How often connections parked for unreadable credentials are tried again (the key may have been fixed). */
const RESTORE_EVERY_MS = 5_000;

export class TokenRefresher {
  private readonly loop: BackgroundLoop;
  private lastReseal = 0;
  private lastRestore = 0;

  constructor(private readonly deps: RefresherDeps) {
    this.loop = new BackgroundLoop('token-refresher', deps.intervalMs, () => this.tick(), deps.logger);
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One pass: refresh what is due, retry due revocations, keep the key rotation current. */
  async tick(): Promise<void> {
    const due = await this.deps.connections.refresh.dueForRefresh(50);
    for (const ws of due) await this.refreshNow(ws);
    await this.deps.revoker.runDue();
    // forwarder_connections is read from the database at scrape time (shared/metrics-scrape.ts).
    const now = Date.now();
    if (now - this.lastRestore >= RESTORE_EVERY_MS) {
      this.lastRestore = now;
      const restored = await this.deps.connections.credentials.restoreReadable(100);
      if (restored.length > 0) {
        this.deps.logger.info({ workspaces: restored }, 'stored credentials open again: connections restored');
        for (const ws of restored) this.deps.onRestored?.(ws);
      }
    }
    if (now - this.lastReseal >= RESEAL_EVERY_MS) {
      this.lastReseal = now;
      const n = await this.deps.connections.credentials.resealStale(100);
      if (n > 0) this.deps.logger.info({ connections: n }, 're-sealed tokens under the current credentials key');
    }
  }

  /**
   * Refreshes one connection if this refresher gets its lease. `force` skips the "is it due" check (the sender's
   * case: the platform said the token is expired or invalid).
   */
  async refreshNow(workspaceId: string, opts: { force?: boolean } = {}): Promise<RefreshOutcome> {
    const { connections, client, logger, owner } = this.deps;
    const leased = await connections.refresh.leaseForRefresh(workspaceId, owner, this.deps.leaseMs, opts);
    if (!leased) return connections.refresh.whyNotLeased(workspaceId);
    const log = logger.child({ workspace: workspaceId });
    const answer = await client.refresh(leased.refreshToken!);
    const c = classify(answer);
    if (c.kind === 'ok') {
      const grant = parseTokenGrant(answer.data);
      if (typeof grant === 'string') return this.failed(leased, 'transient', grant);
      if (await connections.refresh.storeRefreshed(leased, owner, grant)) {
        tokenRefreshes.inc({ outcome: 'ok' });
        log.debug({ expires_in: grant.expiresIn, rotated: grant.refreshToken !== undefined }, 'access token refreshed');
        return 'refreshed';
      }
      // The connection changed while the call was out: the new token belongs to no one. If the workspace
      // disconnected, revoke it like the old one.
      tokenRefreshes.inc({ outcome: 'lease_lost' });
      const id = await connections.queueRevocationIfDisconnected(workspaceId, grant.accessToken);
      if (id !== null) await this.deps.revoker.attempt(id);
      log.warn('refreshed token not stored: the connection changed meanwhile');
      return 'lease_lost';
    }
    if (c.kind === 'token') {
      const parked = await connections.markNeedsReauth(workspaceId, leased.generation, `refresh refused: ${answer.code} ${answer.message}`.trim());
      tokenRefreshes.inc({ outcome: 'invalid' });
      if (parked !== null) {
        if (parked > 0) forwardedConversions.inc({ outcome: 'parked', code: c.reason }, parked);
        log.warn({ code: answer.code, parked }, 'refresh refused as invalid: connection needs re-authorization');
      }
      return 'invalid';
    }
    if (c.kind === 'retry') return this.failed(leased, 'transient', `${c.reason}: ${answer.message}`, c.retryAfterMs);
    // Permanent for the platform, but not the customer's doing (e.g. the app's secret is wrong): keep trying with
    // backoff rather than forcing every workspace to reconnect.
    return this.failed(leased, 'rejected', `${c.code}: ${c.message}`);
  }

  private async failed(
    leased: LeasedConnection,
    outcome: 'transient' | 'rejected',
    reason: string,
    retryAfterMs: number | null = null,
  ): Promise<RefreshOutcome> {
    const failures = await this.deps.connections.refresh.refreshFailures(leased.workspaceId);
    const delay = retryDelayMs(failures, this.deps.backoff, retryAfterMs);
    await this.deps.connections.refresh.refreshFailed(leased, this.deps.owner, delay, `refresh failed: ${reason}`.slice(0, 500));
    tokenRefreshes.inc({ outcome });
    const level = outcome === 'rejected' ? 'error' : 'warn';
    this.deps.logger[level]({ workspace: leased.workspaceId, reason, failures: failures + 1, retry_in_ms: delay }, 'token refresh failed; will retry');
    return outcome;
  }
}
