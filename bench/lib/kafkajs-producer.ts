/**
 * The kafkajs idempotent producer the service used before @platformatic/kafka (services/shared/kafka/producer.ts):
 * kept here as the baseline of kafka-client (bench/lib/kafka-client-worker.ts) and kafka-reliability. Its sends are
 * bounded (a few retries, then an error), and it is rebuilt after any failed send: kafkajs rolls its sequence numbers
 * back after a failure even when the broker did write the batch.
 */
import { Kafka, logLevel, Partitioners, type Producer as KafkajsProducer } from 'kafkajs';
import type { KafkaConnection } from '../../services/shared/kafka/client.js';
import type { TopicRecords } from '../../services/shared/kafka/producer.js';

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

export interface KafkajsProducerOptions {
  /** Retries of one send before it fails (kafkajs retrier); keeps a send from outliving its caller's deadline. */
  readonly retries?: number;
  readonly maxRetryTimeMs?: number;
}

export class KafkajsIdempotentProducer {
  private producer: KafkajsProducer | undefined;
  private connecting: Promise<KafkajsProducer> | undefined;
  private closed = false;

  constructor(
    private readonly connection: KafkaConnection,
    private readonly opts: KafkajsProducerOptions = {},
  ) {}

  private async current(): Promise<KafkajsProducer> {
    if (this.producer) return this.producer;
    this.connecting ??= (async () => {
      const kafka = new Kafka({
        clientId: this.connection.clientIdFor('kafkajs'),
        brokers: [...this.connection.settings.brokers],
        connectionTimeout: 1_000,
        requestTimeout: 10_000,
        logLevel: logLevel.NOTHING,
      });
      const p = kafka.producer({
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

  private discard(producer: KafkajsProducer): void {
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

