/**
 * The sender: per connection, takes batches of up to FORWARDER_BATCH_SIZE conversions of one (event source, pixel,
 * test code) from the outbox once a full batch waits or the oldest has lingered FORWARDER_LINGER_MS, sends them
 * with the connection's access token and acts on the classified answer (classify.ts):
 *  - ok: the batch moves from the outbox to the sent ledger in one transaction;
 *  - retry: the batch stays; the connection backs off (full jitter, Retry-After as a floor);
 *  - token: refresh now and resend; a second token error (or nothing to refresh with) → needs_reauth, parked;
 *  - permanent: 40002 (invalid parameters) splits the batch to isolate the bad records, whose rejection goes to
 *    conversions.dlq with the platform's code and message; other codes dead-letter the batch.
 * Connections are sent concurrently (FORWARDER_CONCURRENCY) and each holds a row lease while sending, so one slow
 * account never stalls the others and no two replicas ever have the same batch on the wire.
 */
import { recordActivity } from '../domain/activity.js';
import type { Db } from '../shared/db/db.js';
import type { Logger } from '../shared/logger.js';
import { retryDelayMs, type BackoffPolicy } from './backoff.js';
import { codeLabel } from './classify.js';
import type { LeasedConnection } from './connection-credentials.js';
import type { ConnectionRepo } from './connection-repo.js';
import { DrainLoop } from './loop.js';
import { endToEndLatency, forwardedConversions, outboxRecords } from './metrics.js';
import type { BatchGroup } from './destinations/kind.js';
import type { OutboxRepo, OutboxRow } from './outbox-repo.js';
import { TIKTOK_DESTINATION_ID, type DeliveryRepo } from './delivery-repo.js';
import type { PlatformClient } from './platform-client.js';
import { deliverBatch } from './destinations/deliver.js';
import type { DestinationKind } from './destinations/kind.js';
import { tiktokKind } from './destinations/tiktok.js';
import type { TokenRefresher } from './refresher.js';

export interface SenderOptions {
  readonly lingerMs: number;
  readonly batchSize: number;
  readonly concurrency: number;
  /** Longer than a platform call can take: the lease must outlive the call it protects. */
  readonly leaseMs: number;
  readonly backoff: BackoffPolicy;
  readonly ledgerRetentionMs: number;
  readonly parkMaxAgeMs: number;
}

export interface SenderDeps {
  readonly db: Db;
  readonly connections: ConnectionRepo;
  readonly outbox: OutboxRepo;
  readonly deliveries: DeliveryRepo;
  readonly client: PlatformClient;
  /** What the connections are (default: TikTok through `client`). */
  readonly kind?: DestinationKind;
  readonly refresher: TokenRefresher;
  readonly logger: Logger;
  readonly owner: string;
  readonly options: SenderOptions;
  readonly now?: () => number;
}

/**
 * The outbox gauges count every waiting row, and an outage backs up millions of them. A count costs ~0.6 µs a row
 * (Postgres 15: 0.52–0.69 s for 1,000,000), so waiting 60 µs a row counted until the next keeps it near 1% of the
 * time: every 5 s up to ~80,000 rows, every 60 s from 1,000,000. By rows, not by the count's measured time, so that a
 * busy machine does not stretch the gauges' period.
 */
const GAUGES_EVERY_MS = 5_000;
const GAUGES_MAX_EVERY_MS = 60_000;
const GAUGES_MS_PER_ROW = 0.06;

/** How long the sender waits before counting the outbox again, after a count of `rows` waiting rows. */
export const gaugesPeriodMs = (rows: number): number => Math.min(GAUGES_MAX_EVERY_MS, Math.max(GAUGES_EVERY_MS, rows * GAUGES_MS_PER_ROW));

const PURGE_EVERY_MS = 60_000;

export { splitRejected, trackBody } from './destinations/tiktok.js';

/** The distinct gateway request ids of a batch's conversions, in order. */
export function requestIdsOf(rows: readonly OutboxRow[]): string[] {
  return [...new Set(rows.map((r) => r.requestId).filter((id): id is string => id !== null))];
}

export class ForwardSender {
  private readonly drains: DrainLoop;
  private nextGaugesAt = 0;
  private lastPurge = 0;
  private readonly kind: DestinationKind;

  constructor(private readonly deps: SenderDeps) {
    this.kind = deps.kind ?? tiktokKind(deps.client);
    this.drains = new DrainLoop({
      name: 'forward-sender',
      lingerMs: deps.options.lingerMs,
      logger: deps.logger,
      concurrency: deps.options.concurrency,
      tick: () => this.tick(),
      drain: (ws) => this.drain(ws),
      // An unexpected failure backs this connection off like a retryable answer: it is not picked again at once.
      failed: async (ws, err) => {
        const delay = await this.backOffAfterError(ws);
        this.deps.logger.error({ err, workspace: ws, retry_in_ms: delay }, 'sending failed; will retry');
      },
    });
  }

  start(): void {
    this.drains.run();
  }

  /** Looks for work now (e.g. after the intake queued conversions or a workspace connected). */
  wake(): void {
    this.drains.wake();
  }

  /** Stops taking batches; the batches on the wire finish (bounded by the request timeout). */
  async stop(): Promise<void> {
    await this.drains.stop();
  }

  /** Starts a drain for every connection that may send now, up to the concurrency. */
  async tick(): Promise<void> {
    await this.housekeeping();
    if (this.drains.free <= 0 || this.drains.stopping) return;
    const { lingerMs, batchSize } = this.deps.options;
    this.drains.drainAll(await this.deps.connections.sending.sendable(this.deps.owner, this.drains.free, lingerMs, batchSize, this.drains.draining));
  }

  /** Backs a connection off after an unexpected error; the delay, or null when even that failed. */
  private async backOffAfterError(workspaceId: string): Promise<number | null> {
    try {
      const failures = await this.deps.connections.sending.sendFailures(workspaceId);
      const delay = Math.max(this.deps.options.backoff.baseMs, retryDelayMs(failures, this.deps.options.backoff));
      await this.deps.connections.sending.sendBackoffAfterError(workspaceId, delay);
      return delay;
    } catch {
      return null; // the database is down too: the loop's own backoff paces the next attempt
    }
  }

  /** Sends everything that is ready for one connection while holding its send lease. Exposed for tests. */
  async drain(workspaceId: string): Promise<void> {
    const { connections, outbox, owner, options } = this.deps;
    let conn = await connections.sending.leaseForSending(workspaceId, owner, options.leaseMs);
    if (!conn) return;
    try {
      while (!this.drains.stopping) {
        const group = await outbox.readyGroup(workspaceId, options.lingerMs, options.batchSize);
        if (!group) return;
        const rows = await outbox.take(workspaceId, group, options.batchSize);
        if (rows.length === 0) return;
        const next = await this.deliver(conn, group, rows);
        if (next === null) return;
        conn = next;
        if (!(await connections.sending.renewSendLease(workspaceId, owner, conn.generation, options.leaseMs))) return;
      }
    } finally {
      await connections.sending.releaseSendLease(workspaceId, owner);
    }
  }

  /**
   * Delivers one batch through the destination kind (destinations/deliver.ts splits it on per-record rejections).
   * Returns the connection to go on with, or null when this connection must stop for now (backing off,
   * needs_reauth, or gone).
   */
  private async deliver(conn: LeasedConnection, group: BatchGroup, rows: OutboxRow[]): Promise<LeasedConnection | null> {
    const { connections, outbox, refresher, logger } = this.deps;
    const ws = conn.workspaceId;
    const log = logger.child({ workspace: ws, event_source_id: group.eventSourceId });
    let current: LeasedConnection | null = conn;
    const outcome = await deliverBatch(this.kind, group, conn.accessToken, rows, {
      attempted: (attempts) => this.deps.deliveries.record({ workspaceId: ws, destinationId: TIKTOK_DESTINATION_ID, kind: this.kind.name }, attempts),
      sent: async (batch, answer) => {
        const code = codeLabel(answer);
        await this.deps.db.transaction(async (tx) => {
          await outbox.recordSent(tx, ws, batch, answer.requestId, group.testEventCode);
          await connections.sending.resetSendBackoff(tx, ws, conn.generation);
        });
        const now = (this.deps.now ?? Date.now)();
        forwardedConversions.inc({ outcome: 'forwarded', code }, batch.length);
        for (const r of batch) endToEndLatency.observe(Math.max(0, now - r.receivedAt) / 1000);
        // The gateway requests whose events this batch carries: a request id found in the gateway's log line leads here.
        log.info({ records: batch.length, request_ids: requestIdsOf(batch), platform_request_id: answer.requestId, code }, 'batch forwarded');
      },
      retry: async (batch, c, answer) => {
        const code = codeLabel(answer);
        await outbox.bumpAttempts(batch);
        await recordActivity(this.deps.db, [{ workspaceId: ws, kind: 'failed', key: code, n: batch.length }]);
        const failures = await connections.sending.sendFailures(ws);
        const delay = retryDelayMs(failures, this.deps.options.backoff, c.retryAfterMs);
        await connections.sending.sendBackoff(ws, conn.generation, delay);
        forwardedConversions.inc({ outcome: 'retried', code }, batch.length);
        log.warn(
          { records: batch.length, request_ids: requestIdsOf(batch), code, reason: c.reason, message: answer.message, retry_in_ms: delay },
          'platform asked to retry later',
        );
      },
      tokenRefused: async (_batch, answer, refreshedAlready) => {
        const code = codeLabel(answer);
        const held = current!;
        if (refreshedAlready || held.refreshToken === null) {
          const parked = await connections.markNeedsReauth(ws, held.generation, `events call answered ${answer.code} ${answer.message}`.trim());
          if (parked !== null) {
            forwardedConversions.inc({ outcome: 'parked', code }, parked);
            log.warn({ code: answer.code, parked }, 'token refused after a refresh: connection needs re-authorization');
          }
          current = null;
          return null;
        }
        const refreshed = await refresher.refreshNow(ws, { force: true });
        const fresh = await connections.sending.currentTokens(ws);
        if (fresh && fresh.generation === held.generation && (refreshed === 'refreshed' || fresh.accessToken !== held.accessToken)) {
          current = fresh;
          return fresh.accessToken;
        }
        if (fresh && refreshed !== 'invalid') {
          // Someone else is refreshing, or the refresh failed transiently: come back shortly.
          const failures = await connections.sending.sendFailures(ws);
          await connections.sending.sendBackoff(ws, held.generation, retryDelayMs(failures, this.deps.options.backoff));
        }
        current = null;
        return null;
      },
      refused: async (batch, refusal, answer) => {
        const code = codeLabel(answer);
        await outbox.deadLetter(group, batch, { code: refusal.code, message: refusal.message, requestId: answer.requestId }, Date.now());
        forwardedConversions.inc({ outcome: 'dead_lettered', code }, batch.length);
        log.warn(
          { records: batch.length, request_ids: requestIdsOf(batch), code: refusal.code, message: refusal.message, platform_request_id: answer.requestId },
          'platform rejected conversions: dead-lettered',
        );
      },
      withheld: async (batch, reason) => {
        await outbox.withhold(batch, reason);
        forwardedConversions.inc({ outcome: 'dropped', code: reason }, batch.length);
        log.info({ records: batch.length, reason }, 'conversions withheld by the platform\'s consent rules');
      },
    });
    return outcome === 'done' ? current : null;
  }

  private async housekeeping(): Promise<void> {
    const now = Date.now();
    const { outbox, options, logger } = this.deps;
    if (now - this.lastPurge >= PURGE_EVERY_MS) {
      this.lastPurge = now;
      const purged = await outbox.purgeLedger(options.ledgerRetentionMs);
      // Every path's delivery records, kept as long as the ledger.
      await this.deps.deliveries.purge(options.ledgerRetentionMs);
      const expired = await outbox.expireOld(options.parkMaxAgeMs);
      for (const [ws, n] of expired) {
        forwardedConversions.inc({ outcome: 'dropped', code: 'expired' }, n);
        logger.warn({ workspace: ws, dropped: n }, 'conversions waited longer than FORWARDER_PARK_MAX_HOURS: dropped');
      }
      if (purged > 0) logger.debug({ purged }, 'sent ledger purged');
    }
    if (now >= this.nextGaugesAt) {
      const c = await outbox.counts();
      this.nextGaugesAt = now + gaugesPeriodMs(c.pending + c.parked);
      outboxRecords.set({ state: 'pending' }, c.pending);
      outboxRecords.set({ state: 'parked' }, c.parked);
    }
  }
}
