/**
 * The idempotent acks=all producer on @platformatic/kafka: the gateway's hot path (stream/kafka/log.ts). Same contract
 * as producer.ts IdempotentProducer (kafkajs), which the dead-letter relay keeps: sends are bounded (a few short
 * retries, then an error), and the producer is rebuilt after any failed send, so a producer whose sequence numbers
 * may disagree with the broker's never sends other records. The partitioner is the Java client's (murmur2 of the
 * key), the same as kafkajs' DefaultPartitioner: a key lands on the same partition whichever client wrote it, which
 * keeps dedupe's state co-partitioned with its input.
 * Why this client: bench/results/kafka-client.json (the same records, acks=all: ~2.3× kafkajs' rate on this machine)
 * and docs/decisions.md.
 */
import { compatibilityPartitioner, ProduceAcks, Producer } from '@platformatic/kafka';
import type { OutgoingRecord, TopicRecords } from './producer.js';

export const FAST_PRODUCER_CLIENT = '@platformatic/kafka';

export interface FastProducerOptions {
  readonly clientId: string;
  readonly brokers: readonly string[];
  /** Retries of one send before it fails; keeps a send from outliving its caller's deadline. */
  readonly retries?: number;
  readonly retryDelayMs?: number;
}

type BufferProducer = Producer<Buffer, Buffer, Buffer, Buffer>;

const headersOf = (r: OutgoingRecord): Map<Buffer, Buffer> | undefined =>
  r.headers === undefined ? undefined : new Map(Object.entries(r.headers).map(([k, v]) => [Buffer.from(k), Buffer.from(v)]));

export class FastIdempotentProducer {
  private producer: BufferProducer | undefined;
  private closed = false;

  constructor(private readonly opts: FastProducerOptions) {}

  private current(): BufferProducer {
    this.producer ??= new Producer<Buffer, Buffer, Buffer, Buffer>({
      clientId: this.opts.clientId,
      bootstrapBrokers: [...this.opts.brokers],
      idempotent: true,
      acks: ProduceAcks.ALL,
      partitioner: compatibilityPartitioner,
      // The gateway must notice a dead broker inside its 1.5 s deadline (as with kafkajs, shared/kafka/client.ts).
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
    const messages = batches.flatMap((b) =>
      b.records.map((r) => ({
        topic: b.topic,
        key: r.key === null ? undefined : Buffer.from(r.key),
        value: r.value ?? undefined,
        ...(r.partition === undefined ? {} : { partition: r.partition }),
        ...(r.headers === undefined ? {} : { headers: headersOf(r) }),
      })),
    );
    if (messages.length === 0) return;
    const producer = this.current();
    try {
      await producer.send({ messages: messages as Parameters<BufferProducer['send']>[0]['messages'] });
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
    if (p) await p.close().catch(() => undefined);
  }
}
