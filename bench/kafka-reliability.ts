/**
 * The reliability half of the kafka-client decision (docs/decisions.md), run by hand, not by `make bench` (it
 * kills a broker): `node dist/bench/kafka-reliability.js`.
 *
 * On a PRIVATE single-node broker (its own run dir and ports, started here with infra/local/kafka.sh, so the shared
 * broker other work uses is never touched), for each client (the kafkajs adapter, @platformatic/kafka 2.x), with the
 * gateway's settings (idempotent, acks=-1, a few bounded retries, one send in flight):
 *  1. produce numbered records in batches of 50 for a few seconds;
 *  2. kill -9 the broker, keep producing (sends fail: counted, never retried by the caller, like a 503), restart it;
 *  3. keep producing until the client has recovered and sent for a few more seconds;
 *  4. read the topic back and check: every acknowledged record is there exactly once (no loss, no duplicate);
 *     failed sends may or may not have been written (at most once each); and how long the client took to recover.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { platformaticProducer } from './lib/platformatic-producer.js';
import { Kafka, logLevel } from 'kafkajs';
import { KafkaConnection } from '../services/shared/kafka/client.js';
import { KafkajsIdempotentProducer } from './lib/kafkajs-producer.js';
import { silentLogger } from '../services/shared/logger.js';
import { REPO_ROOT, sleep } from './lib/proc.js';

const PORT = Number(process.env.REL_KAFKA_PORT ?? 29092);
const BROKER = `127.0.0.1:${PORT}`;
const RUN_DIR = mkdtempSync(join(tmpdir(), 'bench-rel-kafka-'));
const env = { ...process.env, INFRA_RUN_DIR: RUN_DIR, KAFKA_PORT: String(PORT), KAFKA_CONTROLLER_PORT: String(PORT + 1), KAFKA_HEAP_OPTS: '-Xms128m -Xmx384m' };
const log = (l: string) => void process.stdout.write(`${l}\n`);

function kafkaSh(cmd: string): void {
  const r = spawnSync('bash', [join(REPO_ROOT, 'infra', 'local', 'kafka.sh'), cmd], { env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`kafka.sh ${cmd} failed: ${r.stderr}`);
}

function killBroker(): void {
  const pid = Number(readFileSync(join(RUN_DIR, 'kafka', 'kafka.pid'), 'utf8').trim());
  process.kill(pid, 'SIGKILL');
  // Wait for the process to be gone (its port closes).
  for (let i = 0; i < 100; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    spawnSync('sleep', ['0.1']);
  }
}

interface Sender {
  send(records: Array<{ key: string; value: Buffer }>): Promise<void>;
  close(): Promise<void>;
}

function kafkajsSender(topic: string): Sender {
  const producer = new KafkajsIdempotentProducer(new KafkaConnection({ brokers: [BROKER], clientId: 'rel-kafkajs' }, silentLogger), { retries: 2, maxRetryTimeMs: 300 });
  return { send: (records) => producer.send([{ topic, records }]), close: () => producer.close() };
}

function platformaticSender(topic: string): Sender {
  const producer = platformaticProducer('rel-platformatic', [BROKER]);
  return {
    async send(records) {
      await producer.send({ messages: records.map((r) => ({ topic, key: Buffer.from(r.key), value: r.value })) });
    },
    close: () => producer.close(),
  };
}

async function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<T>((_, rej) => (timer = setTimeout(() => rej(new Error(`timed out after ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

async function readAll(topic: string): Promise<Map<number, number>> {
  const kafka = new Kafka({ brokers: [BROKER], clientId: 'rel-reader', logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(topic);
  await admin.disconnect();
  const remaining = new Map(ends.map((e) => [e.partition, BigInt(e.high)]));
  const counts = new Map<number, number>();
  const consumer = kafka.consumer({ groupId: `rel-reader-${Date.now()}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await new Promise<void>((resolve) => {
    const done = () => [...remaining.values()].every((v) => v === 0n);
    if (done()) resolve();
    void consumer.run({
      eachMessage: async ({ partition, message }) => {
        const seq = Number(message.value!.toString());
        counts.set(seq, (counts.get(seq) ?? 0) + 1);
        if (BigInt(message.offset) + 1n >= BigInt(ends.find((e) => e.partition === partition)!.high)) remaining.set(partition, 0n);
        if (done()) resolve();
      },
    });
  });
  await consumer.disconnect();
  return counts;
}

async function scenario(client: 'kafkajs' | 'platformatic'): Promise<Record<string, unknown>> {
  const topic = `rel-${client}-${Date.now()}`;
  const kafka = new Kafka({ brokers: [BROKER], clientId: 'rel-admin', logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true });
  await admin.disconnect();

  const sender = client === 'kafkajs' ? kafkajsSender(topic) : platformaticSender(topic);
  let seq = 0;
  const acked: number[] = [];
  const failed: number[] = [];
  let failures = 0;
  let stop = false;
  let brokerBackAt = 0;
  let firstAckAfterBack = 0;
  const loop = (async () => {
    while (!stop) {
      const batch = Array.from({ length: 50 }, () => {
        const n = seq++;
        return { key: `k-${n % 997}`, value: Buffer.from(String(n)) };
      });
      try {
        // A send that hangs past the gateway's deadline counts as failed (the caller would have answered 503).
        await withTimeout(sender.send(batch), 1_500);
        for (const r of batch) acked.push(Number(r.value.toString()));
        if (brokerBackAt && !firstAckAfterBack) firstAckAfterBack = Date.now();
      } catch {
        failures++;
        for (const r of batch) failed.push(Number(r.value.toString()));
        await sleep(50);
      }
    }
  })();
  await sleep(4_000);
  log(`  ${client}: kill -9 the broker`);
  killBroker();
  await sleep(6_000);
  kafkaSh('start');
  brokerBackAt = Date.now();
  log(`  ${client}: broker back`);
  await sleep(10_000);
  stop = true;
  await loop;
  await withTimeout(sender.close(), 10_000).catch(() => undefined);

  const counts = await readAll(topic);
  const lost = acked.filter((n) => !counts.has(n)).length;
  const duplicatedAcked = acked.filter((n) => (counts.get(n) ?? 0) > 1).length;
  const failedWritten = failed.filter((n) => counts.has(n)).length;
  const duplicatedFailed = failed.filter((n) => (counts.get(n) ?? 0) > 1).length;
  const result = {
    client,
    records_sent: seq,
    acked: acked.length,
    failed_sends: failures,
    failed_records: failed.length,
    lost_acked: lost,
    duplicated_acked: duplicatedAcked,
    failed_but_written: failedWritten,
    duplicated_failed: duplicatedFailed,
    recovery_ms: firstAckAfterBack ? firstAckAfterBack - brokerBackAt : null,
  };
  log(`  ${JSON.stringify(result)}`);
  return result;
}

async function main(): Promise<void> {
  log(`private broker on ${BROKER} (run dir ${RUN_DIR})`);
  kafkaSh('start');
  try {
    for (const client of ['kafkajs', 'platformatic'] as const) await scenario(client);
  } finally {
    try {
      kafkaSh('stop');
    } catch (err) {
      log(String(err));
    }
    rmSync(RUN_DIR, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    try {
      kafkaSh('stop');
    } catch {
      // already down
    }
    process.exit(1);
  },
);
