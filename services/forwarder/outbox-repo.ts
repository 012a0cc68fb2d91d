/**
 * The forwarder's durable state: the outbox (conversions waiting to be sent, per connection) and the sent ledger
 * (what the platform accepted, per connection and event_id). Moving a batch from one to the other is one
 * transaction, so after a crash a conversion is either still waiting (and is resent with the same event_id) or
 * recorded as sent (and never sent again).
 */
import type { BatchGroup } from './destinations/kind.js';
import type { Db, Sql } from '../shared/db/db.js';
import { msInterval as ms, toNumber } from '../shared/db/db.js';
import { conversionKey, type PlatformEventRecord } from '../domain/conversion.js';
import { recordActivity } from '../domain/activity.js';
import { appendInTransaction } from '../stream/embedded/log.js';
import { Topics } from '../shared/topics.js';
import { recordDeadLetters, type DeadLetterEntry } from '../domain/dead-letter.js';
import { readForwardingSetup, type ForwardingSetup } from '../domain/forwarding-setup.js';
import { markDeliveriesDead, TIKTOK_DESTINATION_ID } from './delivery-repo.js';
import { readyGroupsSql, type OutboxShape } from './outbox-ready.js';

export interface OutboxRow {
  readonly id: number;
  readonly workspaceId: string;
  readonly eventId: string;
  readonly record: PlatformEventRecord;
  readonly receivedAt: number;
  /** The gateway request that carried the event (null for conversions queued before it was recorded). */
  readonly requestId: string | null;
}

/** A conversion the platform rejected permanently (or that could not be read), on conversions.dlq. */
export interface ConversionDeadLetter {
  readonly stage: 'forwarder';
  /** `expired`: not delivered within FORWARDER_PARK_MAX_HOURS, with a failed attempt behind it. */
  readonly reason: 'platform_rejected' | 'invalid_conversion' | 'expired';
  readonly workspace_id: string;
  readonly event_id: string;
  readonly event_source: string | null;
  readonly event_source_id: string | null;
  readonly test_event_code: string | null;
  /** The platform's code and message; null for a record that never reached the platform. */
  readonly platform_code: number | null;
  readonly platform_message: string;
  readonly request_id: string | null;
  readonly record: unknown;
  readonly failed_at: number;
}

/** A connection's outbox: its batches split by event source, pixel and test code (index forward_outbox_batch). */
export const FORWARD_OUTBOX: OutboxShape = { table: 'forward_outbox', key: 'workspace_id', groups: ['event_source', 'event_source_id', 'test_event_code'] };

export class OutboxRepo {
  constructor(private readonly db: Db) {}

  /**
   * The next batch group of a connection that is ready: a full batch waiting, or its oldest conversion has
   * lingered long enough. Null when nothing is ready.
   */
  async readyGroup(workspaceId: string, lingerMs: number, batchSize: number): Promise<BatchGroup | null> {
    const r = await this.db.query<{ event_source: string; event_source_id: string; test_event_code: string }>(
      `${readyGroupsSql(FORWARD_OUTBOX, '$1', ms('$2'), '$3')} ORDER BY first_id LIMIT 1`,
      [workspaceId, lingerMs, batchSize],
    );
    const row = r.rows[0];
    return row ? { eventSource: row.event_source, eventSourceId: row.event_source_id, testEventCode: row.test_event_code } : null;
  }

  async take(workspaceId: string, group: BatchGroup, limit: number): Promise<OutboxRow[]> {
    const r = await this.db.query<{ id: unknown; event_id: string; record: PlatformEventRecord; received_at: unknown; request_id: string | null }>(
      `SELECT id, event_id, record, received_at, request_id FROM forward_outbox
       WHERE workspace_id = $1 AND event_source = $2 AND event_source_id = $3 AND test_event_code = $4
       ORDER BY id LIMIT $5`,
      [workspaceId, group.eventSource, group.eventSourceId, group.testEventCode, limit],
    );
    return r.rows.map((row) => ({
      id: toNumber(row.id),
      workspaceId,
      eventId: row.event_id,
      record: row.record,
      receivedAt: new Date(row.received_at as string).getTime(),
      requestId: row.request_id,
    }));
  }

  /**
   * The platform accepted the batch: out of the outbox, into the ledger, in one transaction. A conversion sent again
   * on purpose (a replay with `resend`) refreshes its ledger entry: that replay does not send it a third time.
   */
  async recordSent(tx: Sql, workspaceId: string, rows: readonly OutboxRow[], requestId: string | null, testEventCode = ''): Promise<void> {
    await tx.query('DELETE FROM forward_outbox WHERE id = ANY($1::bigint[])', [rows.map((r) => r.id)]);
    await tx.query(
      `INSERT INTO forward_sent (workspace_id, event_id, request_id, test_event_code, platform_event)
       SELECT $1, e, $3, $5, p FROM unnest($2::text[], $4::text[]) AS t(e, p)
       ON CONFLICT (workspace_id, event_id) DO UPDATE SET sent_at = now(), request_id = EXCLUDED.request_id`,
      [workspaceId, rows.map((r) => r.eventId), requestId, rows.map((r) => r.record.event), testEventCode],
    );
    // The console's Activity page (domain/activity.ts).
    await recordActivity(tx, [{ workspaceId, kind: testEventCode === '' ? 'delivered' : 'test_delivered', n: rows.length }]);
  }

  /** The platform rejected the batch for good: out of the outbox, onto conversions.dlq, in one transaction. */
  async deadLetter(
    group: BatchGroup,
    rows: readonly OutboxRow[],
    platform: { code: number; message: string; requestId: string | null },
    now: number,
  ): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.query('DELETE FROM forward_outbox WHERE id = ANY($1::bigint[])', [rows.map((r) => r.id)]);
      // With the sender's event name the setup of now maps to the rejected platform event: a redrive rebuilds the
      // conversion under the setup of then (datateam/redrive.ts).
      const setup = await readForwardingSetup(tx, rows[0]!.workspaceId);
      await writeConversionLetters(
        tx,
        rows.map((row) => ({
          destinationId: TIKTOK_DESTINATION_ID,
          eventId: row.eventId,
          source: `platform request ${platform.requestId ?? 'none'} at ${now}`,
          sourceEvent: sourceEventOf(setup, row.record),
          value: conversionLetter(row.workspaceId, row.record, {
            reason: 'platform_rejected',
            event_source: group.eventSource,
            event_source_id: group.eventSourceId,
            test_event_code: group.testEventCode === '' ? null : group.testEventCode,
            platform_code: platform.code,
            platform_message: platform.message,
            request_id: platform.requestId,
            failed_at: now,
          }),
        })),
      );
      await recordActivity(tx, [{ workspaceId: rows[0]!.workspaceId, kind: 'failed', key: String(platform.code), n: rows.length }]);
    });
  }

  /** The platform's consent rules forbid sending these: out of the outbox, counted as dropped for that reason. */
  async withhold(rows: readonly OutboxRow[], reason: string): Promise<void> {
    if (rows.length === 0) return;
    await this.db.transaction(async (tx) => {
      await tx.query('DELETE FROM forward_outbox WHERE id = ANY($1::bigint[])', [rows.map((r) => r.id)]);
      await recordActivity(tx, [{ workspaceId: rows[0]!.workspaceId, kind: 'dropped', key: reason, n: rows.length }]);
    });
  }

  async bumpAttempts(rows: readonly OutboxRow[]): Promise<void> {
    await this.db.query('UPDATE forward_outbox SET attempts = attempts + 1 WHERE id = ANY($1::bigint[])', [rows.map((r) => r.id)]);
  }

  /** Forgets ledger entries older than the retention (at least the platform's 48 h dedup window). */
  async purgeLedger(retentionMs: number): Promise<number> {
    const r = await this.db.query(`DELETE FROM forward_sent WHERE sent_at < now() - ${ms('$1')} RETURNING event_id`, [retentionMs]);
    return r.rows.length;
  }

  /** Drops conversions that waited longer than maxAgeMs (a workspace that never reconnects); counts per workspace. */
  async expireOld(maxAgeMs: number, now = Date.now()): Promise<Map<string, number>> {
    return this.db.transaction(async (tx) => {
      const r = await tx.query<{ workspace_id: string; event_id: string; record: PlatformEventRecord; event_source: string; event_source_id: string; test_event_code: string }>(
        `DELETE FROM forward_outbox WHERE enqueued_at < now() - ${ms('$1')}
         RETURNING workspace_id, event_id, record, event_source, event_source_id, test_event_code`,
        [maxAgeMs],
      );
      const setups = new Map<string, ForwardingSetup | undefined>();
      for (const ws of new Set(r.rows.map((row) => row.workspace_id))) setups.set(ws, await readForwardingSetup(tx, ws));
      await deadLetterExpired(
        tx,
        r.rows.map((row) => ({
          workspaceId: row.workspace_id,
          destinationId: TIKTOK_DESTINATION_ID,
          eventId: row.event_id,
          record: row.record,
          eventSource: row.event_source,
          eventSourceId: row.event_source_id,
          testEventCode: row.test_event_code,
          sourceEvent: sourceEventOf(setups.get(row.workspace_id), row.record),
        })),
        now,
      );
      const out = new Map<string, number>();
      for (const row of r.rows) out.set(row.workspace_id, (out.get(row.workspace_id) ?? 0) + 1);
      await recordActivity(tx, [...out].map(([workspaceId, n]) => ({ workspaceId, kind: 'dropped' as const, key: 'expired', n })));
      return out;
    });
  }

  /** Waiting conversions: pending (their connection is connected) and parked (it is not). */
  async counts(): Promise<{ pending: number; parked: number }> {
    const r = await this.db.query<{ live: boolean; n: unknown }>(
      `SELECT (c.status IS NOT NULL AND c.status = 'connected') AS live, count(*) AS n
       FROM forward_outbox o LEFT JOIN connections c ON c.workspace_id = o.workspace_id GROUP BY 1`,
    );
    const out = { pending: 0, parked: 0 };
    for (const row of r.rows) out[row.live ? 'pending' : 'parked'] += toNumber(row.n);
    return out;
  }
}

/** A conversion dropped from an outbox after waiting longer than FORWARDER_PARK_MAX_HOURS. */
export interface ExpiredConversion {
  readonly workspaceId: string;
  /** `tiktok` (the workspace's first TikTok destination) or the destination's id. */
  readonly destinationId: string;
  /** The ledger id. */
  readonly eventId: string;
  readonly record: PlatformEventRecord;
  readonly eventSource: string;
  readonly eventSourceId: string;
  /** '' = none. */
  readonly testEventCode: string;
  /** The sender's event name, for a redrive to rebuild the conversion under today's mapping. */
  readonly sourceEvent: string | null;
}

/**
 * Expired conversions with a failed attempt behind them turn their delivery records `dead` and become dead letters
 * (reason `expired`, the platform's last answer in the message), like a refused conversion's: a redrive of the
 * deliveries, or of the letter, sends them again. Those never tried (waiting for a connection) have no record and
 * are only counted as dropped.
 */
export async function deadLetterExpired(tx: Sql, expired: readonly ExpiredConversion[], now: number): Promise<void> {
  const marked = await markDeliveriesDead(tx, expired);
  const byKey = new Map(expired.map((e) => [`${e.workspaceId}\n${e.destinationId}\n${e.eventId}`, e]));
  await writeConversionLetters(
    tx,
    marked.flatMap((m) => {
      const e = byKey.get(`${m.workspaceId}\n${m.destinationId}\n${m.eventId}`);
      if (!e) return [];
      const where = m.destinationId === TIKTOK_DESTINATION_ID ? '' : `destination ${m.destinationId}: `;
      const last = m.answer ? `; last answer: ${m.answer.code ?? `HTTP ${m.answer.http_status}`} ${m.answer.message}` : '';
      const value = conversionLetter(e.workspaceId, e.record, {
        reason: 'expired',
        event_source: e.eventSource === '' ? null : e.eventSource,
        event_source_id: e.eventSourceId === '' ? null : e.eventSourceId,
        test_event_code: e.testEventCode === '' ? null : e.testEventCode,
        // Not the platform's refusal: its last answer is in the message.
        platform_code: null,
        platform_message: `${where}not delivered within FORWARDER_PARK_MAX_HOURS${last}`,
        request_id: m.answer?.request_id ?? null,
        failed_at: now,
      });
      return [{ destinationId: e.destinationId, eventId: e.eventId, source: `expired at ${now}`, sourceEvent: e.sourceEvent, value }];
    }),
  );
}

/** A forwarder letter of a conversion given up on one path (the message cut to 1,000 characters). */
export function conversionLetter(
  workspaceId: string,
  record: PlatformEventRecord,
  f: Omit<ConversionDeadLetter, 'stage' | 'workspace_id' | 'event_id' | 'record'>,
): ConversionDeadLetter {
  // The platform's event_id (the ledger id of a test conversion carries a `test:` prefix).
  return { stage: 'forwarder', workspace_id: workspaceId, event_id: record.event_id, ...f, platform_message: f.platform_message.slice(0, 1000), record };
}

/**
 * Letters of conversions given up, on conversions.dlq and in dead_letters, in the caller's transaction. A letter's
 * origin names its destination (the first TikTok one's is the ledger id alone), so the same event given up by two
 * destinations makes two letters.
 */
export async function writeConversionLetters(
  tx: Sql,
  letters: ReadonlyArray<{ destinationId: string; eventId: string; source: string; sourceEvent: string | null; value: ConversionDeadLetter }>,
): Promise<void> {
  if (letters.length === 0) return;
  await appendInTransaction(
    tx,
    new Map([[Topics.conversionsDlq, letters.map(({ value }) => ({ key: conversionKey({ workspace_id: value.workspace_id, event_id: value.event_id }), value }))]]),
  );
  await recordDeadLetters(
    tx,
    letters.map((l) => {
      const entry = conversionLetterEntry(l.value, l.source, l.sourceEvent);
      return l.destinationId === TIKTOK_DESTINATION_ID ? entry : { ...entry, origin: `${l.destinationId}:${l.eventId}` };
    }),
  );
}

/** The dead_letters row of a forwarder letter: its origin is the conversion's ledger id (test ones live apart). */
export function conversionLetterEntry(letter: ConversionDeadLetter, source: string, sourceEvent: string | null = null): DeadLetterEntry {
  return {
    workspaceId: letter.workspace_id,
    stage: letter.stage,
    topic: Topics.conversionsDlq,
    origin: letter.test_event_code ? `test:${letter.event_id}` : letter.event_id,
    source,
    eventId: letter.event_id === '' ? null : letter.event_id,
    reason: letter.reason,
    error: letter.platform_code === null ? letter.platform_message : `${letter.platform_code}: ${letter.platform_message}`,
    value: letter,
    failedAt: letter.failed_at,
    sourceEvent,
  };
}

/** The one sender event name a setup maps to a platform event, or null (none, or several: ambiguous). */
export function sourceEventOf(setup: Pick<ForwardingSetup, 'events'> | undefined, record: unknown): string | null {
  const event = typeof record === 'object' && record !== null ? (record as { event?: unknown }).event : undefined;
  const names = (setup?.events ?? []).filter((m) => m.platform_event === event).map((m) => m.name);
  return names.length === 1 ? names[0]! : null;
}
