/**
 * Cluster administration the runtime needs: topics from TOPIC_SPECS (created when missing, with their partition
 * counts and configs), end offsets, a consumer group's committed offsets, and a cheap reachability probe.
 * Offsets are bigint in this module's API (Kafka offsets are int64).
 */
import { Admin, ConfigResourceTypes } from '@platformatic/kafka';
import type { TopicSpec } from '../topics.js';
import type { KafkaConnection } from './client.js';

export interface PartitionOffsets {
  /** Log start offset. */
  readonly low: bigint;
  /** High watermark: the offset the next record will get. */
  readonly high: bigint;
}

/** ListOffsets' special timestamps: the log start and the next offset to be written. */
const EARLIEST = -2n;
const LATEST = -1n;

/** Whether a @platformatic/kafka error (or one of the errors it wraps) carries this Kafka error name. */
const hasApiError = (err: unknown, apiId: string): boolean => {
  const find = (err as { findBy?: (key: string, value: unknown) => unknown }).findBy;
  return typeof find === 'function' && find.call(err, 'apiId', apiId) !== undefined;
};

export class KafkaAdmin {
  private readonly admin: Admin;

  constructor(
    readonly connection: KafkaConnection,
    opts: { retries?: number } = {},
  ) {
    this.admin = new Admin({
      clientId: connection.clientIdFor('admin'),
      bootstrapBrokers: [...connection.settings.brokers],
      // Short connection timeout: the readiness probe must answer within its budget when the broker is gone.
      connectTimeout: 1_000,
      timeout: 10_000,
      retries: opts.retries ?? 5,
      retryDelay: (_client, _op, attempt) => Math.min(100 * 2 ** (attempt - 1), 1_000),
    });
  }

  /** Partition ids of a topic, from fresh metadata. */
  private async partitionsOf(topic: string): Promise<number[]> {
    const metadata = await this.admin.metadata({ topics: [topic], forceUpdate: true });
    const count = metadata.topics.get(topic)?.partitionsCount ?? 0;
    return Array.from({ length: count }, (_, p) => p);
  }

  /** Creates the topics of `specs` that do not exist yet; leaves existing ones alone. Returns the created names. */
  async ensureTopics(specs: readonly TopicSpec[]): Promise<string[]> {
    const existing = new Set(await this.admin.listTopics());
    const missing = specs.filter((s) => !existing.has(s.name));
    if (missing.length === 0) return [];
    const created: string[] = [];
    // One request per topic: the client applies one list of configs to every topic of a request.
    for (const s of missing) {
      try {
        await this.admin.createTopics({
          // replicas -1: the broker's default.replication.factor (KIP-464).
          topics: [{ topic: s.name, partitions: s.partitions, replicas: -1 }],
          configs: Object.entries(s.config).map(([name, value]) => ({ name, value })),
        });
        created.push(s.name);
      } catch (err) {
        // Another process (a replica starting at the same time) created it first.
        if (!hasApiError(err, 'TOPIC_ALREADY_EXISTS')) throw err;
      }
    }
    await this.waitForLeaders(missing.map((s) => s.name));
    return created;
  }

  /** Returns once every partition of `topics` has a leader: producing or listing offsets before that fails. */
  private async waitForLeaders(topics: readonly string[], timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const metadata = await this.admin.metadata({ topics: [...topics], forceUpdate: true }).catch(() => undefined);
      const ready = metadata !== undefined && topics.every((t) => {
        const m = metadata.topics.get(t);
        return m !== undefined && m.partitions.length === m.partitionsCount && m.partitions.every((p) => p.leader >= 0);
      });
      if (ready) return;
      if (Date.now() > deadline) throw new Error(`topics ${topics.join(', ')} have no leader after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /**
   * Sets `retention.ms` of existing topics to their spec's where it differs (RAW_LOG_RETENTION_DAYS changed since the
   * topic was created). alterConfigs replaces a topic's overrides, so the spec's other settings are sent with it.
   * Returns the topics changed.
   */
  async alignRetention(specs: readonly TopicSpec[]): Promise<string[]> {
    const wanted = specs.filter((s) => s.config['retention.ms'] !== undefined);
    if (wanted.length === 0) return [];
    const described = await this.admin.describeConfigs({
      includeSynonyms: false,
      resources: wanted.map((s) => ({ resourceType: ConfigResourceTypes.TOPIC, resourceName: s.name, configurationKeys: ['retention.ms'] })),
    });
    const current = new Map(described.map((r) => [r.resourceName, r.configs.find((c) => c.name === 'retention.ms')?.value]));
    const differing = wanted.filter((s) => current.has(s.name) && current.get(s.name) !== s.config['retention.ms']);
    if (differing.length === 0) return [];
    await this.admin.alterConfigs({
      validateOnly: false,
      resources: differing.map((s) => ({
        resourceType: ConfigResourceTypes.TOPIC,
        resourceName: s.name,
        configs: Object.entries(s.config).map(([name, value]) => ({ name, value })),
      })),
    });
    return differing.map((s) => s.name);
  }

  async topicExists(topic: string): Promise<boolean> {
    return (await this.admin.listTopics()).includes(topic);
  }

  /** ListOffsets of every partition of a topic at one special timestamp or a record time. */
  private async listOffsets(topic: string, timestamp: bigint): Promise<Map<number, bigint>> {
    const partitions = await this.partitionsOf(topic);
    if (partitions.length === 0) return new Map();
    const [listed] = await this.admin.listOffsets({
      topics: [{ name: topic, partitions: partitions.map((partitionIndex) => ({ partitionIndex, timestamp })) }],
    });
    return new Map((listed?.partitions ?? []).map((p) => [p.partitionIndex, p.offset]));
  }

  /** Low and high watermark of every partition of a topic. */
  async endOffsets(topic: string): Promise<Map<number, PartitionOffsets>> {
    const [low, high] = await Promise.all([this.listOffsets(topic, EARLIEST), this.listOffsets(topic, LATEST)]);
    return new Map([...high].map(([p, h]) => [p, { low: low.get(p) ?? 0n, high: h }]));
  }

  /**
   * Per partition, the first offset whose record timestamp is at or after `timestampMs` (Kafka's offsetsForTimes);
   * the high watermark for a partition with no such record.
   */
  async offsetsForTimes(topic: string, timestampMs: number): Promise<Map<number, bigint>> {
    const [found, high] = await Promise.all([this.listOffsets(topic, BigInt(Math.max(0, Math.floor(timestampMs)))), this.listOffsets(topic, LATEST)]);
    // The broker answers -1 when no record is that recent.
    return new Map([...high].map(([p, h]) => [p, found.get(p) === undefined || found.get(p)! < 0n ? h : found.get(p)!]));
  }

  /** A group's committed offsets on a topic; null for a partition without one. */
  async committedOffsets(groupId: string, topic: string): Promise<Map<number, bigint | null>> {
    const partitions = await this.partitionsOf(topic);
    // requireStable: an offset committed in a transaction still completing is waited for, not read as it was before
    // (a new owner reads its start position right after fencing the old one; KIP-447).
    const [group] = await this.admin.listConsumerGroupOffsets({ groups: [{ groupId, topics: [{ name: topic, partitionIndexes: partitions }] }], requireStable: true });
    const committed = new Map((group?.topics.find((t) => t.name === topic)?.partitions ?? []).map((p) => [p.partitionIndex, p.committedOffset]));
    return new Map(partitions.map((p) => {
      const offset = committed.get(p);
      return [p, offset === undefined || offset < 0n ? null : offset];
    }));
  }

  /**
   * Sets the committed offsets of a group that has no running member (a new group, e.g. started at the current end):
   * an OffsetCommit without a generation, which the coordinator accepts only for a group with no members.
   */
  async setGroupOffsets(groupId: string, topic: string, offsets: ReadonlyMap<number, bigint>): Promise<void> {
    if (offsets.size === 0) return;
    await this.admin.alterConsumerGroupOffsets({
      groupId,
      topics: [{ name: topic, partitionOffsets: [...offsets].map(([partition, offset]) => ({ partition, offset })) }],
    });
  }

  /** Deletes topics and creates them again empty, as `specs` says (compacted topics refuse DeleteRecords). */
  async recreateTopics(specs: readonly TopicSpec[]): Promise<void> {
    const names = new Set(specs.map((s) => s.name));
    await this.admin.deleteTopics({ topics: [...names] });
    for (let attempt = 0; (await this.admin.listTopics()).some((t) => names.has(t)); attempt++) {
      if (attempt >= 80) throw new Error(`topics not deleted: ${[...names].join(', ')}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    await this.ensureTopics(specs);
  }

  /** Deletes consumer groups (empty ones: throw-away readers, finished test runs); unknown groups are ignored. */
  async deleteGroups(groupIds: readonly string[]): Promise<void> {
    if (groupIds.length === 0) return;
    await this.admin.deleteGroups({ groups: [...groupIds] }).catch(() => undefined);
  }

  /** The ids of the cluster's consumer groups. */
  async listGroups(): Promise<string[]> {
    return [...(await this.admin.listGroups()).keys()];
  }

  /** Whether the cluster answers a metadata request within `timeoutMs`. */
  async probe(timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const attempt = this.admin
      .metadata({ topics: [], forceUpdate: true })
      .then((cluster) => cluster.brokers.size > 0)
      .catch(() => false);
    try {
      return await Promise.race([attempt, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    await this.admin.close().catch(() => undefined);
  }
}
