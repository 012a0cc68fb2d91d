/**
 * The service's group consumer reads read_committed: no record of an aborted transaction ever reaches a stage, also
 * when the transaction spans many fetches (its abort marker comes in a later fetch than its first records) and when
 * one producer aborted several transactions that come back in one fetch. Stages abort a transaction on every failure
 * and on fencing, so a consumer that let such records through would process them twice. This is the check a Kafka
 * client must pass before it may read the service's topics (docs/decisions.md, "The consumers stay on kafkajs").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GroupConsumer } from '../../services/shared/kafka/consumer.js';
import { TransactionalProducer } from '../../services/shared/kafka/producer.js';
import { infraEnv, kafkaKit, uniqueId, type KafkaKit } from '../helpers/infra.js';

let kit: KafkaKit;
beforeAll(async () => {
  kit = await kafkaKit(infraEnv());
});
afterAll(async () => {
  await kit?.close();
});

/** One transaction: `sends` sends of `perSend` records (~1 KB each), then committed or aborted. */
interface Step {
  readonly outcome: 'commit' | 'abort';
  readonly sends: number;
  readonly perSend: number;
}

const KiB = 1024;
const PAD = 'x'.repeat(1_000);

/** Writes the steps with one transactional.id (so every transaction has the same producer id) and returns the committed values in order. */
async function write(topic: string, steps: readonly Step[]): Promise<string[]> {
  const tid = `${kit.groupPrefix}${uniqueId('rc-tid')}`;
  const committed: string[] = [];
  for (const [t, step] of steps.entries()) {
    // A producer whose transaction failed is unusable: each step inits one (same id, next epoch).
    const producer = new TransactionalProducer(kit.connection, tid);
    await producer.init();
    const values: string[] = [];
    const run = producer.run(async (tx) => {
      for (let s = 0; s < step.sends; s++) {
        const records = Array.from({ length: step.perSend }, (_, i) => {
          const value = `${step.outcome}-${t}-${s}-${i}`;
          values.push(value);
          return { key: value, value: Buffer.from(`${value}|${PAD}`), partition: 0 };
        });
        await tx.send([{ topic, records }]);
      }
      if (step.outcome === 'abort') throw new Error('aborted on purpose');
    });
    if (step.outcome === 'abort') await expect(run).rejects.toThrow('aborted on purpose');
    else {
      await run;
      committed.push(...values);
    }
    await producer.close();
  }
  return committed;
}

/** Everything the service's group consumer delivers from the topic's start to its current end. */
async function readAll(topic: string, maxBytesPerPartition: number): Promise<string[]> {
  const end = (await kit.admin.endOffsets(topic)).get(0)!.high;
  const seen: string[] = [];
  let position = 0n;
  let reachedEnd!: () => void;
  const done = new Promise<void>((resolve) => (reachedEnd = resolve));
  const groupId = kit.connection.groupId(uniqueId('rc-'));
  const consumer = new GroupConsumer(kit.connection, {
    groupId,
    topics: [topic],
    maxBytesPerPartition,
    partitionsConsumedConcurrently: 1,
    onAssigned: () => undefined,
    onBatch: async (batch) => {
      for (const r of batch.records) seen.push(r.value!.toString('utf8').split('|')[0]!);
      const last = batch.records.at(-1);
      if (last) batch.resolve(last.offset);
    },
    // Batches of markers and aborted records only never reach onBatch; the position still moves past them.
    onPosition: (_topic, _partition, next) => {
      position = next;
      if (next >= end) reachedEnd();
    },
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    await consumer.start();
    await Promise.race([
      done,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`position ${position} never reached the end ${end}; delivered ${seen.length}`)), 30_000);
      }),
    ]);
  } finally {
    clearTimeout(timer);
    await consumer.stop();
    await kit.admin.deleteGroups([groupId]);
  }
  return seen;
}

describe('read_committed: records of aborted transactions never reach a stage', () => {
  const cases: ReadonlyArray<{ name: string; steps: readonly Step[]; maxBytesPerPartition: number }> = [
    {
      name: 'an aborted transaction of 20 record batches read 16 KiB at a time (its marker in a later fetch)',
      steps: [{ outcome: 'abort', sends: 20, perSend: 10 }, { outcome: 'commit', sends: 1, perSend: 5 }],
      maxBytesPerPartition: 16 * KiB,
    },
    {
      name: 'two aborted transactions of one producer read in one fetch',
      steps: [{ outcome: 'abort', sends: 1, perSend: 5 }, { outcome: 'abort', sends: 1, perSend: 5 }, { outcome: 'commit', sends: 1, perSend: 5 }],
      maxBytesPerPartition: 1024 * KiB,
    },
    {
      name: 'an aborted transaction between two committed ones, read 16 KiB at a time',
      steps: [{ outcome: 'commit', sends: 2, perSend: 5 }, { outcome: 'abort', sends: 10, perSend: 10 }, { outcome: 'commit', sends: 2, perSend: 5 }],
      maxBytesPerPartition: 16 * KiB,
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const topic = uniqueId('it-read-committed-');
      await kit.admin.ensureTopics([{ name: topic, partitions: 1, config: {}, purpose: 'test' }]);
      const committed = await write(topic, c.steps);
      expect(await readAll(topic, c.maxBytesPerPartition)).toEqual(committed);
    });
  }

  describe('bad input: nothing committed', () => {
    it('a partition holding only aborted transactions delivers nothing, and the position still reaches its end', async () => {
      const topic = uniqueId('it-read-committed-');
      await kit.admin.ensureTopics([{ name: topic, partitions: 1, config: {}, purpose: 'test' }]);
      const committed = await write(topic, [{ outcome: 'abort', sends: 5, perSend: 10 }, { outcome: 'abort', sends: 1, perSend: 3 }]);
      expect(committed).toEqual([]);
      expect(await readAll(topic, 16 * KiB)).toEqual([]);
    });
  });
});
