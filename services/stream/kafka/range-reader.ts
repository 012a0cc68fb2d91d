/**
 * The Kafka runtime's RangeReader (stream/range.ts). Bounds come from the broker's offsets for a time; a stage's
 * outputs carry their input's timestamp, which is just after the event was received, so the bounds take a minute more
 * on each side and the caller filters on the receive time. Reading goes through a throw-away consumer group
 * (stream/kafka/reader.ts), so the live groups' offsets never move.
 */
import type { KafkaAdmin } from '../../shared/kafka/admin.js';
import type { KafkaConnection } from '../../shared/kafka/client.js';
import { decodeOrMark, streamTopicRange, type RawRecord } from './reader.js';
import type { AvroSerde } from './serde.js';
import type { TopicName } from '../../shared/topics.js';
import type { InputRecord } from '../contract.js';
import type { Positions, RangeChunk, RangeReader, RangeReadOptions } from '../range.js';

/** How far a record's timestamp may lie from its event's receive time (the gateway's deadline, with room). */
const TIMESTAMP_SLACK_MS = 60_000;

export class KafkaRangeReader implements RangeReader {
  readonly runtime = 'kafka' as const;

  constructor(
    private readonly deps: { readonly connection: KafkaConnection; readonly admin: KafkaAdmin; readonly serde: AvroSerde },
  ) {}

  async bounds(topic: TopicName, fromMs: number, toMs: number): Promise<{ start: Positions; end: Positions }> {
    const [start, end] = await Promise.all([
      this.deps.admin.offsetsForTimes(topic, fromMs - TIMESTAMP_SLACK_MS),
      this.deps.admin.offsetsForTimes(topic, Math.min(toMs + TIMESTAMP_SLACK_MS, Date.now() + TIMESTAMP_SLACK_MS)),
    ]);
    const positions = (m: ReadonlyMap<number, bigint>): Positions => Object.fromEntries([...m].map(([p, o]) => [String(p), o.toString()]));
    return { start: positions(start), end: positions(end) };
  }

  async read(topic: TopicName, cursor: Positions, end: Positions, onChunk: (chunk: RangeChunk) => Promise<void>, opts: RangeReadOptions): Promise<void> {
    const ends = new Map(Object.entries(end).map(([p, e]) => [Number(p), BigInt(e)]));
    const at = new Map([...ends].map(([p, e]) => [p, BigInt(cursor[String(p)] ?? e.toString())]));
    const buffered = new Map<number, RawRecord[]>();
    const flush = async (p: number): Promise<void> => {
      const raw = buffered.get(p) ?? [];
      if (raw.length === 0) return;
      buffered.delete(p);
      const records: Array<InputRecord<unknown>> = [];
      for (const r of raw) {
        records.push({ topic, partition: p, offset: r.offset.toString(), key: r.key, value: await decodeOrMark(this.deps.serde, topic, r.value), timestamp: r.timestamp });
      }
      const next = raw.at(-1)!.offset + 1n;
      await onChunk({ partition: p, records, next: next.toString() });
      at.set(p, next);
    };
    for await (const r of streamTopicRange(this.deps.connection, this.deps.admin, topic, {
      from: at,
      to: ends,
      // Keys start with the workspace id (envelopeKey): other workspaces' records are skipped undecoded.
      ...(opts.workspaceId === undefined ? {} : { keyPrefix: `${opts.workspaceId}:` }),
      highWaterMark: opts.chunkSize * 4,
      signal: opts.signal,
    })) {
      const list = buffered.get(r.partition) ?? [];
      list.push(r);
      buffered.set(r.partition, list);
      if (list.length >= opts.chunkSize) await flush(r.partition);
    }
    if (opts.signal.aborted) return;
    for (const p of [...buffered.keys()]) await flush(p);
    // Every partition reached its end (the rest of it was other workspaces' records or transaction markers).
    for (const [p, e] of ends) if (at.get(p)! < e) await onChunk({ partition: p, records: [], next: e.toString() });
  }
}
