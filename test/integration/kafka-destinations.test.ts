/**
 * Several destinations per workspace on the Kafka runtime (shared broker, registry and Postgres; this file's own
 * group prefix and database): the scenarios of test/helpers/several-destinations.ts.
 */
import { afterAll } from 'vitest';
import { Topics } from '../../services/shared/topics.js';
import { freshDatabase, infraEnv, kafkaKit, type KafkaKit } from '../helpers/infra.js';
import { severalDestinations } from '../helpers/several-destinations.js';

let kit: KafkaKit | undefined;
let database: Awaited<ReturnType<typeof freshDatabase>> | undefined;
afterAll(async () => {
  await kit?.close();
  await database?.drop();
});

severalDestinations({
  name: 'kafka-destinations',
  timeoutMs: 60_000,
  hangMs: 8_000,
  env: async () => {
    kit = await kafkaKit(infraEnv());
    database = await freshDatabase(infraEnv().DATABASE_URL);
    const prefix = `${kit.groupPrefix}dst-`;
    // The stages start at the topics' ends: other tests' records on the shared broker are not this file's.
    await kit.startGroupsAtEnd([
      { groupId: `${prefix}dedupe`, topic: Topics.eventsRaw },
      { groupId: `${prefix}enrich`, topic: Topics.eventsDeduped },
      { groupId: `${prefix}forwarder`, topic: Topics.conversionsReady },
      { groupId: `${prefix}identity-sink`, topic: Topics.identityChanges },
    ]);
    return {
      KAFKA_BROKERS: infraEnv().KAFKA_BROKERS,
      SCHEMA_REGISTRY_URL: infraEnv().SCHEMA_REGISTRY_URL,
      DATABASE_URL: database.url,
      KAFKA_GROUP_PREFIX: prefix,
      FORWARDER_LINGER_MS: '50',
    };
  },
});
