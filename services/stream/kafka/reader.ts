/**
 * Reads a topic from given offsets up to its end, decoded, read_committed: what an operator's tool (services/bin/decode.ts)
 * and the integration tests need. A throw-away consumer group (`<prefix>reader-<random>`) is positioned at the start
 * offsets, consumes until its position reaches the end offsets measured when the read started, and is deleted.
 */
import { randomUUID } from 'node:crypto';
import type { TopicName } from '../../shared/topics.js';
import type { KafkaAdmin } from '../../shared/kafka/admin.js';
import type { KafkaConnection } from '../../shared/kafka/client.js';
import { GroupConsumer } from '../../shared/kafka/consumer.js';
import { UndecodableRecordError, type AvroSerde } from './serde.js';

export interface ReadRecord<V = unknown> {
  readonly partition: number;
  readonly offset: bigint;
  readonly key: string;
  /** Decoded value; null for a tombstone; `{ undecodable: reason, base64 }` for bytes no registered schema reads. */
  readonly value: V;
  readonly timestamp: number;
  readonly headers: Readonly<Record<string, string>>;
}

export interface ReadOptions {
  /** Start offset per partition (default: the log start of every partition). */
  readonly from?: ReadonlyMap<number, bigint>;
  readonly timeoutMs?: number;
}

/** The end offsets of a topic now: pass them as `from` later to read only what was written in between. */
export async function topicEnds(admin: KafkaAdmin, topic: string): Promise<Map<number, bigint>> {
  return new Map([...(await admin.endOffsets(topic))].map(([p, o]) => [p, o.high]));
}

/** A record as stored: the value's bytes undecoded. */
export type RawRecord = ReadRecord<Buffer | null>;

/** Records of a topic from `from` (default: the log start) to its end when the read started, read_committed. */
export async function readTopicRaw(
  connection: KafkaConnection,
  admin: KafkaAdmin,
  topic: string,
  opts: ReadOptions = {},
): Promise<RawRecord[]> {
  const ends = await admin.endOffsets(topic);
  const start = new Map([...ends].map(([p, o]) => [p, opts.from?.get(p) ?? o.low]));
  const pending = new Set([...ends].filter(([p, o]) => start.get(p)! < o.high).map(([p]) => p));
  if (pending.size === 0) return [];
  const groupId = connection.groupId(`reader-${randomUUID()}`);
  await admin.setGroupOffsets(groupId, topic, start);
  const records: RawRecord[] = [];
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const advance = (partition: number, next: bigint): void => {
    if (next >= ends.get(partition)!.high) pending.delete(partition);
    if (pending.size === 0) done();
  };
  const consumer = new GroupConsumer(connection, {
    groupId,
    topics: [topic],
    partitionsConsumedConcurrently: 1,
    onAssigned: () => undefined,
    onBatch: async (batch) => {
      for (const r of batch.records) {
        if (r.offset >= ends.get(r.partition)!.high) break;
        records.push({ partition: r.partition, offset: r.offset, key: r.key, value: r.value, timestamp: r.timestamp, headers: r.headers });
      }
      const last = batch.records.at(-1);
      if (last) batch.resolve(last.offset);
    },
    onPosition: (_topic, partition, next) => advance(partition, next),
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    await consumer.start();
    await Promise.race([
      finished,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`reading ${topic}: end not reached within ${opts.timeoutMs ?? 30_000} ms`)), opts.timeoutMs ?? 30_000);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    await consumer.stop();
    await admin.deleteGroups([groupId]);
  }
  return records.sort((a, b) => a.partition - b.partition || (a.offset < b.offset ? -1 : a.offset > b.offset ? 1 : 0));
}

/** Like readTopicRaw, values decoded into the domain types by the serde. */
export async function readTopic<V = unknown>(
  connection: KafkaConnection,
  admin: KafkaAdmin,
  serde: AvroSerde,
  topic: TopicName,
  opts: ReadOptions = {},
): Promise<Array<ReadRecord<V>>> {
  const raw = await readTopicRaw(connection, admin, topic, opts);
  const out: Array<ReadRecord<V>> = [];
  for (const r of raw) out.push({ ...r, value: (await decodeOrMark(serde, topic, r.value)) as V });
  return out;
}

/**
 * A record's value decoded into its domain type; null for a tombstone; `{ undecodable: reason, base64 }` for bytes no
 * registered schema reads. Throws when the registry cannot be reached.
 */
export async function decodeOrMark(serde: AvroSerde, topic: TopicName, bytes: Buffer | null): Promise<unknown> {
  if (bytes === null) return null;
  try {
    return await serde.decode(topic, bytes);
  } catch (err) {
    if (!(err instanceof UndecodableRecordError)) throw err;
    return { undecodable: err.message, base64: bytes.toString('base64') };
  }
}

export interface RangeOptions {
  /** First offset per partition to read. */
  readonly from: ReadonlyMap<number, bigint>;
  /** Offset per partition to stop before (exclusive). */
  readonly to: ReadonlyMap<number, bigint>;
  /** Records with other keys are skipped before they are queued (cheap filtering, e.g. one workspace's). */
  readonly keyPrefix?: string;
  /** Most records queued ahead of the reader (default 1000): fetching waits while the reader is behind. */
  readonly highWaterMark?: number;
  readonly signal?: AbortSignal;
}

/**
 * Streams records of a topic between per-partition offsets, read_committed, as an async iterable: constant memory,
 * and fetching waits (with heartbeats) while the caller is behind, so a slow reader slows the consumer, never the
 * other way round. The consumer is a throw-away group of its own (`<prefix>range-<random>`, positioned and then
 * deleted like readTopicRaw's): it never joins or commits for a live group. Records come partition by partition
 * interleaved in fetch order; each partition's records are in offset order.
 */
export async function* streamTopicRange(
  connection: KafkaConnection,
  admin: KafkaAdmin,
  topic: string,
  opts: RangeOptions,
): AsyncGenerator<RawRecord> {
  const pending = new Set([...opts.from].filter(([p, o]) => o < (opts.to.get(p) ?? 0n)).map(([p]) => p));
  if (pending.size === 0) return;
  // Only these partitions are read (a partition with an empty range has no committed start: it would be read from
  // its default position, outside the range).
  const ranged: ReadonlySet<number> = new Set(pending);
  const groupId = connection.groupId(`range-${randomUUID()}`);
  await admin.setGroupOffsets(groupId, topic, new Map([...opts.from].filter(([p]) => pending.has(p))));
  const high = opts.highWaterMark ?? 1000;
  const queue: RawRecord[] = [];
  let failure: Error | undefined;
  let wakeReader: (() => void) | undefined;
  let wakeFetcher: (() => void) | undefined;
  const notifyReader = (): void => {
    wakeReader?.();
    wakeReader = undefined;
  };
  const finished = (): boolean => pending.size === 0 || opts.signal?.aborted === true || failure !== undefined;
  const consumer = new GroupConsumer(connection, {
    groupId,
    topics: [topic],
    partitionsConsumedConcurrently: 1,
    onAssigned: (assignment) => {
      const idle = (assignment.get(topic) ?? []).filter((p) => !ranged.has(p));
      if (idle.length > 0) consumer.pause(topic, idle);
    },
    onBatch: async (batch) => {
      if (!ranged.has(batch.partition)) return;
      const start = opts.from.get(batch.partition) ?? 0n;
      const end = opts.to.get(batch.partition) ?? 0n;
      for (const r of batch.records) {
        if (r.offset >= end) break;
        if (r.offset < start) continue;
        if (opts.keyPrefix !== undefined && !r.key.startsWith(opts.keyPrefix)) continue;
        queue.push({ partition: r.partition, offset: r.offset, key: r.key, value: r.value, timestamp: r.timestamp, headers: r.headers });
        notifyReader();
        while (queue.length >= high && !finished()) {
          // The reader is behind: wait for it, keeping this member's session alive meanwhile.
          await new Promise<void>((resolve) => {
            wakeFetcher = resolve;
            setTimeout(resolve, 2_000);
          });
          wakeFetcher = undefined;
          await batch.heartbeat().catch(() => undefined);
        }
        if (finished()) return;
      }
      const last = batch.records.at(-1);
      if (last) batch.resolve(last.offset);
    },
    onPosition: (_topic, partition, next) => {
      if (next >= (opts.to.get(partition) ?? 0n)) pending.delete(partition);
      if (pending.size === 0) notifyReader();
    },
    onCrash: (err) => {
      failure = err;
      notifyReader();
    },
  });
  const onAbort = (): void => notifyReader();
  opts.signal?.addEventListener('abort', onAbort);
  try {
    await consumer.start();
    for (;;) {
      while (queue.length > 0) {
        if (opts.signal?.aborted) return;
        yield queue.shift()!;
        if (queue.length < high / 2) wakeFetcher?.();
      }
      if (failure) throw failure;
      if (pending.size === 0 || opts.signal?.aborted) return;
      await new Promise<void>((resolve) => {
        wakeReader = resolve;
        setTimeout(resolve, 1_000); // a position change without records (transaction markers) also ends a partition
      });
    }
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
    wakeFetcher?.();
    await consumer.stop();
    await admin.deleteGroups([groupId]);
  }
}
