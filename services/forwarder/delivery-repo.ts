/**
 * Delivery records (migration 0014): per conversion and destination, what the last attempt sent, what the platform
 * answered for that event, how many attempts it took and how it stands. Both senders write one statement per
 * request (`record`); the admin API and the console read them (`list`) and redrive the dead and refused ones
 * through their dead letters (`redrivable`). The TikTok path's destination is `tiktok`, the others' their id.
 */
import type { PlatformEventRecord, PlatformUser } from '../domain/conversion.js';
import type { Db, Sql } from '../shared/db/db.js';
import { msInterval as ms, toNumber } from '../shared/db/db.js';
import { joinJsonTexts, jsonText, splitJsonTexts } from '../shared/db/json-texts.js';
import { Topics } from '../shared/topics.js';
import type { Attempt, EventAnswer } from './destinations/deliver.js';
import type { DestinationKindName, Outgoing } from './destinations/kind.js';
import { matchQuality } from './metrics.js';

export const DELIVERY_OUTCOMES = ['sent', 'refused', 'retrying', 'dead'] as const;
export type DeliveryOutcome = (typeof DELIVERY_OUTCOMES)[number];

/**
 * What a delivery record keeps of the conversion it sent (column `record`): the identifiers an erasure matches it on
 * (privacy/erasure-steps.ts, `record->'user'`), in the conversion's own shape. Nothing reads the rest (the payload as
 * sent is its own column), so the page URL, user agent and properties are not stored a second time (docs/privacy.md).
 */
export function erasureKeys(record: PlatformEventRecord): { user: PlatformUser } {
  const u = record.user;
  if (u === undefined) return { user: {} };
  const { email, phone, external_id, ttclid } = u;
  return { user: { email, phone, external_id, ttclid } };
}

/** The workspace's first TikTok destination, as the destinations list names it. */
export const TIKTOK_DESTINATION_ID = 'tiktok';

export interface DeliveryTarget {
  readonly workspaceId: string;
  readonly destinationId: string;
  readonly kind: DestinationKindName;
}

export interface Delivery {
  readonly id: number;
  readonly eventId: string;
  readonly destination: string;
  readonly kind: DestinationKindName;
  readonly outcome: DeliveryOutcome;
  readonly attempts: number;
  readonly payload: unknown;
  readonly platformAnswer: unknown;
  readonly matchKeys: string[];
  readonly matchQuality: number;
  readonly attemptedAt: string;
  readonly sentAt: string | null;
}

/** Which deliveries: every field optional; `from`/`to` bound the last attempt (epoch ms, to exclusive). */
export interface DeliveryFilter {
  readonly destination?: string;
  readonly outcome?: DeliveryOutcome;
  readonly from?: number;
  readonly to?: number;
  /** The ledger id as listed; a live id also finds its test-mode twin (`test:` prefix). */
  readonly eventId?: string;
}

interface Row {
  id: unknown;
  event_id: string;
  destination_id: string;
  kind: DestinationKindName;
  outcome: DeliveryOutcome;
  attempts: unknown;
  payload: unknown;
  platform_answer: unknown;
  match_keys: unknown;
  match_quality: unknown;
  attempted_at: Date | string;
  sent_at: Date | string | null;
}

const iso = (v: Date | string): string => new Date(v).toISOString();
const json = (v: unknown): unknown => (typeof v === 'string' ? JSON.parse(v) : v);

/** The filter as SQL over `deliveries d`, its parameters numbered from `first`. */
function where(workspaceId: string, f: DeliveryFilter, first = 1): { sql: string; values: unknown[] } {
  const values: unknown[] = [workspaceId];
  const parts = [`d.workspace_id = $${first}`];
  const add = (cond: (p: string) => string, v: unknown): void => {
    values.push(v);
    parts.push(cond(`$${first + values.length - 1}`));
  };
  if (f.destination !== undefined) add((p) => `d.destination_id = ${p}`, f.destination);
  if (f.outcome !== undefined) add((p) => `d.outcome = ${p}`, f.outcome);
  if (f.from !== undefined) add((p) => `d.attempted_at >= to_timestamp(${p}::double precision / 1000.0)`, f.from);
  if (f.to !== undefined) add((p) => `d.attempted_at < to_timestamp(${p}::double precision / 1000.0)`, f.to);
  if (f.eventId !== undefined) add((p) => `(d.event_id = ${p} OR d.event_id = 'test:' || ${p})`, f.eventId);
  return { sql: parts.join(' AND '), values };
}

/**
 * Conversions given up without a refusal (they waited too long): their records turn `dead`, in the caller's
 * transaction. Returns those that had a record (an attempt behind them), with the platform's last answer.
 */
export async function markDeliveriesDead(
  tx: Sql,
  gone: ReadonlyArray<{ workspaceId: string; destinationId: string; eventId: string }>,
): Promise<Array<{ workspaceId: string; destinationId: string; eventId: string; answer: EventAnswer | null }>> {
  if (gone.length === 0) return [];
  const r = await tx.query<{ workspace_id: string; destination_id: string; event_id: string; platform_answer: EventAnswer | string | null }>(
    `UPDATE deliveries d SET outcome = 'dead'
     FROM unnest($1::text[], $2::text[], $3::text[]) AS g(w, dst, e)
     WHERE d.workspace_id = g.w AND d.destination_id = g.dst AND d.event_id = g.e AND d.outcome <> 'sent'
     RETURNING d.workspace_id, d.destination_id, d.event_id, d.platform_answer`,
    [gone.map((g) => g.workspaceId), gone.map((g) => g.destinationId), gone.map((g) => g.eventId)],
  );
  return r.rows.map((row) => ({
    workspaceId: row.workspace_id,
    destinationId: row.destination_id,
    eventId: row.event_id,
    answer: typeof row.platform_answer === 'string' ? (JSON.parse(row.platform_answer) as EventAnswer) : row.platform_answer,
  }));
}

/** Which deliveries a redrive takes: every destination's of some event ids, a filter's, or the records by id (the console's shown ones). */
export type DeliverySelection =
  | { readonly eventIds: readonly string[] }
  | { readonly filter: DeliveryFilter }
  | { readonly deliveryIds: readonly number[] };

/** A dead or refused delivery and the dead letter that would send it again. */
export interface RedrivableDelivery {
  readonly deliveryId: number;
  readonly letterId: string;
}

export class DeliveryRepo {
  constructor(private readonly db: Db) {}

  /** One request's events, in one statement: a new row per event the first time, then the latest attempt. */
  async record(target: DeliveryTarget, attempts: readonly Attempt<Outgoing>[]): Promise<void> {
    if (attempts.length === 0) return;
    // Short fields as arrays, the JSON documents as texts of documents (shared/db/json-texts.ts): each document's bytes
    // read twice, where one JSON text of the rows (json_to_recordset) read them three times and array parameters escape
    // them into the array's text. An empty text stands for no platform answer (SQL NULL): no JSON document is empty.
    await this.db.query(
      `INSERT INTO deliveries (workspace_id, destination_id, kind, event_id, outcome, attempts, payload, record, platform_answer, match_keys, match_quality, sent_at)
       SELECT $1, $2, $3, e, o, 1, p::json, r::json, NULLIF(a, '')::json, k::jsonb, q, CASE WHEN o = 'sent' THEN now() END
       FROM unnest($4::text[], $5::text[], ${splitJsonTexts('$6')}, ${splitJsonTexts('$7')}, ${splitJsonTexts('$8')}, ${splitJsonTexts('$9')},
                   $10::double precision[]) AS t(e, o, p, r, a, k, q)
       ON CONFLICT (workspace_id, destination_id, event_id) DO UPDATE SET
         outcome = EXCLUDED.outcome, attempts = deliveries.attempts + 1, payload = EXCLUDED.payload, record = EXCLUDED.record,
         platform_answer = EXCLUDED.platform_answer, match_keys = EXCLUDED.match_keys, match_quality = EXCLUDED.match_quality,
         attempted_at = now(), sent_at = COALESCE(EXCLUDED.sent_at, deliveries.sent_at)`,
      [
        target.workspaceId,
        target.destinationId,
        target.kind,
        attempts.map((a) => a.row.eventId),
        attempts.map((a) => a.outcome),
        joinJsonTexts(attempts.map((a) => jsonText(a.payload ?? null))),
        joinJsonTexts(attempts.map((a) => jsonText(erasureKeys(a.row.record)))),
        joinJsonTexts(attempts.map((a) => (a.answer === undefined ? '' : jsonText(a.answer)))),
        joinJsonTexts(attempts.map((a) => jsonText(a.match.keys))),
        attempts.map((a) => a.match.quality),
      ],
    );
    for (const a of attempts) if (a.outcome !== 'retrying') matchQuality.observe({ destination: target.kind }, a.match.quality);
  }

  /** A page of a workspace's deliveries, newest first; `beforeId` is the previous page's cursor. */
  async list(workspaceId: string, f: DeliveryFilter, page: { beforeId?: number; limit: number }): Promise<Delivery[]> {
    const w = where(workspaceId, f);
    const values = [...w.values, page.beforeId ?? null, page.limit];
    const n = w.values.length;
    const r = await this.db.query<Row>(
      `SELECT d.id, d.event_id, d.destination_id, d.kind, d.outcome, d.attempts, d.payload, d.platform_answer, d.match_keys,
              d.match_quality, d.attempted_at, d.sent_at
       FROM deliveries d WHERE ${w.sql} AND ($${n + 1}::bigint IS NULL OR d.id < $${n + 1})
       ORDER BY d.id DESC LIMIT $${n + 2}`,
      values,
    );
    return r.rows.map((row) => ({
      id: toNumber(row.id),
      eventId: row.event_id,
      destination: row.destination_id,
      kind: row.kind,
      outcome: row.outcome,
      attempts: toNumber(row.attempts),
      payload: json(row.payload),
      platformAnswer: json(row.platform_answer),
      matchKeys: json(row.match_keys) as string[],
      matchQuality: Number(row.match_quality),
      attemptedAt: iso(row.attempted_at),
      sentAt: row.sent_at === null ? null : iso(row.sent_at),
    }));
  }

  /**
   * The dead and refused deliveries of the selection whose dead letter waits: the TikTok
   * path's letter has the ledger id as its origin, a destination's `<destination id>:<ledger id>`.
   */
  async redrivable(workspaceId: string, sel: DeliverySelection): Promise<RedrivableDelivery[]> {
    const w =
      'filter' in sel
        ? where(workspaceId, sel.filter, 2)
        : 'eventIds' in sel
          ? { sql: 'd.workspace_id = $2 AND d.event_id = ANY($3::text[])', values: [workspaceId, sel.eventIds] }
          : { sql: 'd.workspace_id = $2 AND d.id = ANY($3::bigint[])', values: [workspaceId, sel.deliveryIds] };
    const r = await this.db.query<{ id: unknown; letter: string }>(
      `SELECT d.id, l.id AS letter FROM deliveries d
       JOIN dead_letters l ON l.workspace_id = d.workspace_id AND l.topic = $1 AND l.status = 'dead'
        AND l.origin = CASE WHEN d.destination_id = '${TIKTOK_DESTINATION_ID}' THEN d.event_id ELSE d.destination_id || ':' || d.event_id END
       WHERE ${w.sql} AND d.outcome IN ('dead', 'refused')
       ORDER BY d.id`,
      [Topics.conversionsDlq, ...w.values],
    );
    return r.rows.map((row) => ({ deliveryId: toNumber(row.id), letterId: row.letter }));
  }

  /** Redriven: back in an outbox, so `retrying` until the next attempt says otherwise. */
  async markRequeued(ids: readonly number[]): Promise<void> {
    if (ids.length === 0) return;
    await this.db.query(`UPDATE deliveries SET outcome = 'retrying' WHERE id = ANY($1::bigint[]) AND outcome IN ('dead', 'refused')`, [ids]);
  }

  /** Forgets records older than the retention (the sent ledger's: FORWARDER_LEDGER_RETENTION_HOURS). */
  async purge(retentionMs: number): Promise<number> {
    const r = await this.db.query(`DELETE FROM deliveries WHERE attempted_at < now() - ${ms(retentionMs)} RETURNING id`);
    return r.rows.length;
  }
}
