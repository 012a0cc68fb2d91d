/**
 * A consumer group member, in the service's terms. Reads read_committed (records of open or aborted transactions
 * are never seen), never commits on its own (offsets are committed by the caller: inside a transaction with
 * sendOffsets, or with commitOffsets when nothing else goes with them), and resolves a batch's records only when told.
 *
 * Co-partitioning: a stage with a state store also subscribes to its changelog. The `co-partitioned` assigner gives
 * partition p of every subscribed topic to the same member (p modulo the sorted member list), so the member that
 * owns events.raw/p also reads events.dedupe-state/p to restore its store (the Kafka Streams arrangement).
 */
import { Consumer, FetchIsolationLevels, offsetCommitV9, type GroupAssignment, type GroupPartitionsAssigner } from '@platformatic/kafka';
import type { KafkaConnection } from './client.js';
import { committedTopic, coordinatorConnection, type GroupMember, type NextOffset } from './producer.js';
import { committedBatches, type AbortedTransaction, type FetchedBatch } from './read-committed.js';
import { withRetries, type Backoff } from '../retry.js';
import { sleep } from '../sleep.js';

/** Joining again after the client gave up on a rejoin (the broker gone longer than its retries): 1 s, doubling to 10 s. */
const REJOIN_BACKOFF: Backoff = { firstMs: 1_000, maxMs: 10_000, attempts: Infinity };

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
  /** The broker holds a fetch until this many bytes are there (default 1) or maxWaitMs passed (default 200). */
  readonly minBytes?: number;
  readonly maxWaitMs?: number;
  /**
   * Called synchronously when this member joined a generation, before its first fetch (and with an empty assignment
   * when it lost its group). `member` is what KIP-447 offsets carry (TransactionScope.sendOffsets).
   */
  onAssigned(assignment: Assignment, member: GroupMember): void;
  onBatch(batch: ConsumedBatch): Promise<void>;
  /**
   * Called after every processed batch, including batches that held only transaction markers or aborted records
   * (which never reach onBatch): the member's position on topic/partition is now `nextOffset`.
   */
  onPosition?(topic: string, partition: number, nextOffset: bigint): void;
  /** A fetch round failed after the client's retries, or the member lost its group: it goes on after a backoff. */
  onCrash?(err: Error): void;
}

/** p → members[p % n] for every subscribed topic, members sorted by id (the same on every member). */
export const coPartitionedAssigner: GroupPartitionsAssigner = (_current, members, topics, metadata) => {
  const ids = [...members.keys()].sort();
  const plan = new Map(ids.map((id) => [id, new Map<string, GroupAssignment>()]));
  for (const topic of [...topics].sort()) {
    const count = metadata.topics.get(topic)?.partitionsCount ?? 0;
    for (let p = 0; p < count; p++) {
      const owner = plan.get(ids[p % ids.length]!)!;
      let assigned = owner.get(topic);
      if (!assigned) owner.set(topic, (assigned = { topic, partitions: [] }));
      assigned.partitions.push(p);
    }
  }
  return ids.map((memberId) => ({ memberId, assignments: plan.get(memberId)! }));
};

/** A record as @platformatic/kafka parses it out of a batch. */
interface FetchedRecord {
  readonly timestampDelta: bigint;
  readonly offsetDelta: number;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers: ReadonlyArray<readonly [Buffer | null, Buffer | null]>;
}

interface FetchedPartition {
  readonly partitionIndex: number;
  readonly errorCode: number;
  readonly highWatermark: bigint;
  readonly logStartOffset: bigint;
  readonly abortedTransactions?: readonly AbortedTransaction[] | null;
  readonly records?: ReadonlyArray<FetchedBatch<FetchedRecord> & { readonly firstTimestamp: bigint }> | null;
}

interface FetchAnswer {
  readonly responses: ReadonlyArray<{ readonly topicId: string; readonly partitions: readonly FetchedPartition[] }>;
}

/** A partition this member owns in its current generation. */
interface Owned {
  readonly topic: string;
  readonly partition: number;
  /** The next offset to fetch; undefined until read from the group's committed offset (or the log start). */
  position: bigint | undefined;
  /** Counts seeks: a batch fetched before the last seek is stale. */
  seeks: number;
}

const OFFSET_OUT_OF_RANGE = 1;
const key = (topic: string, partition: number): string => `${topic}:${partition}`;

const toRecord = (topic: string, partition: number, batch: { firstOffset: bigint; firstTimestamp: bigint }, r: FetchedRecord): ConsumedRecord => {
  const headers: Record<string, string> = {};
  for (const [k, v] of r.headers) if (k) headers[k.toString()] = v ? v.toString() : '';
  return {
    topic,
    partition,
    offset: batch.firstOffset + BigInt(r.offsetDelta),
    key: r.key ? r.key.toString('utf8') : '',
    value: r.value,
    timestamp: Number(batch.firstTimestamp + r.timestampDelta),
    headers,
  };
};

/**
 * The group member on @platformatic/kafka: the client joins the group, runs the assignor and heartbeats (rejoining by
 * itself when the group rebalances); the member fetches by itself, with positions of its own, so that partitions can be
 * paused, resumed and sought one by one, and it drops aborted transactions' records itself (read-committed.ts).
 * A new generation is handed to the caller (onAssigned) only between fetch rounds: the batches in flight end first
 * (isRunning() turns false for them at once).
 */
export class GroupConsumer {
  private client: Consumer | undefined;
  /** The client offsets are committed through: kept while stop() lets the batches in flight end (and commit). */
  private committer: Consumer | undefined;
  private stopped = false;
  private loop: Promise<void> | undefined;
  /** Counts generations seen (joins, and losing the group): a batch of an older one is no longer running. */
  private joins = 0;
  private rebalancing = false;
  private pending: { readonly member: GroupMember; readonly assignments: readonly GroupAssignment[] } | undefined;
  private owned = new Map<string, Owned>();
  private readonly paused = new Set<string>();
  /** Aborted to cut the fetch loop's wait short (a partition resumed, a generation joined, stop()). */
  private wakeUp = new AbortController();
  private rejoining: Promise<void> | undefined;
  private revival = new AbortController();

  constructor(
    private readonly connection: KafkaConnection,
    private readonly opts: GroupConsumerOptions,
  ) {}

  /** Resolves once the member has joined its group (and fetches in the background). */
  async start(): Promise<void> {
    this.stopped = false;
    this.revival = new AbortController();
    const session = this.connection.sessionTimeoutMs;
    const client = new Consumer({
      clientId: this.connection.clientIdFor('consumer'),
      bootstrapBrokers: [...this.connection.settings.brokers],
      groupId: this.opts.groupId,
      sessionTimeout: session,
      heartbeatInterval: Math.max(100, Math.min(1_000, Math.floor(session / 5))),
      rebalanceTimeout: 30_000,
      isolationLevel: FetchIsolationLevels.READ_COMMITTED,
      autocommit: false,
      // Low fetch wait by default: a resumed partition (after a restore) is fetched soon, and records flow with low
      // latency. A stage that gathers (Stage.gather) has the broker wait longer for more bytes.
      maxWaitTime: this.opts.maxWaitMs ?? 200,
      minBytes: this.opts.minBytes ?? 1,
      maxBytes: Math.max(10 * 1024 * 1024, 4 * (this.opts.maxBytesPerPartition ?? 0)),
      connectTimeout: 1_000,
      timeout: 10_000,
      retries: 3,
      retryDelay: (_client, _op, attempt) => Math.min(200 * 2 ** (attempt - 1), 2_000),
      ...(this.opts.coPartitioned ? { partitionAssigner: coPartitionedAssigner } : {}),
    });
    this.client = client;
    this.committer = client;
    client.on('consumer:group:join', (p: { memberId: string; generationId: number; assignments: GroupAssignment[] | null }) => {
      this.joins++;
      this.rebalancing = false;
      this.pending = { member: { memberId: p.memberId, generationId: p.generationId }, assignments: p.assignments ?? [] };
      this.poke();
    });
    client.on('consumer:group:rebalance', () => {
      this.rebalancing = true;
    });
    // The client gives up on rejoining (the broker gone longer than its retries): it is a member of no generation now.
    client.on('error', (err: Error) => this.lost(client, err));
    client.topics.trackAll(...this.opts.topics);
    try {
      await client.joinGroup({});
    } catch (err) {
      this.client = undefined;
      this.committer = undefined;
      await client.close(true).catch(() => undefined);
      throw err;
    }
    this.loop = this.run(client);
  }

  pause(topic: string, partitions: readonly number[]): void {
    for (const p of partitions) this.paused.add(key(topic, p));
  }

  resume(topic: string, partitions: readonly number[]): void {
    for (const p of partitions) this.paused.delete(key(topic, p));
    if (partitions.length > 0) this.poke();
  }

  /**
   * Commits offsets of `topic` (the next offset to read, per partition) for the member's generation `member`, in one
   * OffsetCommit to the group's coordinator, outside any transaction: for work whose only Kafka effect is its
   * position (a stage that produced nothing). The coordinator refuses a member of an older generation, as it refuses
   * its transactional offsets (KIP-447), and the refusal is thrown: unlike the client's own commit(), this one never
   * joins the group again to commit anyway. A transactional commit of these partitions still pending when this one
   * is written is older, and the coordinator does not apply it over this one.
   */
  async commitOffsets(member: GroupMember, topic: string, offsets: readonly NextOffset[]): Promise<void> {
    const client = this.committer;
    if (!client) throw new Error('the consumer is stopped: no offsets to commit');
    const coordinator = client.coordinatorId;
    if (coordinator === null) throw new Error(`no coordinator known for group ${this.opts.groupId}`);
    const connection = await coordinatorConnection(client, coordinator, topic, this.opts.groupId);
    await offsetCommitV9.api.async(connection, this.opts.groupId, member.generationId, member.memberId, null, committedTopic(topic, offsets));
  }

  /** The next fetch of topic/partition starts at `offset`; a batch of it in flight is stale. */
  seek(topic: string, partition: number, offset: bigint): void {
    const o = this.owned.get(key(topic, partition));
    if (!o) return;
    o.position = offset;
    o.seeks++;
  }

  /** Leaves the group after the batch in flight is done. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.revival.abort();
    this.poke();
    const client = this.client;
    this.client = undefined;
    await this.loop;
    this.loop = undefined;
    await this.rejoining;
    this.committer = undefined;
    if (client) await client.close(true);
  }

  private poke(): void {
    this.wakeUp.abort();
  }

  /** Waits `ms`, or until poked (a poke since the last wait ends this one at once). */
  private async idle(ms: number): Promise<void> {
    await sleep(ms, this.wakeUp.signal);
    if (this.wakeUp.signal.aborted) this.wakeUp = new AbortController();
  }

  /** The client's rejoin failed: nothing is owned any more; join again after a backoff, until it works or stop(). */
  private lost(client: Consumer, err: Error): void {
    if (this.stopped || this.client !== client) return;
    this.opts.onCrash?.(err);
    this.joins++;
    this.pending = { member: { memberId: client.memberId ?? '', generationId: -1 }, assignments: [] };
    this.poke();
    if (this.rejoining) return;
    const signal = this.revival.signal;
    this.rejoining = withRetries(
      async () => {
        if (!this.stopped && this.client === client) await client.joinGroup({});
      },
      REJOIN_BACKOFF,
      { signal, onRetry: (e) => this.opts.onCrash?.(e) },
    )
      // Stopped meanwhile (the abort): nothing to rejoin.
      .catch(() => undefined)
      .finally(() => {
        this.rejoining = undefined;
      });
  }

  /** Takes the generation the client joined: every position is read again, then the caller is told. */
  private applyJoin(): void {
    const join = this.pending!;
    this.pending = undefined;
    const owned = new Map<string, Owned>();
    const assignment = new Map<string, number[]>();
    for (const a of join.assignments) {
      const partitions = [...a.partitions].sort((x, y) => x - y);
      assignment.set(a.topic, partitions);
      for (const p of partitions) owned.set(key(a.topic, p), { topic: a.topic, partition: p, position: undefined, seeks: 0 });
    }
    this.owned = owned;
    this.opts.onAssigned(assignment, join.member);
  }

  private async run(client: Consumer): Promise<void> {
    let delay = 200;
    while (!this.stopped && this.client === client) {
      try {
        if (this.pending) this.applyJoin();
        const wanted = [...this.owned.values()].filter((o) => !this.paused.has(key(o.topic, o.partition)));
        if (wanted.length === 0) {
          await this.idle(200);
          continue;
        }
        await this.position(client, wanted.filter((o) => o.position === undefined));
        if (this.pending || this.stopped) continue;
        await this.fetchRound(client, wanted);
        delay = 200;
      } catch (err) {
        if (this.stopped || this.client !== client) return;
        // The client retried already (the broker gone, a leader moving): report, wait, go on from the same positions.
        this.opts.onCrash?.(err as Error);
        await this.idle(delay);
        delay = Math.min(delay * 2, 5_000);
      }
    }
  }

  /** Positions of newly owned partitions: the group's committed offset, else the log start. */
  private async position(client: Consumer, unknown: readonly Owned[]): Promise<void> {
    const byTopic = new Map<string, Owned[]>();
    for (const o of unknown) {
      const list = byTopic.get(o.topic);
      if (list) list.push(o);
      else byTopic.set(o.topic, [o]);
    }
    for (const [topic, list] of byTopic) {
      const partitions = list.map((o) => o.partition);
      const committed = (await client.listCommittedOffsets({ topics: [{ topic, partitions }] })).get(topic) ?? [];
      const missing = list.filter((o) => (committed[o.partition] ?? -1n) < 0n).map((o) => o.partition);
      const starts = missing.length > 0 ? ((await client.listOffsets({ topics: [topic], partitions: { [topic]: missing }, timestamp: -2n })).get(topic) ?? []) : [];
      for (const o of list) {
        // A seek meanwhile (or a newer generation) decided already.
        if (o.position !== undefined || this.owned.get(key(o.topic, o.partition)) !== o) continue;
        const c = committed[o.partition] ?? -1n;
        o.position = c >= 0n ? c : (starts[o.partition] ?? 0n);
      }
    }
  }

  /** One fetch per leader of the wanted partitions; their batches processed, `partitionsConsumedConcurrently` at once. */
  private async fetchRound(client: Consumer, wanted: readonly Owned[]): Promise<void> {
    const metadata = await client.metadata({ topics: [...this.opts.topics] });
    const byNode = new Map<number, Map<string, Array<{ o: Owned; offset: bigint }>>>();
    const names = new Map<string, string>();
    for (const o of wanted) {
      const topic = metadata.topics.get(o.topic);
      const leader = topic?.partitions[o.partition]?.leader;
      if (!topic || leader === undefined || leader < 0 || o.position === undefined) continue;
      names.set(topic.id, o.topic);
      const node = byNode.get(leader) ?? new Map<string, Array<{ o: Owned; offset: bigint }>>();
      byNode.set(leader, node);
      const list = node.get(topic.id);
      if (list) list.push({ o, offset: o.position });
      else node.set(topic.id, [{ o, offset: o.position }]);
    }
    const perPartition = this.opts.maxBytesPerPartition ?? 1024 * 1024;
    const answers = await Promise.all(
      [...byNode].map(async ([node, topics]) => {
        const requested = new Map<string, { o: Owned; offset: bigint; seeks: number }>();
        for (const list of topics.values()) for (const r of list) requested.set(key(r.o.topic, r.o.partition), { ...r, seeks: r.o.seeks });
        const request = [...topics].map(([topicId, list]) => ({
          topicId,
          partitions: list.map(({ o, offset }) => ({ partition: o.partition, fetchOffset: offset, partitionMaxBytes: perPartition, currentLeaderEpoch: -1, lastFetchedEpoch: -1 })),
        }));
        let answer: FetchAnswer;
        try {
          answer = (await client.fetch({ node, topics: request })) as unknown as FetchAnswer;
        } catch (err) {
          if (!this.outOfRange(err, names, requested)) throw err;
          return [];
        }
        return answer.responses.flatMap((t) =>
          t.partitions.flatMap((p) => {
            const r = requested.get(key(names.get(t.topicId) ?? t.topicId, p.partitionIndex));
            return r ? [{ ...r, answer: p }] : [];
          }),
        );
      }),
    );
    const work = answers.flat();
    const joins = this.joins;
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < work.length && !this.stopped && this.joins === joins) {
        const w = work[next++]!;
        await this.deliver(w.o, w.offset, w.seeks, joins, w.answer);
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, this.opts.partitionsConsumedConcurrently ?? 3) }, worker));
  }

  /** OFFSET_OUT_OF_RANGE (records deleted by retention under a position): go on from the log start. */
  private outOfRange(err: unknown, names: ReadonlyMap<string, string>, requested: ReadonlyMap<string, { o: Owned; seeks: number }>): boolean {
    const answer = (err as { response?: FetchAnswer }).response;
    const parts = answer?.responses?.flatMap((t) => t.partitions.map((p) => ({ k: key(names.get(t.topicId) ?? t.topicId, p.partitionIndex), p }))) ?? [];
    const reset = parts.filter(({ p }) => p.errorCode === OFFSET_OUT_OF_RANGE);
    if (reset.length === 0 || reset.length !== parts.filter(({ p }) => p.errorCode !== 0).length) return false;
    for (const { k, p } of reset) {
      const r = requested.get(k);
      if (r && r.o.seeks === r.seeks && this.owned.get(k) === r.o) r.o.position = p.logStartOffset >= 0n ? p.logStartOffset : undefined;
    }
    return true;
  }

  /** One partition's answer: its committed records to onBatch; the position moves to what the caller resolved. */
  private async deliver(o: Owned, offset: bigint, seeks: number, joins: number, answer: FetchedPartition): Promise<void> {
    const batches = answer.records ?? [];
    const current = (): boolean => this.owned.get(key(o.topic, o.partition)) === o && o.seeks === seeks && this.joins === joins;
    if (batches.length === 0 || !current()) return;
    const tail = batches[batches.length - 1]!;
    const end = tail.firstOffset + BigInt(tail.lastOffsetDelta) + 1n;
    const records: ConsumedRecord[] = [];
    for (const b of committedBatches(batches, answer.abortedTransactions ?? [])) {
      for (const r of b.records) {
        const rec = toRecord(o.topic, o.partition, b, r);
        if (rec.offset >= offset) records.push(rec);
      }
    }
    let resolved: bigint | undefined;
    if (records.length > 0) {
      await this.opts.onBatch({
        topic: o.topic,
        partition: o.partition,
        records,
        highWatermark: answer.highWatermark,
        resolve: (at) => {
          if (current() && (resolved === undefined || at > resolved)) resolved = at;
        },
        heartbeat: async () => {
          if (this.rebalancing || this.joins !== joins) throw new Error(`group ${this.opts.groupId} is rebalancing`);
        },
        isStale: () => o.seeks !== seeks || this.owned.get(key(o.topic, o.partition)) !== o,
        isRunning: () => !this.stopped && this.joins === joins,
      });
      if (!current() || resolved === undefined) return;
    }
    // Everything delivered was resolved: the position passes the markers and aborted records after it too.
    const position = records.length === 0 || resolved! >= records[records.length - 1]!.offset ? end : resolved! + 1n;
    if (position <= (o.position ?? -1n)) return;
    o.position = position;
    this.opts.onPosition?.(o.topic, o.partition, position);
  }
}
