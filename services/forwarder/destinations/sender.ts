/**
 * The sender of the workspace's other destinations (repo.ts): like the TikTok sender (../sender.ts), per
 * destination, batches of one pixel and test code from its outbox, sent through its kind (deliverBatch), each
 * destination under its own row lease and backoff, FORWARDER_CONCURRENCY of them at once. A destination that is
 * down, throttled or refusing backs off alone: the others are picked on the next tick as usual.
 */
import type { Logger } from '../../shared/logger.js';
import { retryDelayMs, type BackoffPolicy } from '../backoff.js';
import { codeLabel } from '../classify.js';
import { DrainLoop } from '../loop.js';
import { destinationConversions, endToEndLatency } from '../metrics.js';
import { deliverBatch } from './deliver.js';
import type { DestinationKind } from './kind.js';
import type { Destination, DestinationRepo, DestinationRow } from './repo.js';
import type { DeliveryRepo } from '../delivery-repo.js';

export interface DestinationSenderOptions {
  readonly lingerMs: number;
  readonly batchSize: number;
  readonly concurrency: number;
  readonly leaseMs: number;
  readonly backoff: BackoffPolicy;
  /** As the TikTok sender's: FORWARDER_LEDGER_RETENTION_HOURS and FORWARDER_PARK_MAX_HOURS. */
  readonly ledgerRetentionMs: number;
  readonly parkMaxAgeMs: number;
}

const PURGE_EVERY_MS = 60_000;

/**
 * A renewed access token (with the new refresh token when the platform rotates it), or why not (`transient`: try
 * again later; otherwise the grant is gone).
 */
export type RefreshOutcome =
  | { readonly accessToken: string; readonly expiresIn: number | undefined; readonly refreshToken?: string }
  | { readonly error: string; readonly transient: boolean };

/** Renews access tokens shortly before they expire, so the hourly expiry of OAuth kinds costs no refused request. */
const REFRESH_AHEAD_MS = 60_000;
/**
 * Destinations without traffic are renewed in the background this long before expiry (checked every
 * REFRESH_CHECK_MS), so their grants stay alive: TikTok's refresh tokens expire and rotate like the workspace's.
 */
const BACKGROUND_REFRESH_LEAD_MS = 5 * 60_000;
const REFRESH_CHECK_MS = 5_000;

export interface DestinationSenderDeps {
  /** Renews a destination's access token with its refresh token (kinds with `oauth_refresh`). */
  readonly refresh?: (d: Destination, refreshToken: string) => Promise<RefreshOutcome>;
  readonly destinations: DestinationRepo;
  readonly deliveries: DeliveryRepo;
  /** The kind that delivers to a destination, or null when this deployment cannot (its app is not configured). */
  readonly kindFor: (d: Destination) => DestinationKind | null;
  readonly logger: Logger;
  readonly owner: string;
  readonly options: DestinationSenderOptions;
}

export class DestinationSender {
  private readonly drains: DrainLoop;
  private lastPurge = 0;
  private lastRefreshCheck = 0;
  /** The background renewal in progress, apart from the ticks so a slow token call never holds up sending. */
  private refreshing: Promise<void> | null = null;

  constructor(private readonly deps: DestinationSenderDeps) {
    this.drains = new DrainLoop({
      name: 'destination-sender',
      lingerMs: deps.options.lingerMs,
      logger: deps.logger,
      concurrency: deps.options.concurrency,
      tick: () => this.tick(),
      drain: (id) => this.drain(id),
      // A database error or a bug: this destination backs off like after a retryable answer.
      failed: async (id, err) => {
        const delay = await this.backOffAfterError(id);
        this.deps.logger.error({ err, destination: id, retry_in_ms: delay }, 'sending to a destination failed; will retry');
      },
    });
  }

  start(): void {
    this.drains.run();
  }

  wake(): void {
    this.drains.wake();
  }

  async stop(): Promise<void> {
    await this.drains.stop();
    await this.refreshing;
  }

  /** The ledger's retention and the outbox's longest wait, once a minute. Exposed for tests. */
  async housekeeping(now = Date.now()): Promise<void> {
    if (now - this.lastPurge < PURGE_EVERY_MS) return;
    this.lastPurge = now;
    const { destinations, options, logger } = this.deps;
    const purged = await destinations.purgeLedger(options.ledgerRetentionMs);
    if (purged > 0) logger.debug({ purged }, 'destination ledgers purged');
    for (const { workspaceId, kind, n } of await destinations.expireOld(options.parkMaxAgeMs)) {
      destinationConversions.inc({ destination: kind, outcome: 'dropped', code: 'expired' }, n);
      logger.warn({ workspace: workspaceId, kind, dropped: n }, 'conversions for a destination waited longer than FORWARDER_PARK_MAX_HOURS: dropped');
    }
  }

  /**
   * Renews, under each destination's send lease (so never beside a send), the access tokens that expire within
   * BACKGROUND_REFRESH_LEAD_MS. Exposed for tests.
   */
  async refreshDue(now = Date.now()): Promise<void> {
    if (now - this.lastRefreshCheck < REFRESH_CHECK_MS || !this.deps.refresh) return;
    this.lastRefreshCheck = now;
    const { destinations: repo, owner, options } = this.deps;
    for (const id of await repo.dueForRefresh(BACKGROUND_REFRESH_LEAD_MS, 20)) {
      if (this.drains.stopping) return;
      // As a drain: a drain of this destination in this process holds the same lease owner (and renews by itself).
      await this.drains.exclusive(id, async () => {
        const leased = await repo.leaseForSending(id, owner, options.leaseMs);
        if (!leased) return;
        try {
          if (this.deps.kindFor(leased.destination)?.auth === 'oauth_refresh') await this.renew(leased.destination, leased.generation);
        } finally {
          await repo.releaseSendLease(id, owner);
        }
      });
    }
  }

  async tick(): Promise<void> {
    await this.housekeeping();
    this.refreshing ??= this.refreshDue()
      .catch((err: unknown) => this.deps.logger.error({ err }, 'renewing destination tokens failed; will retry'))
      .finally(() => {
        this.refreshing = null;
      });
    const { lingerMs, batchSize } = this.deps.options;
    if (this.drains.free <= 0 || this.drains.stopping) return;
    this.drains.drainAll(await this.deps.destinations.sendable(this.deps.owner, this.drains.free, lingerMs, batchSize, this.drains.draining));
  }

  private async backOffAfterError(id: string): Promise<number | null> {
    try {
      const failures = await this.deps.destinations.sendFailures(id);
      const delay = Math.max(this.deps.options.backoff.baseMs, retryDelayMs(failures, this.deps.options.backoff));
      await this.deps.destinations.sendBackoff(id, delay);
      await this.deps.destinations.releaseSendLease(id, this.deps.owner);
      return delay;
    } catch {
      return null;
    }
  }

  /** Sends everything ready for one destination while holding its lease. Exposed for tests. */
  async drain(id: string): Promise<void> {
    const { destinations: repo, owner, options } = this.deps;
    const leased = await repo.leaseForSending(id, owner, options.leaseMs);
    if (!leased) return;
    try {
      const kind = this.deps.kindFor(leased.destination);
      if (kind === null) {
        // Nothing can send there from this deployment: try again later rather than spin.
        await repo.sendBackoff(id, options.backoff.maxMs, leased.generation);
        this.deps.logger.warn({ destination: id, kind: leased.destination.kind }, 'destination kind is not configured here: not sending');
        return;
      }
      const limit = Math.min(options.batchSize, kind.batchLimit);
      let accessToken = leased.accessToken;
      const expires = leased.destination.accessExpiresAt;
      if (kind.auth === 'oauth_refresh' && expires !== null && expires.getTime() - Date.now() < REFRESH_AHEAD_MS) {
        const fresh = await this.renew(leased.destination, leased.generation);
        if (fresh === null) return;
        accessToken = fresh;
      }
      while (!this.drains.stopping) {
        const group = await repo.readyGroup(id, options.lingerMs, limit);
        if (!group) return;
        const rows = await repo.take(id, group, limit);
        if (rows.length === 0) return;
        const next = await this.deliver(kind, leased.destination, leased.generation, accessToken, group, rows);
        if (next === null) return;
        accessToken = next;
        if (!(await repo.renewSendLease(id, owner, leased.generation, options.leaseMs))) return;
      }
    } finally {
      await repo.releaseSendLease(id, owner);
    }
  }

  /**
   * A fresh access token from the refresh token, stored; null when there is none now (the destination then backs
   * off after a transient failure, or needs re-authorisation when the grant is gone).
   */
  private async renew(d: Destination, generation: number): Promise<string | null> {
    const repo = this.deps.destinations;
    const refreshToken = await repo.refreshToken(d.id);
    const outcome: RefreshOutcome =
      refreshToken === null || !this.deps.refresh ? { error: 'no refresh token', transient: false } : await this.deps.refresh(d, refreshToken);
    if ('accessToken' in outcome) {
      if (!(await repo.storeRefreshed(d.id, generation, outcome.accessToken, outcome.expiresIn, outcome.refreshToken))) return null;
      this.deps.logger.info({ destination: d.id }, 'destination access token refreshed');
      return outcome.accessToken;
    }
    if (outcome.transient) {
      await repo.sendBackoff(d.id, retryDelayMs(await repo.sendFailures(d.id), this.deps.options.backoff), generation);
      this.deps.logger.warn({ destination: d.id, reason: outcome.error }, 'destination token refresh failed; will retry');
    } else if (await repo.markNeedsReauth(d.id, generation, `token refresh refused: ${outcome.error}`)) {
      this.deps.logger.warn({ destination: d.id, reason: outcome.error }, 'destination needs re-authorization');
    }
    return null;
  }

  /** One batch; the access token to go on with, or null when the destination must stop for now. */
  private async deliver(
    kind: DestinationKind,
    d: Destination,
    generation: number,
    accessToken: string,
    group: Parameters<DestinationKind['request']>[0],
    rows: DestinationRow[],
  ): Promise<string | null> {
    const repo = this.deps.destinations;
    let token = accessToken;
    const log = this.deps.logger.child({ workspace: d.workspaceId, destination: d.id, kind: d.kind });
    const labels = (outcome: string, code: string) => ({ destination: d.kind, outcome, code });
    const outcome = await deliverBatch(kind, group, accessToken, rows, {
      attempted: (attempts) => this.deps.deliveries.record({ workspaceId: d.workspaceId, destinationId: d.id, kind: d.kind }, attempts),
      sent: async (batch, answer) => {
        await repo.recordSent(d.id, generation, batch, answer.requestId, group.testEventCode);
        destinationConversions.inc(labels('forwarded', codeLabel(answer)), batch.length);
        const now = Date.now();
        for (const r of batch) endToEndLatency.observe(Math.max(0, now - r.receivedAt) / 1000);
        log.info({ records: batch.length, platform_request_id: answer.requestId }, 'batch forwarded');
      },
      retry: async (batch, c, answer) => {
        await repo.bumpAttempts(batch);
        const delay = retryDelayMs(await repo.sendFailures(d.id), this.deps.options.backoff, c.retryAfterMs);
        await repo.sendBackoff(d.id, delay, generation);
        destinationConversions.inc(labels('retried', codeLabel(answer)), batch.length);
        log.warn({ records: batch.length, reason: c.reason, message: answer.message, retry_in_ms: delay }, 'platform asked to retry later');
      },
      tokenRefused: async (batch, answer, refreshedAlready) => {
        // OAuth kinds get one refresh; long-lived tokens are not refreshed: the advertiser authorises again.
        if (kind.auth === 'oauth_refresh' && !refreshedAlready) {
          const fresh = await this.renew(d, generation);
          if (fresh !== null) token = fresh;
          return fresh;
        }
        if (await repo.markNeedsReauth(d.id, generation, `events call answered ${answer.code ?? answer.httpStatus} ${answer.message}`.trim())) {
          destinationConversions.inc(labels('parked', codeLabel(answer)), batch.length);
          log.warn({ code: answer.code }, 'token refused: destination needs re-authorization');
        }
        return null;
      },
      refused: async (batch, refusal, answer) => {
        await repo.deadLetter(d, group, batch, { ...refusal, requestId: answer.requestId }, Date.now());
        destinationConversions.inc(labels('dead_lettered', codeLabel(answer)), batch.length);
        log.warn({ records: batch.length, code: refusal.code, message: refusal.message }, 'platform rejected conversions: dead-lettered');
      },
      withheld: async (batch, reason) => {
        await repo.withhold(batch, reason);
        destinationConversions.inc(labels('dropped', reason), batch.length);
      },
    });
    return outcome === 'done' ? token : null;
  }
}
