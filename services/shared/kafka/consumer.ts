/**
 * A consumer group member, in the service's terms. Reads read_committed (records of open or aborted transactions
 * are never seen), never commits on its own (offsets are committed by the caller: inside a transaction with
 * sendOffsets, or with commit() after an idempotent side effect), and resolves a batch's records only when told.
 *
 * Co-partitioning: a stage with a state store also subscribes to its changelog. The `co-partitioned` assigner gives
 * partition p of every subscribed topic to the same member (p modulo the sorted member list), so the member that
 * owns events.raw/p also reads events.dedupe-state/p to restore its store (the Kafka Streams arrangement).
 */
import { AssignerProtocol, type Consumer, type KafkaMessage, type PartitionAssigner } from 'kafkajs';
import type { KafkaConnection } from './client.js';
import { withRetries, type Backoff } from '../retry.js';
import { sleep } from '../sleep.js';

/** Starting a member again after a crash kafkajs does not recover from: 2 s, doubling to 10 s (after a first 1 s). */
const REVIVAL_BACKOFF: Backoff = { firstMs: 2_000, maxMs: 10_000, attempts: Infinity };

export interface ConsumedRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: bigint;
  readonly key: string;
  /** null: a tombstone. */
  readonly value: Buffer | null;
  /** Epoch ms (producer time). */
  readonly timestamp: number;
  readonly headers: Readonly<Record<string, string>>;
}

export interface ConsumedBatch {
  readonly topic: string;
  readonly partition: number;
  readonly records: readonly ConsumedRecord[];
  readonly highWatermark: bigint;
  /** Marks the records up to `offset` as consumed by this member: the next fetch starts after it. */
  resolve(offset: bigint): void;
  /** Keeps the group session alive during long work; throws when the group is rebalancing. */
  heartbeat(): Promise<void>;
  /** True when a seek made this batch obsolete. */
  isStale(): boolean;
  isRunning(): boolean;
}

/** Assignment of a group generation: topic → partitions. */
export type Assignment = ReadonlyMap<string, readonly number[]>;

export interface GroupConsumerOptions {
  readonly groupId: string;
  readonly topics: readonly string[];
  /** Partition p of every topic goes to the same member (state store changelogs). */
  readonly coPartitioned?: boolean;
  /** Batches of different partitions processed at the same time. */
  readonly partitionsConsumedConcurrently?: number;
  /** Most bytes one fetch returns of one partition (default 1 MiB): how large a batch can be. */
  readonly maxBytesPerPartition?: number;
  /** Called synchronously when this member joined a generation, before its first fetch. */
  onAssigned(assignment: Assignment, memberId: string): void;
  onBatch(batch: ConsumedBatch): Promise<void>;
  /**
   * Called after every processed batch, including batches that held only transaction markers or aborted records
   * (which never reach onBatch): the member's position on topic/partition is now `nextOffset`.
   */
  onPosition?(topic: string, partition: number, nextOffset: bigint): void;
  /** The member crashed; it is started again either way (by kafkajs, or by this class after a backoff). */
  onCrash?(err: Error): void;
}

/** p → members[p % n] for every subscribed topic, members sorted by id (the same on every member). */
export const coPartitionedAssigner: PartitionAssigner = ({ cluster }) => ({
  name: 'CoPartitioned',
  version: 1,
  async assign({ members, topics }) {
    const ids = members.map((m) => m.memberId).sort();
    const plan = new Map<string, Record<string, number[]>>(ids.map((id) => [id, {}]));
    for (const topic of topics) {
      const partitions = cluster.findTopicPartitionMetadata(topic).map((m) => m.partitionId).sort((a, b) => a - b);
      for (const p of partitions) {
        const owner = plan.get(ids[p % ids.length]!)!;
        (owner[topic] ??= []).push(p);
      }
    }
    return ids.map((memberId) => ({
      memberId,
      memberAssignment: AssignerProtocol.MemberAssignment.encode({ version: 1, assignment: plan.get(memberId)!, userData: Buffer.alloc(0) }),
    }));
  },
  protocol({ topics }) {
    return { name: 'CoPartitioned', metadata: AssignerProtocol.MemberMetadata.encode({ version: 1, topics, userData: Buffer.alloc(0) }) };
  },
});

const toRecord = (topic: string, partition: number, m: KafkaMessage): ConsumedRecord => ({
  topic,
  partition,
  offset: BigInt(m.offset),
  key: m.key ? m.key.toString('utf8') : '',
  value: m.value,
  timestamp: Number(m.timestamp),
  headers: Object.fromEntries(
    Object.entries(m.headers ?? {}).map(([k, v]) => [k, Array.isArray(v) ? v.map(String).join(',') : v === undefined ? '' : v.toString()]),
  ),
});

export class GroupConsumer {
  private consumer: Consumer | undefined;
  private stopped = false;
  private revival: AbortController | undefined;

  constructor(
    private readonly connection: KafkaConnection,
    private readonly opts: GroupConsumerOptions,
  ) {}

  async start(): Promise<void> {
    this.stopped = false;
    const session = this.connection.sessionTimeoutMs;
    const consumer = this.connection.kafka.consumer({
      groupId: this.opts.groupId,
      sessionTimeout: session,
      heartbeatInterval: Math.max(100, Math.min(1_000, Math.floor(session / 5))),
      rebalanceTimeout: 30_000,
      // Low fetch wait: a resumed partition (after a restore) is fetched soon, and records flow with low latency.
      maxWaitTimeInMs: 200,
      maxBytesPerPartition: this.opts.maxBytesPerPartition ?? 1024 * 1024,
      maxBytes: Math.max(10 * 1024 * 1024, 4 * (this.opts.maxBytesPerPartition ?? 0)),
      readUncommitted: false,
      ...(this.opts.coPartitioned ? { partitionAssigners: [coPartitionedAssigner] } : {}),
      // A crash (e.g. the broker down longer than the retries) restarts the member instead of leaving it dead.
      retry: { retries: 8, initialRetryTime: 200, maxRetryTime: 2_000, restartOnFailure: async () => true },
    });
    this.consumer = consumer;
    consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
      const assignment = new Map(Object.entries(payload.memberAssignment).map(([t, ps]) => [t, [...ps]]));
      this.opts.onAssigned(assignment, payload.memberId);
    });
    if (this.opts.onPosition) {
      const onPosition = this.opts.onPosition;
      consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
        onPosition(payload.topic, payload.partition, BigInt(payload.lastOffset) + 1n);
      });
    }
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      this.opts.onCrash?.(payload.error);
      // kafkajs restarts a member only after retriable errors; after any other it would stay dead.
      if (!payload.restart) this.revive(consumer);
    });
    await consumer.connect();
    await consumer.subscribe({ topics: [...this.opts.topics], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: this.opts.partitionsConsumedConcurrently ?? 3,
      eachBatch: async ({ batch, resolveOffset, heartbeat, isStale, isRunning }) => {
        await this.opts.onBatch({
          topic: batch.topic,
          partition: batch.partition,
          records: batch.messages.map((m) => toRecord(batch.topic, batch.partition, m)),
          highWatermark: BigInt(batch.highWatermark),
          resolve: (offset) => resolveOffset(offset.toString()),
          heartbeat,
          isStale,
          isRunning,
        });
      },
    });
  }

  /**
   * Replaces a member kafkajs gave up on with a new one (same group): a second after the crash, then again while
   * starting fails, each wait doubling up to 10 s. stop() ends it, waits included.
   */
  private revive(dead: Consumer): void {
    if (this.stopped || this.consumer !== dead || this.revival) return;
    const revival = new AbortController();
    this.revival = revival;
    const { signal } = revival;
    // The member to replace: the crashed one, then the one whose start failed.
    let dying = dead;
    void sleep(1_000, signal)
      .then(() =>
        withRetries(
          async () => {
            if (this.stopped || this.consumer !== dying) return;
            await dying.disconnect().catch(() => undefined);
            if (!this.stopped) await this.start();
          },
          REVIVAL_BACKOFF,
          {
            signal,
            onFailure: (err) => {
              this.opts.onCrash?.(err);
              dying = this.consumer ?? dying;
            },
          },
        ),
      )
      // Stopped meanwhile (the abort), or a failure p-retry does not retry (already reported to onCrash).
      .catch(() => undefined)
      .finally(() => {
        if (this.revival === revival) this.revival = undefined;
      });
  }

  pause(topic: string, partitions: readonly number[]): void {
    if (partitions.length > 0) this.consumer?.pause([{ topic, partitions: [...partitions] }]);
  }

  resume(topic: string, partitions: readonly number[]): void {
    if (partitions.length > 0) this.consumer?.resume([{ topic, partitions: [...partitions] }]);
  }

  /** The next fetch of topic/partition starts at `offset`. */
  seek(topic: string, partition: number, offset: bigint): void {
    this.consumer?.seek({ topic, partition, offset: offset.toString() });
  }

  /** Commits the group's next offset outside any transaction (for consumers whose side effect is idempotent). */
  async commit(topic: string, partition: number, nextOffset: bigint): Promise<void> {
    await this.consumer?.commitOffsets([{ topic, partition, offset: nextOffset.toString() }]);
  }

  /** Leaves the group after the batches in flight are done. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.revival?.abort();
    this.revival = undefined;
    const c = this.consumer;
    this.consumer = undefined;
    if (c) await c.disconnect();
  }
}
