/**
 * Where each topic and each stage's consumer group stand, per topic AND partition, on either runtime, for
 * GET /admin/v1/pipeline; a group's lag is its input topic's records after its committed offsets.
 * Embedded: one partition (0) per topic, read in one statement so the numbers are one snapshot. NOTE: the embedded
 * log's offsets come from ONE sequence shared by every topic, so an offset is a position, not a count: `records`
 * and `lag` are counted rows. Kafka: watermarks and committed offsets from the admin client (lag from the log start
 * when nothing is committed).
 */
import type { Db } from '../shared/db/db.js';
import { toNumber } from '../shared/db/db.js';
import type { KafkaAdmin } from '../shared/kafka/admin.js';
import { Topics } from '../shared/topics.js';

export interface TopicPosition {
  readonly topic: string;
  /** Embedded: the last offset (0 when empty), kept for the one-partition log; Kafka: null (see partitions). */
  readonly end_offset: number | null;
  /** Records the topic holds (Kafka: high minus low watermark, transaction markers included). */
  readonly records: number;
  readonly partitions: Array<{ partition: number; log_start_offset: number; end_offset: number; records: number }>;
}

export interface ConsumerPosition {
  readonly group: string;
  readonly topic: string;
  /** Embedded: the committed offset (null before the group's first commit); Kafka: null (see partitions). */
  readonly offset: number | null;
  /** Records of the topic after the group's committed offsets, all partitions together. */
  readonly lag: number;
  readonly partitions: Array<{ partition: number; committed_offset: number | null; end_offset: number; lag: number }>;
}

export interface LogPositions {
  readonly topics: TopicPosition[];
  readonly consumers: ConsumerPosition[];
}

export type PositionsReader = () => Promise<LogPositions>;

/** The stage consumer groups and their input topics (compose/pipeline.ts). */
export interface StageConsumer {
  readonly group: string;
  readonly topic: string;
}

/**
 * `stages`: the consumer groups listed even before their first commit (offset null, lag every record of the topic,
 * as on Kafka), so that "every lag is 0" does not hold while a stage has not yet taken its first batch. Other groups
 * with a committed offset are listed too.
 */
export function embeddedPositions(db: Db, stages: readonly StageConsumer[] = []): PositionsReader {
  return async () => {
    const r = await db.query<{ topic: string; lo: unknown; hi: unknown; n: unknown; group_id: string | null; offset: unknown; lag: unknown }>(
      `WITH groups AS (
         SELECT group_id, topic FROM consumer_offsets
         UNION SELECT g, t FROM unnest($2::text[], $3::text[]) AS x(g, t)
       )
       SELECT t.topic, s.lo, s.hi, s.n, g.group_id, c."offset",
              (SELECT count(*) FROM log_records l WHERE l.topic = t.topic AND l."offset" > COALESCE(c."offset", 0)) AS lag
       FROM unnest($1::text[]) AS t(topic)
       CROSS JOIN LATERAL (SELECT min(l."offset") AS lo, max(l."offset") AS hi, count(*) AS n FROM log_records l WHERE l.topic = t.topic) s
       LEFT JOIN groups g ON g.topic = t.topic
       LEFT JOIN consumer_offsets c ON c.group_id = g.group_id AND c.topic = g.topic
       ORDER BY t.topic, g.group_id`,
      [Object.values(Topics), stages.map((x) => x.group), stages.map((x) => x.topic)],
    );
    const topics = new Map<string, TopicPosition>();
    const consumers: ConsumerPosition[] = [];
    for (const row of r.rows) {
      const end = row.hi === null ? 0 : toNumber(row.hi);
      const records = toNumber(row.n);
      if (!topics.has(row.topic)) {
        topics.set(row.topic, {
          topic: row.topic,
          end_offset: end,
          records,
          partitions: [{ partition: 0, log_start_offset: row.lo === null ? 0 : toNumber(row.lo), end_offset: end, records }],
        });
      }
      if (row.group_id !== null) {
        const offset = row.offset === null ? null : toNumber(row.offset);
        const lag = toNumber(row.lag);
        consumers.push({ group: row.group_id, topic: row.topic, offset, lag, partitions: [{ partition: 0, committed_offset: offset, end_offset: end, lag }] });
      }
    }
    return { topics: [...topics.values()], consumers };
  };
}

export function kafkaPositions(admin: KafkaAdmin, stages: readonly StageConsumer[]): PositionsReader {
  return async () => {
    const names = Object.values(Topics);
    const ends = new Map(await Promise.all(names.map(async (t) => [t, await admin.endOffsets(t)] as const)));
    const topics: TopicPosition[] = names.map((topic) => {
      const partitions = [...ends.get(topic)!]
        .sort(([a], [b]) => a - b)
        .map(([partition, o]) => ({ partition, log_start_offset: Number(o.low), end_offset: Number(o.high), records: Number(o.high - o.low) }));
      return { topic, end_offset: null, records: partitions.reduce((n, p) => n + p.records, 0), partitions };
    });
    const consumers = await Promise.all(
      stages.map(async ({ group, topic }): Promise<ConsumerPosition> => {
        const committed = await admin.committedOffsets(group, topic);
        const partitions = [...(ends.get(topic as (typeof names)[number]) ?? new Map())]
          .sort(([a], [b]) => a - b)
          .map(([partition, o]) => {
            const at = committed.get(partition) ?? null;
            return { partition, committed_offset: at === null ? null : Number(at), end_offset: Number(o.high), lag: Number(o.high - (at ?? o.low)) };
          });
        return { group, topic, offset: null, lag: partitions.reduce((n, p) => n + p.lag, 0), partitions };
      }),
    );
    return { topics, consumers };
  };
}
