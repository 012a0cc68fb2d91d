/**
 * Records of any topic, decoded, for operators (GET /admin/v1/topics/{topic}/records, and through it the `decode`
 * command on either runtime): the last N of every partition, or everything from the start, optionally only keys with
 * a prefix (a workspace's: `ws_…:`). Embedded: rows of log_records; Kafka: a reader of its own (stream/kafka/reader.ts,
 * never a live group), values decoded from Avro with the registry.
 */
import type { Db } from '../shared/db/db.js';
import { toNumber } from '../shared/db/db.js';
import type { KafkaAdmin } from '../shared/kafka/admin.js';
import type { KafkaConnection } from '../shared/kafka/client.js';
import { decodeOrMark, streamTopicRange } from '../stream/kafka/reader.js';
import type { AvroSerde } from '../stream/kafka/serde.js';
import type { TopicName } from '../shared/topics.js';

export interface TopicRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly timestamp: string;
  readonly key: string;
  readonly value: unknown;
}

export interface TopicQuery {
  /** The last N records of every partition; undefined: from the start. */
  readonly last?: number;
  readonly keyPrefix?: string;
}

export type TopicRecords = (topic: TopicName, q: TopicQuery, signal: AbortSignal) => AsyncIterable<TopicRecord>;

export function embeddedTopicRecords(db: Db, pageSize = 500): TopicRecords {
  return async function* (topic, q, signal) {
    let after = 0;
    if (q.last !== undefined) {
      const r = await db.query<{ o: unknown }>(
        'SELECT min(o) AS o FROM (SELECT "offset" AS o FROM log_records WHERE topic = $1 ORDER BY "offset" DESC LIMIT $2) t',
        [topic, q.last],
      );
      after = r.rows[0]?.o === null || r.rows[0]?.o === undefined ? 0 : toNumber(r.rows[0].o) - 1;
    }
    while (!signal.aborted) {
      const r = await db.query<{ offset: unknown; key: string; value: unknown; appended_at: Date | string }>(
        'SELECT "offset", key, value, appended_at FROM log_records WHERE topic = $1 AND "offset" > $2 ORDER BY "offset" LIMIT $3',
        [topic, after, pageSize],
      );
      if (r.rows.length === 0) return;
      for (const row of r.rows) {
        if (q.keyPrefix && !row.key.startsWith(q.keyPrefix)) continue;
        yield { topic, partition: 0, offset: String(row.offset), timestamp: new Date(row.appended_at).toISOString(), key: row.key, value: row.value };
      }
      after = toNumber(r.rows.at(-1)!.offset);
    }
  };
}

export function kafkaTopicRecords(connection: KafkaConnection, admin: KafkaAdmin, serde: AvroSerde): TopicRecords {
  return async function* (topic, q, signal) {
    const ends = await admin.endOffsets(topic);
    const last = q.last === undefined ? undefined : BigInt(q.last);
    const from = new Map([...ends].map(([p, o]) => [p, last === undefined || o.high - last < o.low ? o.low : o.high - last]));
    const to = new Map([...ends].map(([p, o]) => [p, o.high]));
    for await (const r of streamTopicRange(connection, admin, topic, { from, to, keyPrefix: q.keyPrefix, signal })) {
      const value = await decodeOrMark(serde, topic, r.value);
      yield { topic, partition: r.partition, offset: r.offset.toString(), timestamp: new Date(r.timestamp).toISOString(), key: r.key, value };
    }
  };
}
