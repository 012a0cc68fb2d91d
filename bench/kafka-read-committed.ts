/**
 * The read_committed check of the consumer decision (docs/decisions.md, "The consumers on @platformatic/kafka"), run by hand, not by `make bench`:
 * `node dist/bench/kafka-read-committed.js` (KAFKA_BROKERS from the environment or infra/local/.env's default).
 *
 * Does a client's read_committed consumer deliver records of aborted transactions? On fresh one-partition topics, a
 * transactional producer writes the cases below; then @platformatic/kafka's own consumer (its `consume()` stream) and
 * the service's GroupConsumer (the client's fetch, aborted records dropped by services/shared/kafka/read-committed.ts)
 * read each topic from the start with a fresh group, and the aborted records each delivered are counted (every one
 * is a defect). test/integration/kafka-read-committed.test.ts holds GroupConsumer to the same cases; this script tells
 * whether a new release's own filter is right (then read-committed.ts could go).
 */
import { randomUUID } from 'node:crypto';
import { Consumer, Producer, stringDeserializers, stringSerializers } from '@platformatic/kafka';
import { GroupConsumer } from '../services/shared/kafka/consumer.js';
import { KafkaConnection } from '../services/shared/kafka/client.js';
import { silentLogger } from '../services/shared/logger.js';

const brokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(',');
const PAD = 'x'.repeat(1_000);
const log = (l: string) => void process.stdout.write(`${l}\n`);

interface Step {
  readonly outcome: 'abort' | 'commit';
  readonly sends: number;
  readonly perSend: number;
}

const CASES: ReadonlyArray<{ name: string; steps: readonly Step[]; maxBytes: number }> = [
  {
    name: 'one aborted transaction of 20 batches read 16 KiB at a time (its marker in a later fetch)',
    steps: [{ outcome: 'abort', sends: 20, perSend: 10 }, { outcome: 'commit', sends: 1, perSend: 5 }],
    maxBytes: 16 * 1024,
  },
  {
    name: 'two aborted transactions of one producer in one fetch',
    steps: [{ outcome: 'abort', sends: 1, perSend: 5 }, { outcome: 'abort', sends: 1, perSend: 5 }, { outcome: 'commit', sends: 1, perSend: 5 }],
    maxBytes: 1024 * 1024,
  },
];

/** Writes the steps with one transactional producer; returns how many records were committed. */
async function write(topic: string, steps: readonly Step[]): Promise<number> {
  const producer = new Producer({
    clientId: 'read-committed-check',
    bootstrapBrokers: brokers,
    idempotent: true,
    transactionalId: `read-committed-check-${randomUUID()}`,
    serializers: stringSerializers,
    autocreateTopics: true,
  });
  let committed = 0;
  try {
    for (const [t, step] of steps.entries()) {
      const tx = await producer.beginTransaction();
      for (let s = 0; s < step.sends; s++) {
        const messages = Array.from({ length: step.perSend }, (_, i) => ({ topic, partition: 0, key: `${t}-${s}-${i}`, value: `${step.outcome}|${PAD}` }));
        await tx.send({ messages });
      }
      if (step.outcome === 'abort') await tx.abort();
      else {
        await tx.commit();
        committed += step.sends * step.perSend;
      }
    }
  } finally {
    await producer.close();
  }
  return committed;
}

/** Values' outcomes ("commit" / "abort") delivered until `committed` committed ones arrived or 10 s passed. */
async function readPlatformatic(topic: string, maxBytes: number, committed: number): Promise<string[]> {
  const consumer = new Consumer({
    clientId: 'read-committed-check',
    groupId: `read-committed-check-${randomUUID()}`,
    bootstrapBrokers: brokers,
    deserializers: stringDeserializers,
    maxBytes,
    maxBytesPerPartition: maxBytes,
    maxWaitTime: 200,
  });
  const seen: string[] = [];
  const stream = await consumer.consume({ topics: [topic], mode: 'earliest', autocommit: false });
  const timer = setTimeout(() => void stream.close(), 10_000);
  try {
    for await (const m of stream) {
      seen.push(m.value.split('|')[0]!);
      if (seen.filter((v) => v === 'commit').length >= committed) break;
    }
  } finally {
    clearTimeout(timer);
    await stream.close().catch(() => undefined);
    await consumer.close(true).catch(() => undefined);
  }
  return seen;
}

/** The service's own member (services/shared/kafka/consumer.ts), as the stages read. */
async function readService(topic: string, maxBytes: number, committed: number): Promise<string[]> {
  const seen: string[] = [];
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const consumer = new GroupConsumer(new KafkaConnection({ brokers, clientId: 'read-committed-check' }, silentLogger), {
    groupId: `read-committed-check-${randomUUID()}`,
    topics: [topic],
    maxBytesPerPartition: maxBytes,
    onAssigned: () => undefined,
    onBatch: async (batch) => {
      for (const r of batch.records) seen.push(r.value!.toString().split('|')[0]!);
      batch.resolve(batch.records.at(-1)!.offset);
      if (seen.filter((v) => v === 'commit').length >= committed) done();
    },
  });
  const timer = setTimeout(done, 10_000);
  try {
    await consumer.start();
    await finished;
  } finally {
    clearTimeout(timer);
    await consumer.stop();
  }
  return seen;
}

const aborted = (seen: readonly string[]): number => seen.filter((v) => v === 'abort').length;
let defects = 0;
for (const c of CASES) {
  const topic = `read-committed-check-${randomUUID()}`;
  const committed = await write(topic, c.steps);
  const p = await readPlatformatic(topic, c.maxBytes, committed);
  const k = await readService(topic, c.maxBytes, committed);
  defects += aborted(p) + aborted(k);
  log(c.name);
  log(`  @platformatic/kafka:  ${p.length} delivered, ${aborted(p)} of them aborted (committed: ${committed})`);
  log(`  the service's member: ${k.length} delivered, ${aborted(k)} of them aborted (committed: ${committed})`);
}
log(defects === 0 ? 'no aborted record delivered' : `${defects} aborted records delivered`);
process.exit(defects === 0 ? 0 : 1);
