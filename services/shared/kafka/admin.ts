/**
 * Cluster administration the runtime needs: topics from TOPIC_SPECS (created when missing, with their partition
 * counts and configs), end offsets, a consumer group's committed offsets, and a cheap reachability probe.
 * Offsets are bigint in this module's API (Kafka offsets are int64).
 */
import { randomUUID } from 'node:crypto';
import kafkajs, { Partitioners, type Admin } from 'kafkajs';

// Not a named export of kafkajs' CommonJS module under ESM (cjs-module-lexer does not see it): read it off the default.
const { ConfigResourceTypes } = kafkajs;
import type { TopicSpec } from '../topics.js';
import type { KafkaConnection } from './client.js';

export interface PartitionOffsets {
  /** Log start offset. */
  readonly low: bigint;
  /** High watermark: the offset the next record will get. */
  readonly high: bigint;
}

export class KafkaAdmin {
  private readonly admin: Admin;
  private connected: Promise<void> | undefined;

  constructor(
    readonly connection: KafkaConnection,
    opts: { retries?: number } = {},
  ) {
    this.admin = connection.kafka.admin({ retry: { retries: opts.retries ?? 5, initialRetryTime: 100, maxRetryTime: 1_000 } });
  }

  private async ready(): Promise<Admin> {
    this.connected ??= this.admin.connect().catch((err: unknown) => {
      this.connected = undefined;
      throw err;
    });
    await this.connected;
    return this.admin;
  }

  /** Creates the topics of `specs` that do not exist yet; leaves existing ones alone. Returns the created names. */
  async ensureTopics(specs: readonly TopicSpec[]): Promise<string[]> {
    const admin = await this.ready();
    const existing = new Set(await admin.listTopics());
    const missing = specs.filter((s) => !existing.has(s.name));
    if (missing.length === 0) return [];
    await admin.createTopics({
      waitForLeaders: true,
      topics: missing.map((s) => ({
        topic: s.name,
        numPartitions: s.partitions,
        // -1: the broker's default.replication.factor (KIP-464).
        replicationFactor: -1,
        configEntries: Object.entries(s.config).map(([name, value]) => ({ name, value })),
      })),
    });
    return missing.map((s) => s.name);
  }

  /**
   * Sets `retention.ms` of existing topics to their spec's where it differs (RAW_LOG_RETENTION_DAYS changed since the
   * topic was created). alterConfigs replaces a topic's overrides, so the spec's other settings are sent with it.
   * Returns the topics changed.
   */
  async alignRetention(specs: readonly TopicSpec[]): Promise<string[]> {
    const admin = await this.ready();
    const wanted = specs.filter((s) => s.config['retention.ms'] !== undefined);
    const described = await admin.describeConfigs({
      includeSynonyms: false,
      resources: wanted.map((s) => ({ type: ConfigResourceTypes.TOPIC, name: s.name, configNames: ['retention.ms'] })),
    });
    const current = new Map(
      described.resources.map((r) => [r.resourceName, r.configEntries.find((c) => c.configName === 'retention.ms')?.configValue]),
    );
    const differing = wanted.filter((s) => current.has(s.name) && current.get(s.name) !== s.config['retention.ms']);
    if (differing.length === 0) return [];
    await admin.alterConfigs({
      validateOnly: false,
      resources: differing.map((s) => ({
        type: ConfigResourceTypes.TOPIC,
        name: s.name,
        configEntries: Object.entries(s.config).map(([name, value]) => ({ name, value })),
      })),
    });
    return differing.map((s) => s.name);
  }

  async topicExists(topic: string): Promise<boolean> {
    const admin = await this.ready();
    return (await admin.listTopics()).includes(topic);
  }

  /** Low and high watermark of every partition of a topic. */
  async endOffsets(topic: string): Promise<Map<number, PartitionOffsets>> {
    const admin = await this.ready();
    const rows = await admin.fetchTopicOffsets(topic);
    return new Map(rows.map((r) => [r.partition, { low: BigInt(r.low), high: BigInt(r.high) }]));
  }

  /**
   * Per partition, the first offset whose record timestamp is at or after `timestampMs` (Kafka's offsetsForTimes);
   * the high watermark for a partition with no such record.
   */
  async offsetsForTimes(topic: string, timestampMs: number): Promise<Map<number, bigint>> {
    const admin = await this.ready();
    const rows = await admin.fetchTopicOffsetsByTimestamp(topic, Math.max(0, Math.floor(timestampMs)));
    return new Map(rows.map((r) => [r.partition, BigInt(r.offset)]));
  }

  /** A group's committed offsets on a topic; null for a partition without one. */
  async committedOffsets(groupId: string, topic: string): Promise<Map<number, bigint | null>> {
    const admin = await this.ready();
    const [entry] = await admin.fetchOffsets({ groupId, topics: [topic] });
    return new Map((entry?.partitions ?? []).map((p) => [p.partition, Number(p.offset) < 0 ? null : BigInt(p.offset)]));
  }

  /**
   * Sets the committed offsets of a group that has no running member (a new group, e.g. started at the current end).
   * NOTE: kafkajs' admin.setOffsets joins the group with a full consumer and waits out a 5 s fetch; an offset
   * commit inside a (one-off) transaction needs no group membership and takes a few round trips.
   */
  async setGroupOffsets(groupId: string, topic: string, offsets: ReadonlyMap<number, bigint>): Promise<void> {
    if (offsets.size === 0) return;
    const producer = this.connection.kafka.producer({
      transactionalId: `offsets-${groupId}-${randomUUID()}`,
      maxInFlightRequests: 1,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    await producer.connect();
    try {
      const tx = await producer.transaction();
      await tx.sendOffsets({
        consumerGroupId: groupId,
        topics: [{ topic, partitions: [...offsets].map(([partition, offset]) => ({ partition, offset: offset.toString() })) }],
      });
      await tx.commit();
    } finally {
      await producer.disconnect();
    }
  }

  /** Deletes consumer groups (empty ones: throw-away readers, finished test runs); unknown groups are ignored. */
  async deleteGroups(groupIds: readonly string[]): Promise<void> {
    if (groupIds.length === 0) return;
    const admin = await this.ready();
    await admin.deleteGroups([...groupIds]).catch(() => undefined);
  }

  /** Whether the cluster answers a metadata request within `timeoutMs`. */
  async probe(timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const attempt = (async () => {
      const admin = await this.ready();
      const cluster = await admin.describeCluster();
      return cluster.brokers.length > 0;
    })().catch(() => false);
    try {
      return await Promise.race([attempt, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    if (this.connected) await this.admin.disconnect().catch(() => undefined);
    this.connected = undefined;
  }
}
