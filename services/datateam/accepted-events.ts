/**
 * The accepted events of a workspace received in [from, to), streamed from the raw log (events.raw) of either
 * runtime, for the export: once per acceptance, so a sender's retry with the same idempotency key shows again.
 * An envelope's `received_at` decides; the log's own time is only close to it (written a moment later), so the log
 * is entered a margin around the range and every envelope is checked against the range exactly.
 */
import type { Db } from '../shared/db/db.js';
import { toNumber } from '../shared/db/db.js';
import type { EventEnvelope } from '../domain/envelope.js';
import type { KafkaAdmin } from '../shared/kafka/admin.js';
import type { KafkaConnection } from '../shared/kafka/client.js';
import { streamTopicRange } from '../stream/kafka/reader.js';
import type { AvroSerde } from '../stream/kafka/serde.js';
import { Topics } from '../shared/topics.js';

/** How far the log's own time may stray from received_at: entered this much before `from`, left this much after `to`. */
export const LOG_TIME_MARGIN_MS = 60_000;

/**
 * The log's own times are looked up between these bounds at most: the earliest and latest times with a four-digit
 * year, which Postgres parses (year 0000 and before it does not). Any RFC 3339 range is then served; the margin
 * alone must never push a bound out of what the store can read.
 */
const EMBEDDED_SEARCH_BOUNDS: readonly [number, number] = [Date.parse('0001-01-01T00:00:00Z'), Date.parse('9999-12-31T23:59:59.999Z')];
/** Kafka's timestamps are epoch ms, and negative ones are sentinels (latest, earliest) to offsetsForTimes. */
const KAFKA_SEARCH_BOUNDS: readonly [number, number] = [0, EMBEDDED_SEARCH_BOUNDS[1]];

/** The times of the log to search for [fromMs, toMs): widened by the margin, kept within what the log can read. */
export function logSearchWindow(fromMs: number, toMs: number, bounds: readonly [number, number]): [number, number] {
  const clamp = (ms: number): number => Math.min(bounds[1], Math.max(bounds[0], ms));
  return [clamp(fromMs - LOG_TIME_MARGIN_MS), clamp(toMs + LOG_TIME_MARGIN_MS)];
}

export interface AcceptedEvents {
  /** The workspace's envelopes with received_at in [fromMs, toMs), in log order; pulls as the caller reads. */
  read(workspaceId: string, fromMs: number, toMs: number, signal: AbortSignal): AsyncIterable<EventEnvelope>;
}

const inRange = (e: EventEnvelope, workspaceId: string, fromMs: number, toMs: number): boolean =>
  e.workspace_id === workspaceId && e.received_at >= fromMs && e.received_at < toMs;

/** Embedded: rows of log_records, page by page by offset (the primary key), between two offsets found by time. */
export function embeddedAcceptedEvents(db: Db, pageSize = 500): AcceptedEvents {
  return {
    async *read(workspaceId, fromMs, toMs, signal) {
      const [searchFrom, searchTo] = logSearchWindow(fromMs, toMs, EMBEDDED_SEARCH_BOUNDS);
      const start = await firstOffsetAtOrAfter(db, searchFrom);
      const end = await firstOffsetAtOrAfter(db, searchTo);
      let after = start - 1;
      while (!signal.aborted && after < end - 1) {
        const r = await db.query<{ offset: unknown; value: EventEnvelope }>(
          `SELECT "offset", value FROM log_records
           WHERE topic = $1 AND "offset" > $2 AND "offset" < $3 AND value->>'workspace_id' = $4
           ORDER BY "offset" LIMIT $5`,
          [Topics.eventsRaw, after, end, workspaceId, pageSize],
        );
        if (r.rows.length === 0) return;
        for (const row of r.rows) if (inRange(row.value, workspaceId, fromMs, toMs)) yield row.value;
        after = toNumber(r.rows.at(-1)!.offset);
      }
    },
  };

  /** The first offset of events.raw appended at or after `ms` (one past the last offset when none): a binary search. */
  async function firstOffsetAtOrAfter(sql: Db, ms: number): Promise<number> {
    const bounds = await sql.query<{ lo: unknown; hi: unknown }>('SELECT min("offset") AS lo, max("offset") AS hi FROM log_records WHERE topic = $1', [
      Topics.eventsRaw,
    ]);
    if (bounds.rows[0]?.lo === null || bounds.rows[0]?.lo === undefined) return 0;
    let lo = toNumber(bounds.rows[0].lo);
    let hi = toNumber(bounds.rows[0].hi) + 1; // answer in [lo, hi]
    const at = new Date(ms);
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      const r = await sql.query<{ offset: unknown; before: boolean }>(
        'SELECT "offset", appended_at < $3 AS before FROM log_records WHERE topic = $1 AND "offset" >= $2 ORDER BY "offset" LIMIT 1',
        [Topics.eventsRaw, mid, at],
      );
      const row = r.rows[0];
      if (!row) hi = mid;
      else if (row.before) lo = toNumber(row.offset) + 1;
      else hi = mid; // no row lies in [mid, row.offset)
    }
    return lo;
  }
}

/**
 * Kafka: events.raw from the offsets for `from` (offsetsForTimes) to the offsets for `to`, with a reader of its own
 * (stream/kafka/reader.ts streamTopicRange: never a live group), the workspace's keys only, decoded from Avro.
 */
export function kafkaAcceptedEvents(connection: KafkaConnection, admin: KafkaAdmin, serde: AvroSerde): AcceptedEvents {
  return {
    async *read(workspaceId, fromMs, toMs, signal) {
      const [searchFrom, searchTo] = logSearchWindow(fromMs, toMs, KAFKA_SEARCH_BOUNDS);
      const [from, to] = await Promise.all([admin.offsetsForTimes(Topics.eventsRaw, searchFrom), admin.offsetsForTimes(Topics.eventsRaw, searchTo)]);
      // events.raw is keyed workspace:…, so other workspaces' records are skipped undecoded.
      for await (const r of streamTopicRange(connection, admin, Topics.eventsRaw, { from, to, keyPrefix: `${workspaceId}:`, signal })) {
        if (r.value === null) continue;
        const e = (await serde.decode(Topics.eventsRaw, r.value)) as EventEnvelope;
        if (inRange(e, workspaceId, fromMs, toMs)) yield e;
      }
    },
  };
}
