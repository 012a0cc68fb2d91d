// Run by `kafka.sh warmup` (from up.sh) once per fresh broker: makes the broker create and load its
// internal topics (__transaction_state, __consumer_offsets) and checks that a transactional,
// idempotent producer works end to end, so the first test does not pay for it (or see
// COORDINATOR_LOAD_IN_PROGRESS retries). Uses the repo's own Kafka client (@platformatic/kafka).
//   node infra/local/kafka-warmup.mjs <repo-root> <broker>
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [repoRoot, broker] = process.argv.slice(2);
const { Admin, Producer, ProduceAcks, stringSerializers } = await import(
  pathToFileURL(path.join(repoRoot, 'node_modules', '@platformatic', 'kafka', 'dist', 'index.js')).href
);

const timer = setTimeout(() => {
  console.error('kafka warmup: timed out');
  process.exit(1);
}, 90_000);
const common = { bootstrapBrokers: [broker], retries: 30, retryDelay: 500 };

const topic = '__infra_warmup';
const admin = new Admin({ clientId: 'infra-warmup', ...common });
try {
  await admin.createTopics({ topics: [topic], partitions: 1, replicas: 1 });
} catch (err) {
  if (!String(err?.message).includes('already exists') && !JSON.stringify(err?.errors ?? []).includes('TOPIC_ALREADY_EXISTS')) throw err;
}

// Transactions: InitProducerId creates __transaction_state; send + commit exercises the coordinator.
const producer = new Producer({
  clientId: 'infra-warmup',
  ...common,
  transactionalId: 'infra-warmup',
  idempotent: true,
  acks: ProduceAcks.ALL,
  producerId: -1n,
  producerEpoch: -1,
  serializers: stringSerializers,
});
const tx = await producer.beginTransaction();
await tx.send({ messages: [{ topic, key: 'k', value: String(Date.now()) }] });
await tx.commit();
await producer.close();

// Consumer groups: FindCoordinator creates __consumer_offsets; committing an offset needs it loaded.
await admin.alterConsumerGroupOffsets({ groupId: 'infra-warmup', topics: [{ name: topic, partitionOffsets: [{ partition: 0, offset: 0n }] }] });
await admin.deleteTopics({ topics: [topic] }).catch(() => {});
await admin.deleteGroups({ groups: ['infra-warmup'] }).catch(() => {});
await admin.close();
clearTimeout(timer);
console.error('kafka warmup: transactions and consumer groups ok');
