/**
 * One Kafka client's produce run, in its own process (pinned like the service): `node kafka-client-worker.js
 * <spec.json>`, result JSON to spec.out.
 *
 * Both clients send the same records (Avro-encoded envelopes of the gateway bench's events, Confluent wire format,
 * keyed `workspace:idempotency-key`) in batches of `batch` records, one send in flight at a time (as the gateway's
 * log does), idempotent, acks=-1 (all in-sync replicas), to the same topic; partitions by the key with Kafka's
 * murmur2 (kafkajs' DefaultPartitioner; @platformatic/kafka's compatibilityPartitioner computes the same).
 *  - kafkajs: through the adapter the gateway used before (KafkaConnection + bench/lib/kafkajs-producer.ts), with
 *    the same retry settings;
 *  - @platformatic/kafka 2.x: its Producer with the same settings.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import avro from 'avsc';
import { platformaticProducer } from './platformatic-producer.js';
import { normaliseEvent } from '../../services/gateway/normalise.js';
import { KafkaConnection } from '../../services/shared/kafka/client.js';
import { KafkajsIdempotentProducer } from './kafkajs-producer.js';
import { envelopeMapping } from '../../services/stream/kafka/avro-mapping.js';
import { silentLogger } from '../../services/shared/logger.js';
import { schemaText } from '../../services/stream/kafka/serde.js';
import { Topics } from '../../services/shared/topics.js';
import { makeBodies } from './events.js';
import { percentile } from './load-worker.js';

export interface ClientSpec {
  readonly client: 'kafkajs' | 'platformatic';
  readonly brokers: string[];
  readonly topic: string;
  readonly batch: number;
  readonly warmupSec: number;
  readonly durationSec: number;
  readonly out: string;
}

export interface ClientResult {
  readonly client: string;
  readonly batch: number;
  readonly records: number;
  readonly bytes: number;
  readonly durationSec: number;
  readonly recordsPerSec: number;
  readonly mbPerSec: number;
  /** CPU time (user + system) of this process per record produced. */
  readonly cpuUsPerRecord: number;
  readonly sendMs: { readonly p50: number; readonly p99: number };
  readonly errors: number;
  /** Every record acknowledged, warm-up included (the topic's end offsets must grow by exactly this). */
  readonly acknowledged: number;
}

/** The gateway's records: ~900-byte Avro envelopes, Confluent framing (schema id 1). */
function records(n: number): Array<{ key: string; value: Buffer }> {
  const type = avro.Type.forSchema(JSON.parse(schemaText(Topics.eventsRaw)) as avro.Schema);
  const ctx = { workspaceId: 'ws_Bench0123456789', keyMode: 'live' as const, apiKeyId: 'key_Bench0123456789', requestId: '8b0f6e2a-3c1d-4e5f-8a9b-0c1d2e3f4a5b', receivedAt: Date.now() };
  const out: Array<{ key: string; value: Buffer }> = [];
  for (const body of makeBodies(Math.ceil(n / 100), { events: 100 }, 99)) {
    (JSON.parse(body) as unknown[]).forEach((raw, i) => {
      const e = normaliseEvent(ctx, '2026-11-01', raw, i);
      const avroBody = type.toBuffer(envelopeMapping.toAvro(e));
      const header = Buffer.from([0, 0, 0, 0, 1]);
      out.push({ key: `${e.workspace_id}:${e.idempotency_key}`, value: Buffer.concat([header, avroBody]) });
    });
  }
  return out.slice(0, n);
}

interface Sender {
  send(batch: ReadonlyArray<{ key: string; value: Buffer }>): Promise<void>;
  close(): Promise<void>;
}

async function kafkajsSender(spec: ClientSpec): Promise<Sender> {
  const connection = new KafkaConnection({ brokers: spec.brokers, clientId: 'bench-kafkajs' }, silentLogger);
  // The gateway's settings (services/stream/kafka/log.ts).
  const producer = new KafkajsIdempotentProducer(connection, { retries: 2, maxRetryTimeMs: 300 });
  return {
    send: (batch) => producer.send([{ topic: spec.topic, records: batch }]),
    close: () => producer.close(),
  };
}

async function platformaticSender(spec: ClientSpec): Promise<Sender> {
  const producer = platformaticProducer('bench-platformatic', spec.brokers);
  return {
    async send(batch) {
      await producer.send({ messages: batch.map((r) => ({ topic: spec.topic, key: Buffer.from(r.key), value: r.value })) });
    },
    close: () => producer.close(),
  };
}

async function main(): Promise<void> {
  const spec = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as ClientSpec;
  const pool = records(20_000);
  const sender = spec.client === 'kafkajs' ? await kafkajsSender(spec) : await platformaticSender(spec);
  let at = 0;
  const nextBatch = () => {
    if (at + spec.batch > pool.length) at = 0;
    const b = pool.slice(at, at + spec.batch);
    at += spec.batch;
    return b;
  };
  const warmEnd = Date.now() + spec.warmupSec * 1000;
  let acknowledged = 0;
  while (Date.now() < warmEnd) {
    await sender.send(nextBatch());
    acknowledged += spec.batch;
  }

  const lat: number[] = [];
  let n = 0;
  let bytes = 0;
  let errors = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + spec.durationSec * 1000;
  while (performance.now() < end) {
    const b = nextBatch();
    const s = performance.now();
    try {
      await sender.send(b);
      lat.push(performance.now() - s);
      n += b.length;
      acknowledged += b.length;
      for (const r of b) bytes += r.value.length + r.key.length;
    } catch {
      errors++;
    }
  }
  const durationSec = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  await sender.close();
  const sorted = Float64Array.from(lat).sort();
  const result: ClientResult = {
    client: spec.client,
    batch: spec.batch,
    records: n,
    bytes,
    durationSec,
    recordsPerSec: n / durationSec,
    mbPerSec: bytes / durationSec / 1e6,
    cpuUsPerRecord: (cpu.user + cpu.system) / n,
    sendMs: { p50: percentile(sorted, 50), p99: percentile(sorted, 99) },
    errors,
    acknowledged,
  };
  writeFileSync(spec.out, JSON.stringify(result));
}

if (process.argv[1]?.endsWith('kafka-client-worker.js')) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`kafka client worker failed: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
