/**
 * An EXPERIMENT, not the service: the gateway (SERVICE_ROLE=gateway on Kafka) composed exactly like services/compose/service.ts
 * does it — same buildApp, routes, auth, rate limits, validation, normaliser — but with the two changes to the Kafka
 * adapter that the gateway profile points at (bench/README.md), so their effect can be measured before anyone makes
 * them in services/shared/kafka:
 *  1. the envelope's Avro encoding in one pass (a literal instead of object rest/spread in toAvro, written straight
 *     into a pooled buffer with avsc's Type#encode, framed in place; no per-record Buffer.alloc/concat); the bytes are
 *     identical to AvroSerde.encode's (checked at start);
 *  2. @platformatic/kafka 2.x instead of kafkajs for the idempotent acks=all producer (compatibilityPartitioner:
 *     the same key → partition mapping as kafkajs' DefaultPartitioner).
 * Appends are group-committed like stream/kafka/log.ts (queue while a send is in flight, 1 ms linger).
 * `node dist/bench/lib/gateway-whatif.js` with the service's environment; bench/gateway.ts runs it.
 */
import avro from 'avsc';
import type { Producer } from '@platformatic/kafka';
import { platformaticProducer } from './platformatic-producer.js';
import { buildApp } from '../../services/compose/app.js';
import { ApiKeyVerifier } from '../../services/gateway/auth/api-key-verifier.js';
import { createRateLimiter } from '../../services/gateway/rate-limit.js';
import { loadConfig } from '../../services/shared/config.js';
import { openDatabase } from '../../services/shared/db/open.js';
import type { EventEnvelope } from '../../services/domain/envelope.js';
import { AvroSerde, schemaText } from '../../services/stream/kafka/serde.js';
import { normaliseEvent } from '../../services/gateway/normalise.js';
import { makeBodies } from './events.js';
import { envelopeMapping } from '../../services/stream/kafka/avro-mapping.js';
import { createLogger } from '../../services/shared/logger.js';
import { NotDurableError, type EventLogProducer, type ProducedRecord } from '../../services/stream/log.js';
import { Topics, type TopicName } from '../../services/shared/topics.js';

/** events.raw's Avro form: the service's own mapping (one literal since the what-if's change (1) landed there). */
const envelopeToAvro = (e: EventEnvelope): Record<string, unknown> => envelopeMapping.toAvro(e) as Record<string, unknown>;

/** Confluent framing + Avro body written into a shared pool; each record is a view of it (no copy). */
class PooledEncoder {
  private pool = Buffer.allocUnsafe(1 << 20);
  private pos = 0;

  constructor(
    private readonly type: avro.Type,
    private readonly schemaId: number,
  ) {}

  encode(value: unknown): Buffer {
    for (;;) {
      if (this.pool.length - this.pos < 64) this.fresh(1 << 20);
      const start = this.pos;
      this.pool[start] = 0;
      this.pool.writeInt32BE(this.schemaId, start + 1);
      const end = (this.type as unknown as { encode(v: unknown, b: Buffer, p: number): number }).encode(value, this.pool, start + 5);
      if (end < 0) {
        // Did not fit: a fresh pool large enough (end is minus the position needed).
        this.fresh(Math.max(1 << 20, -end - start + 64));
        continue;
      }
      this.pos = end;
      return this.pool.subarray(start, end);
    }
  }

  private fresh(size: number): void {
    this.pool = Buffer.allocUnsafe(size);
    this.pos = 0;
  }
}

interface Pending {
  readonly messages: Array<{ topic: string; key: Buffer; value: Buffer }>;
  state: 'queued' | 'sending' | 'settled';
  timer?: NodeJS.Timeout;
  resolve(): void;
  reject(e: Error): void;
}

class WhatIfKafkaLog implements EventLogProducer {
  private queue: Pending[] = [];
  private flushing = false;
  private flushTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly producer: Producer<Buffer, Buffer, Buffer, Buffer>,
    private readonly encoder: PooledEncoder,
  ) {}

  append(topic: TopicName, records: readonly ProducedRecord[], deadline: number): Promise<void> {
    const messages = records.map((r) => ({ topic, key: Buffer.from(r.key), value: this.encoder.encode(envelopeToAvro(r.value as EventEnvelope)) }));
    return new Promise((resolve, reject) => {
      const p: Pending = { messages, state: 'queued', resolve, reject };
      p.timer = setTimeout(() => {
        if (p.state === 'settled') return;
        if (p.state === 'queued') this.queue = this.queue.filter((q) => q !== p);
        p.state = 'settled';
        reject(new NotDurableError('the broker did not acknowledge the events before the deadline'));
      }, Math.max(0, deadline - Date.now()));
      this.queue.push(p);
      if (!this.flushing && !this.flushTimer) {
        this.flushTimer = setTimeout(() => {
          this.flushTimer = undefined;
          void this.flush();
        }, 1);
      }
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length > 0) {
        let n = 0;
        let i = 0;
        while (i < this.queue.length && (i === 0 || n + this.queue[i]!.messages.length <= 5000)) n += this.queue[i++]!.messages.length;
        const group = this.queue.splice(0, i);
        for (const p of group) p.state = 'sending';
        let err: Error | undefined;
        try {
          await this.producer.send({ messages: group.flatMap((p) => p.messages) });
        } catch (e) {
          err = new NotDurableError(`the broker did not acknowledge the events: ${(e as Error).message}`);
        }
        for (const p of group) {
          if (p.state === 'settled') continue;
          p.state = 'settled';
          clearTimeout(p.timer);
          if (err) p.reject(err);
          else p.resolve();
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  async healthy(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {
    while (this.flushing || this.queue.length > 0 || this.flushTimer) await new Promise((r) => setTimeout(r, 5));
    await this.producer.close();
  }
}

async function main(): Promise<void> {
  const config = loadConfig();
  if (!config.kafka) throw new Error('KAFKA_BROKERS is required');
  const logger = createLogger(config.logLevel, { role: 'gateway-whatif' });
  const db = await openDatabase({ databaseUrl: config.databaseUrl });
  const serde = await AvroSerde.connect(config.kafka.schemaRegistryUrl, logger);
  const type = avro.Type.forSchema(JSON.parse(schemaText(Topics.eventsRaw)) as avro.Schema);
  const encoder = new PooledEncoder(type, serde.schemaId(Topics.eventsRaw));
  // The experiment must write exactly what the service writes.
  const ctx = { workspaceId: 'ws_check', keyMode: 'live' as const, apiKeyId: 'key_check', requestId: 'r', receivedAt: Date.now() };
  for (const [i, raw] of (JSON.parse(makeBodies(1, { events: 20 })[0]!) as unknown[]).entries()) {
    const e = normaliseEvent(ctx, '2026-11-01', raw, i);
    if (!encoder.encode(envelopeToAvro(e)).equals(serde.encode(Topics.eventsRaw, e))) throw new Error('the experiment encodes differently from AvroSerde');
  }
  const producer = platformaticProducer('gateway-whatif', config.kafka.brokers);
  const log = new WhatIfKafkaLog(producer, encoder);
  const rateLimit = await createRateLimiter(config, () => undefined);
  const app = await buildApp({
    config,
    db,
    logger,
    ingest: { producer: log, verifier: new ApiKeyVerifier(db), limiter: rateLimit.limiter, runtime: 'kafka' },
  });
  await app.listen({ port: config.port, host: config.host });
  const shutdown = async () => {
    await app.close();
    await log.close();
    rateLimit.close();
    await db.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown());
  process.once('SIGINT', () => void shutdown());
}

export { envelopeToAvro, PooledEncoder };

if (process.argv[1]?.endsWith('gateway-whatif.js')) {
  main().catch((err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  });
}
