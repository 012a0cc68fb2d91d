// Run by `kafka.sh warmup` (from up.sh) once per fresh broker: makes the broker create and load its
// internal topics (__transaction_state, __consumer_offsets) and checks that a transactional,
// idempotent producer works end to end, so the first test does not pay for it (or see
// COORDINATOR_LOAD_IN_PROGRESS retries). Uses the repo's own kafkajs.
//   node infra/local/kafka-warmup.mjs <repo-root> <broker>
import { createRequire } from 'node:module';
import path from 'node:path';

const [repoRoot, broker] = process.argv.slice(2);
const require = createRequire(path.join(repoRoot, 'package.json'));
const { Kafka, logLevel } = require('kafkajs');

const kafka = new Kafka({
  clientId: 'infra-warmup',
  brokers: [broker],
  logLevel: logLevel.NOTHING,
  retry: { retries: 30, initialRetryTime: 100, maxRetryTime: 1000 },
});
const timer = setTimeout(() => {
  console.error('kafka warmup: timed out');
  process.exit(1);
}, 90_000);

const topic = '__infra_warmup';
const admin = kafka.admin();
await admin.connect();
await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor: 1 }] });

// Transactions: InitProducerId creates __transaction_state; send + commit exercises the coordinator.
const producer = kafka.producer({ transactionalId: 'infra-warmup', idempotent: true, maxInFlightRequests: 1 });
await producer.connect();
const tx = await producer.transaction();
await tx.send({ topic, messages: [{ key: 'k', value: String(Date.now()) }] });
await tx.commit();
await producer.disconnect();

// Consumer groups: FindCoordinator creates __consumer_offsets; committing an offset needs it loaded.
await admin.setOffsets({ groupId: 'infra-warmup', topic, partitions: [{ partition: 0, offset: '0' }] });
await admin.deleteTopics({ topics: [topic] }).catch(() => {});
await admin.deleteGroups(['infra-warmup']).catch(() => {});
await admin.disconnect();
clearTimeout(timer);
console.error('kafka warmup: transactions and consumer groups ok');
