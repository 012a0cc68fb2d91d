/**
 * Producers, in the service's terms, on @platformatic/kafka (why this client: docs/decisions.md):
 *  - IdempotentProducer: acks=all; the gateway's, the dead-letter relay's and the redrive's. Sends are bounded, and
 *    the producer is rebuilt after any failed send, so one whose sequence numbers may disagree with the broker's
 *    never sends again. Keys are partitioned by murmur2 as the Java client does (partitioner.ts), so a key lands on
 *    the same partition whichever client wrote it (dedupe's state stays co-partitioned with its input).
 *  - TransactionalProducer: one per stage input partition. init() fences an older producer with the same id and
 *    aborts its open transaction; one transaction at a time; discarded after any failure.
 */
import {
  Admin,
  type Base,
  type Connection,
  FindCoordinatorKeyTypes,
  ProduceAcks,
  Producer,
  txnOffsetCommitV4,
  type MessageToProduce,
} from '@platformatic/kafka';
import type { KafkaConnection } from './client.js';
import { keyPartitioner } from './partitioner.js';
import { ServiceError } from '../errors.js';
import { withRetries } from '../retry.js';

export interface OutgoingRecord {
  readonly key: string | null;
  /** null: a tombstone (compacted topics). */
  readonly value: Buffer | null;
  /** Explicit partition (e.g. a changelog co-partitioned with its input); default: murmur2 of the key. */
  readonly partition?: number;
  readonly headers?: Readonly<Record<string, string>>;
  /** Record timestamp (epoch ms); default: the producer's clock. A stage's outputs carry their input's. */
  readonly timestamp?: number;
}

export interface TopicRecords {
  readonly topic: string;
  readonly records: readonly OutgoingRecord[];
}

/** What a transaction body may do: send records and mark a consumer group's input offset as consumed. */
export interface TransactionScope {
  send(batches: readonly TopicRecords[]): Promise<void>;
  /**
   * The group's next offsets to read on `topic` (per partition), committed with the transaction, in one request. With
   * `member` (the consumer member whose generation read the records, KIP-447) the group's coordinator refuses them once
   * the group has moved to a newer generation, so a member that lost a partition cannot commit for it; without, any
   * producer can.
   */
  sendOffsets(groupId: string, topic: string, offsets: readonly NextOffset[], member?: GroupMember): Promise<void>;
}

/** The next offset to read on a partition: the last record consumed plus one. */
export interface NextOffset {
  readonly partition: number;
  readonly next: bigint;
}

/** The offsets of `topic` as OffsetCommit and TxnOffsetCommit carry them (no leader epoch, no metadata). */
export const committedTopic = (topic: string, offsets: readonly NextOffset[]) => [
  { name: topic, partitions: offsets.map((o) => ({ partitionIndex: o.partition, committedOffset: o.next, committedLeaderEpoch: -1, committedMetadata: null })) },
];

/** A connection of `client` to the coordinator of group `groupId` (broker `nodeId`), found in the metadata of `topic`. */
export async function coordinatorConnection(client: Base, nodeId: number, topic: string, groupId: string): Promise<Connection> {
  const metadata = await client.metadata({ topics: [topic] });
  const broker = metadata.brokers.get(nodeId);
  if (!broker) throw new Error(`the coordinator of group ${groupId} (node ${nodeId}) is not in the metadata`);
  return client.connections.get(broker);
}

/** A consumer group member in one generation. */
export interface GroupMember {
  readonly memberId: string;
  readonly generationId: number;
}

export class ProducerFencedError extends ServiceError {
  constructor(message: string) {
    super(message);
  }
}

type BufferProducer = Producer<Buffer, Buffer, Buffer, Buffer>;
type ProducedMessage = MessageToProduce<Buffer, Buffer, Buffer, Buffer>;
/** The client's transaction handle (its class is not exported by the package root). */
type Transaction = Awaited<ReturnType<BufferProducer['beginTransaction']>>;

/** Kafka's answers meaning "a newer producer owns this transactional.id" (or this one may not use it any more). */
/** Whether one of the errors in the client's chain is one of these answers of Kafka's. */
const answeredWith =
  (ids: readonly string[]) =>
  (err: unknown): boolean =>
    searchable(err) && ids.some((id) => err.findBy('apiId', id));

const isFenced = answeredWith(['PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH', 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED']);

/**
 * Kafka's refusal of offsets committed in a generation the group has already left behind (ILLEGAL_GENERATION), or while
 * it rebalances (REBALANCE_IN_PROGRESS): the member's own heartbeat meets the same answer and rejoins by itself.
 */
export const refusedForGeneration = answeredWith(['ILLEGAL_GENERATION', 'REBALANCE_IN_PROGRESS']);

/** Whether the client judges a failure worth another try: none of the errors in its chain says otherwise. */
const canRetry = (err: unknown): boolean => searchable(err) && !err.findBy('canRetry', false);

/** The client's errors can be searched (with their causes) for a property's value; others cannot. */
const searchable = (err: unknown): err is { findBy(key: string, value: unknown): unknown } =>
  typeof (err as { findBy?: unknown } | null)?.findBy === 'function';

const headerMap = (headers: Readonly<Record<string, string>>): Map<Buffer, Buffer> =>
  new Map(Object.entries(headers).map(([k, v]) => [Buffer.from(k), Buffer.from(v)]));

/** The records of `batches` as @platformatic/kafka messages (header buffers built once per distinct header object). */
export function toMessages(batches: readonly TopicRecords[]): ProducedMessage[] {
  const headerCache = new Map<Readonly<Record<string, string>>, Map<Buffer, Buffer>>();
  const messages: ProducedMessage[] = [];
  for (const b of batches) {
    for (const r of b.records) {
      let headers: Map<Buffer, Buffer> | undefined;
      if (r.headers !== undefined) {
        headers = headerCache.get(r.headers);
        if (!headers) headerCache.set(r.headers, (headers = headerMap(r.headers)));
      }
      // One literal of one shape (no spreads: V8's slow path, once per record); the client reads an undefined
      // partition, headers or timestamp as absent.
      messages.push({
        topic: b.topic,
        key: r.key === null ? undefined : Buffer.from(r.key),
        // A tombstone is a record with a null value (the client writes length -1).
        value: r.value as Buffer,
        partition: r.partition,
        headers,
        timestamp: r.timestamp === undefined ? undefined : BigInt(r.timestamp),
      });
    }
  }
  return messages;
}

export interface IdempotentProducerOptions {
  readonly clientId: string;
  readonly brokers: readonly string[];
  /** Retries of one send before it fails; keeps a send from outliving its caller's deadline. */
  readonly retries?: number;
  readonly retryDelayMs?: number;
}

export class IdempotentProducer {
  private producer: BufferProducer | undefined;
  private closed = false;

  constructor(private readonly opts: IdempotentProducerOptions) {}

  /** One of the process's own producers: its client id names its role (`<client id>-<role>`), brokers as configured. */
  static forRole(connection: KafkaConnection, role: string, opts: { retries: number; retryDelayMs: number }): IdempotentProducer {
    return new IdempotentProducer({ clientId: connection.clientIdFor(role), brokers: connection.settings.brokers, ...opts });
  }

  private current(): BufferProducer {
    this.producer ??= new Producer<Buffer, Buffer, Buffer, Buffer>({
      clientId: this.opts.clientId,
      bootstrapBrokers: [...this.opts.brokers],
      idempotent: true,
      acks: ProduceAcks.ALL,
      partitioner: keyPartitioner,
      // The gateway must notice a dead broker inside its 1.5 s deadline.
      connectTimeout: 1_000,
      timeout: 10_000,
      retries: this.opts.retries ?? 2,
      retryDelay: this.opts.retryDelayMs ?? 100,
    });
    return this.producer;
  }

  /** Sends with acks=all; resolves once every record is acknowledged by the in-sync replicas. */
  async send(batches: readonly TopicRecords[]): Promise<void> {
    if (this.closed) throw new Error('producer is closed');
    const messages = toMessages(batches);
    if (messages.length === 0) return;
    const producer = this.current();
    try {
      await producer.send({ messages });
    } catch (err) {
      this.discard(producer);
      throw err;
    }
  }

  private discard(producer: BufferProducer): void {
    if (this.producer === producer) this.producer = undefined;
    producer.close(true, () => undefined);
  }

  async close(): Promise<void> {
    this.closed = true;
    const p = this.producer;
    this.producer = undefined;
    if (p) await new Promise<void>((resolve) => p.close(true, () => resolve()));
  }
}

/**
 * Payload bytes (keys, values, headers) of one topic in one send: the broker refuses a partition's record batch past
 * the topic's max.message.bytes (1 MiB by default), and one topic's bytes bound each of its partitions' batches.
 */
const MAX_SEND_BYTES = 768 * 1024;

const sizeOf = (m: ProducedMessage): number => {
  let n = 64 + (m.key?.length ?? 0) + ((m.value as Buffer | null)?.length ?? 0);
  if (m.headers instanceof Map) for (const [k, v] of m.headers) n += k.length + v.length + 8;
  return n;
};

/**
 * Messages cut into as few sends as keep every topic's bytes in a send under `maxBytes` (a message larger than that
 * goes alone in its topic's share of a send). Each topic's messages keep their order across the sends; send i holds the
 * i-th run of every topic, so a chunk writing several topics does not pay a round trip per topic's run.
 */
export function bySize(messages: readonly ProducedMessage[], maxBytes: number): ProducedMessage[][] {
  const byTopic = new Map<string, { runs: ProducedMessage[][]; bytes: number }>();
  for (const m of messages) {
    let t = byTopic.get(m.topic);
    if (!t) byTopic.set(m.topic, (t = { runs: [[]], bytes: 0 }));
    const size = sizeOf(m);
    if (t.runs.at(-1)!.length > 0 && t.bytes + size > maxBytes) {
      t.runs.push([]);
      t.bytes = 0;
    }
    t.runs.at(-1)!.push(m);
    t.bytes += size;
  }
  const sends: ProducedMessage[][] = [];
  for (const { runs } of byTopic.values()) runs.forEach((run, i) => (sends[i] ??= []).push(...run));
  return sends;
}

/**
 * One transactional.id's producer (the stage runner has one per group member). init() bumps the id's epoch, fencing
 * any older producer with the id and aborting its open transaction. Offsets go in the transaction with the member's
 * group generation (KIP-447): the group's coordinator refuses them from a member of an older generation.
 */
export class TransactionalProducer {
  private producer: BufferProducer | undefined;
  /** The transaction begun by init(). */
  private pending: Transaction | undefined;
  private broken = false;
  /** Group coordinators' node ids (TxnOffsetCommit goes to the group's coordinator). */
  private readonly coordinators = new Map<string, number>();

  constructor(
    private readonly connection: KafkaConnection,
    readonly transactionalId: string,
    private readonly opts: { transactionTimeoutMs?: number } = {},
  ) {}

  /** Connects and runs InitProducerId: older producers with this id are fenced, their open transaction aborted. */
  async init(): Promise<void> {
    if (this.producer) return;
    const p = new Producer<Buffer, Buffer, Buffer, Buffer>({
      clientId: this.connection.clientIdFor('stage'),
      bootstrapBrokers: [...this.connection.settings.brokers],
      transactionalId: this.transactionalId,
      idempotent: true,
      acks: ProduceAcks.ALL,
      // -1/-1: "a new producer for this id", which the coordinator answers with the next epoch (the client's default,
      // 0/0, asks to continue producer 0 and is refused as fenced once the id has any other producer id).
      producerId: -1n,
      producerEpoch: -1,
      // A stage writes ~5 KB per event (changelog, graph changes, conversion) of repetitive Avro: LZ4 writes a quarter
      // of the bytes for less CPU than it saves the broker (docs/decisions.md).
      compression: 'lz4',
      partitioner: keyPartitioner,
      timeout: this.opts.transactionTimeoutMs ?? 30_000,
      connectTimeout: 1_000,
      // NOTE: a transaction begun right after a commit meets CONCURRENT_TRANSACTIONS until the broker has written the
      // previous one's markers: short retries, doubling, then the runner rejoins as for any failed transaction.
      retries: 10,
      retryDelay: (_client, _op, attempt) => Math.min(10 * 2 ** (attempt - 1), 1_000),
    });
    try {
      this.pending = await p.beginTransaction();
    } catch (err) {
      p.close(true, () => undefined);
      throw isFenced(err) ? new ProducerFencedError(`${this.transactionalId} could not be initialised: ${(err as Error).message}`) : err;
    }
    this.producer = p;
  }

  private async coordinator(groupId: string): Promise<number> {
    const known = this.coordinators.get(groupId);
    if (known !== undefined) return known;
    const admin = new Admin({ clientId: this.connection.clientIdFor('stage-admin'), bootstrapBrokers: [...this.connection.settings.brokers], connectTimeout: 1_000 });
    try {
      const [found] = await admin.findCoordinator({ keyType: FindCoordinatorKeyTypes.GROUP, keys: [groupId] });
      if (!found) throw new Error(`no coordinator for group ${groupId}`);
      this.coordinators.set(groupId, found.nodeId);
      return found.nodeId;
    } finally {
      await admin.close().catch(() => undefined);
    }
  }

  /**
   * Runs `body` in one transaction and commits it. When anything fails the transaction is aborted (best effort: a
   * dead producer's transaction is aborted by the next init() with this id, or by the transaction timeout) and the
   * error is rethrown; the producer is then unusable: close it and init a new one.
   */
  async run(body: (tx: TransactionScope) => Promise<void>): Promise<void> {
    const producer = this.producer;
    if (this.broken || !producer) throw new Error(`transactional producer ${this.transactionalId} is not usable; init a new one`);
    const tx = this.pending ?? (await producer.beginTransaction());
    this.pending = undefined;
    const groups = new Set<string>();
    try {
      await body({
        async send(batches) {
          // One send is one produce request, i.e. one record batch per partition, which the broker refuses past the
          // topic's max.message.bytes (1 MiB by default): a large chunk goes in several sends of one transaction.
          for (const part of bySize(toMessages(batches), MAX_SEND_BYTES)) await tx.send({ messages: part });
        },
        sendOffsets: async (groupId, topic, offsets, member) => {
          if (offsets.length === 0) return;
          const coordinatorId = await this.coordinator(groupId);
          if (!groups.has(groupId)) {
            // The client only reads the group id of its "consumer" here (AddOffsetsToTxn).
            await tx.addConsumer({ groupId } as Parameters<Transaction['addConsumer']>[0]);
            groups.add(groupId);
          }
          await this.commitOffsets(producer, coordinatorId, groupId, topic, offsets, member);
        },
      });
      await tx.commit();
    } catch (err) {
      this.broken = true;
      this.coordinators.clear();
      await tx.abort().catch(() => undefined);
      if (isFenced(err)) throw new ProducerFencedError(`${this.transactionalId} was fenced by a newer producer: ${(err as Error).message}`);
      throw err;
    }
  }

  /**
   * TxnOffsetCommit with every partition's offset at once. The client's own addOffset sends one request per partition
   * (and merges concurrent calls into the first one's): a transaction over three partitions cost the broker three
   * requests and three appends to the group's offsets log where one does (docs/decisions.md). Retried as the client
   * retries its own (a coordinator still loading, say); a refusal (an older generation, a fenced producer) is thrown.
   */
  private async commitOffsets(
    producer: BufferProducer,
    coordinatorId: number,
    groupId: string,
    topic: string,
    offsets: readonly NextOffset[],
    member: GroupMember | undefined,
  ): Promise<void> {
    await withRetries(
      async () => {
        await txnOffsetCommitV4.api.async(
          await coordinatorConnection(producer, coordinatorId, topic, groupId),
          this.transactionalId,
          groupId,
          producer.producerId!,
          producer.producerEpoch!,
          member?.generationId ?? -1,
          member?.memberId ?? '',
          null,
          committedTopic(topic, offsets),
        );
      },
      { firstMs: 10, maxMs: 1_000, attempts: 8 },
      { retryable: canRetry },
    );
  }

  async close(): Promise<void> {
    const p = this.producer;
    this.producer = undefined;
    this.pending = undefined;
    this.broken = true;
    if (p) await new Promise<void>((resolve) => p.close(true, () => resolve()));
  }
}
