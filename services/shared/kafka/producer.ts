/**
 * Producers, in the service's terms:
 *  - IdempotentProducer: acks=all, idempotent (the gateway's and the dead-letter relay's). Its sends are bounded
 *    (a few retries, then an error), and it is rebuilt after any failed send: kafkajs rolls its sequence numbers back
 *    after a failure even when the broker did write the batch, so reusing the producer for DIFFERENT records could
 *    make the broker take them for a retry of the written batch and drop them. A fresh producer id has no history.
 *  - TransactionalProducer: one per stage input partition (transactional.id `<group>-<topic>-<partition>`). init()
 *    is InitProducerId, which fences an older producer with the same id (a zombie, or the process killed -9 before
 *    a rebalance) and completes its open transaction (abort) before returning. kafkajs allows one transaction at a
 *    time per producer, so the owner of a partition runs its batches one after the other. After any failure the
 *    producer is discarded (same sequence-number hazard).
 */
import { Partitioners, type Producer, type Transaction } from 'kafkajs';
import type { KafkaConnection } from './client.js';
import { ServiceError } from '../errors.js';

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

const toTopicMessages = (batches: readonly TopicRecords[]) =>
  batches
    .filter((b) => b.records.length > 0)
    .map((b) => ({
      topic: b.topic,
      messages: b.records.map((r) => ({
        key: r.key,
        value: r.value,
        ...(r.partition === undefined ? {} : { partition: r.partition }),
        ...(r.headers === undefined ? {} : { headers: { ...r.headers } }),
        ...(r.timestamp === undefined ? {} : { timestamp: String(r.timestamp) }),
      })),
    }));

export interface IdempotentProducerOptions {
  /** Retries of one send before it fails (kafkajs retrier); keeps a send from outliving its caller's deadline. */
  readonly retries?: number;
  readonly maxRetryTimeMs?: number;
}

export class IdempotentProducer {
  private producer: Producer | undefined;
  private connecting: Promise<Producer> | undefined;
  private closed = false;

  constructor(
    private readonly connection: KafkaConnection,
    private readonly opts: IdempotentProducerOptions = {},
  ) {}

  private async current(): Promise<Producer> {
    if (this.producer) return this.producer;
    this.connecting ??= (async () => {
      const p = this.connection.kafka.producer({
        idempotent: true,
        maxInFlightRequests: 1,
        createPartitioner: Partitioners.DefaultPartitioner,
        retry: { retries: this.opts.retries ?? 2, initialRetryTime: 100, maxRetryTime: this.opts.maxRetryTimeMs ?? 500 },
      });
      try {
        await p.connect();
      } catch (err) {
        await p.disconnect().catch(() => undefined);
        throw err;
      }
      this.producer = p;
      return p;
    })().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  /** Sends with acks=all; resolves once every record is acknowledged by the in-sync replicas. */
  async send(batches: readonly TopicRecords[]): Promise<void> {
    if (this.closed) throw new Error('producer is closed');
    const topicMessages = toTopicMessages(batches);
    if (topicMessages.length === 0) return;
    const producer = await this.current();
    try {
      await producer.sendBatch({ topicMessages, acks: -1 });
    } catch (err) {
      this.discard(producer);
      throw err;
    }
  }

  private discard(producer: Producer): void {
    if (this.producer === producer) this.producer = undefined;
    void producer.disconnect().catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closed = true;
    // A connect still retrying (broker down) is not waited for: its producer is disconnected when it settles.
    void this.connecting?.then((p) => p.disconnect()).catch(() => undefined);
    const p = this.producer;
    this.producer = undefined;
    if (p) await p.disconnect().catch(() => undefined);
  }
}

/** What a transaction body may do: send records and mark a consumer group's input offset as consumed. */
export interface TransactionScope {
  send(batches: readonly TopicRecords[]): Promise<void>;
  /** The group's next offset to read on topic/partition, committed with the transaction. */
  sendOffset(groupId: string, topic: string, partition: number, nextOffset: bigint): Promise<void>;
}

export class ProducerFencedError extends ServiceError {
  constructor(message: string) {
    super(message);
  }
}

export class TransactionalProducer {
  private producer: Producer | undefined;
  /** The transaction begun by init() (InitProducerId happens when kafkajs begins the first one). */
  private pending: Transaction | undefined;
  private broken = false;

  constructor(
    private readonly connection: KafkaConnection,
    readonly transactionalId: string,
    private readonly opts: { transactionTimeoutMs?: number } = {},
  ) {}

  /** Connects and runs InitProducerId: older producers with this id are fenced, their open transaction aborted. */
  async init(): Promise<void> {
    if (this.producer) return;
    const p = this.connection.kafka.producer({
      transactionalId: this.transactionalId,
      // NOTE: not `idempotent: true`: that makes connect() fetch a second, non-transactional producer id for nothing;
      // kafkajs sends every transactional batch idempotently anyway.
      maxInFlightRequests: 1,
      transactionTimeout: this.opts.transactionTimeoutMs ?? 30_000,
      createPartitioner: Partitioners.DefaultPartitioner,
      // NOTE: a transaction begun right after a commit meets CONCURRENT_TRANSACTIONS until the broker has written the
      // previous one's markers (a few ms). With the client's 100 ms first retry every batch after the first waited
      // 100-300 ms for it (bench/README.md, pipeline-kafka); the Java client retries this after 20 ms. Short first
      // retries, doubling, still give up only after ~2.5 s as before.
      retry: { initialRetryTime: 10, maxRetryTime: 1_000, retries: 10 },
    });
    try {
      await p.connect();
      this.pending = await p.transaction();
    } catch (err) {
      await p.disconnect().catch(() => undefined);
      throw err;
    }
    this.producer = p;
  }

  /**
   * Runs `body` in one transaction and commits it. When anything fails the transaction is aborted (best effort: a
   * dead producer's transaction is aborted by the next init() with this id, or by the transaction timeout) and the
   * error is rethrown; the producer is then unusable: close it and init a new one.
   */
  async run(body: (tx: TransactionScope) => Promise<void>): Promise<void> {
    if (this.broken || !this.producer) throw new Error(`transactional producer ${this.transactionalId} is not usable; init a new one`);
    const tx = this.pending ?? (await this.producer.transaction());
    this.pending = undefined;
    try {
      await body({
        async send(batches) {
          const topicMessages = toTopicMessages(batches);
          if (topicMessages.length > 0) await tx.sendBatch({ topicMessages, acks: -1 });
        },
        async sendOffset(groupId, topic, partition, nextOffset) {
          await tx.sendOffsets({ consumerGroupId: groupId, topics: [{ topic, partitions: [{ partition, offset: nextOffset.toString() }] }] });
        },
      });
      await tx.commit();
    } catch (err) {
      this.broken = true;
      await tx.abort().catch(() => undefined);
      const type = (err as { type?: string }).type;
      if (type === 'INVALID_PRODUCER_EPOCH' || type === 'PRODUCER_FENCED' || type === 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED') {
        throw new ProducerFencedError(`${this.transactionalId} was fenced by a newer producer: ${(err as Error).message}`);
      }
      throw err;
    }
  }

  async close(): Promise<void> {
    const p = this.producer;
    this.producer = undefined;
    this.pending = undefined;
    this.broken = true;
    if (p) await p.disconnect().catch(() => undefined);
  }
}
