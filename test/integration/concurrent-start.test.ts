/**
 * A first install as an orchestrator does it: every role (two gateway replicas) started at the same instant on a
 * fresh stack (a broker with no topics of the service, a registry with no subjects, an empty database). All of them
 * must get ready: topic creation, schema registration and migrations are safe when done by many processes at once.
 * And the registration itself, raced by many clients on one new subject, and its compatibility rule per level found.
 */
import { readdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrationsDir } from '../../services/shared/db/migrate.js';
import { KafkaAdmin } from '../../services/shared/kafka/admin.js';
import { KafkaConnection } from '../../services/shared/kafka/client.js';
import { SchemaRegistryClient, schemaText, subjectOf } from '../../services/stream/kafka/serde.js';
import { silentLogger } from '../../services/shared/logger.js';
import { TOPIC_SPECS, Topics, type TopicName } from '../../services/shared/topics.js';
import { adminClient } from '../helpers/admin-client.js';
import { webEvent } from '../helpers/factories.js';
import { freshDatabase, infraEnv, uniqueId, type InfraEnv } from '../helpers/infra.js';
import { TEST_ADMIN_TOKEN, type ServiceProcess } from '../helpers/service-process.js';
import { startOwnBroker, type OwnBroker } from './fixtures/broker.js';
import { killAll, startKafkaService } from './fixtures/processes.js';
import { startOwnRegistry, type OwnRegistry } from './fixtures/registry.js';

/** What a Compose file or a chart starts: each role once, the gateway twice. */
const ROLES = ['gateway', 'gateway', 'console', 'dedupe', 'enrich', 'forwarder', 'refresher'] as const;

let broker: OwnBroker | undefined;
let registry: OwnRegistry | undefined;
let database: Awaited<ReturnType<typeof freshDatabase>> | undefined;
let stack: InfraEnv;

beforeAll(async () => {
  [broker, registry, database] = await Promise.all([
    startOwnBroker(),
    startOwnRegistry(),
    freshDatabase(infraEnv().DATABASE_URL, { migrated: false }),
  ]);
  stack = { KAFKA_BROKERS: broker.brokers, SCHEMA_REGISTRY_URL: registry.url, DATABASE_URL: database.url };
}, 240_000);
afterAll(async () => {
  await killAll();
  await Promise.all([broker?.destroy(), registry?.destroy(), database?.drop()]);
});

describe('every role started at once on a fresh stack', () => {
  it('gets every process ready, with each topic, subject and migration made once', async () => {
    const prefix = uniqueId('it-start-');
    const started = await Promise.allSettled(
      ROLES.map((role) => startKafkaService(stack, { databaseUrl: database!.url, groupPrefix: prefix, role, readyTimeoutMs: 90_000 })),
    );
    const failures = started.flatMap((s, i) => (s.status === 'rejected' ? [`${ROLES[i]}: ${(s.reason as Error).message}`] : []));
    expect(failures).toEqual([]);
    const processes = started.map((s) => (s as PromiseFulfilledResult<ServiceProcess>).value);
    for (const p of processes) {
      expect(p.child.exitCode).toBeNull();
      expect(p.output()).not.toMatch(/already exists|schema registry: .* failed/);
    }

    const registryClient = new SchemaRegistryClient(stack.SCHEMA_REGISTRY_URL);
    for (const topic of Object.values(Topics)) {
      const versions = (await (await fetch(`${stack.SCHEMA_REGISTRY_URL}/subjects/${subjectOf(topic)}/versions`)).json()) as number[];
      expect(versions, subjectOf(topic)).toEqual([1]);
      expect(await registryClient.subjectCompatibility(subjectOf(topic))).toBe('BACKWARD');
    }

    const admin = new KafkaAdmin(new KafkaConnection({ brokers: [stack.KAFKA_BROKERS], clientId: 'it-start' }, silentLogger));
    try {
      for (const spec of TOPIC_SPECS) expect((await admin.endOffsets(spec.name)).size, spec.name).toBe(spec.partitions);
    } finally {
      await admin.close();
    }

    const files = readdirSync(migrationsDir()).filter((f) => f.endsWith('.sql')).sort();
    const applied = await database!.db.query<{ id: string }>('SELECT id FROM schema_migrations ORDER BY id');
    expect(applied.rows.map((r) => r.id)).toEqual(files);

    // The roles work together: a key made on the console is taken by both gateway replicas.
    const console_ = processes[ROLES.indexOf('console')]!;
    const client = adminClient(console_.url, TEST_ADMIN_TOKEN);
    const ws = (await client.createWorkspace('first-install')).id;
    const key = (await client.createKey(ws, 'live')).key;
    for (const gateway of processes.filter((_, i) => ROLES[i] === 'gateway')) {
      const r = await fetch(`${gateway.url}/v1/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify([webEvent()]),
      });
      expect(r.status, await r.text()).toBe(202);
    }
  }, 180_000);
});

describe('schema registration under concurrency', () => {
  const topic: TopicName = Topics.eventsRaw;

  it('gives every one of many concurrent registrations of a new subject the same id, and the subject BACKWARD', async () => {
    const subject = `${uniqueId('it-race-')}-${subjectOf(topic)}`;
    const clients = Array.from({ length: 12 }, () => new SchemaRegistryClient(stack.SCHEMA_REGISTRY_URL));
    const ids = await Promise.all(clients.map((c) => c.register(subject, schemaText(topic))));
    expect(new Set(ids).size).toBe(1);
    expect(await clients[0]!.subjectCompatibility(subject)).toBe('BACKWARD');
  });

  // A subject an operator set: stricter levels are kept, weaker ones (NONE is Apicurio's answer for "no rule") raised.
  it.each([
    ['FULL', 'FULL'],
    ['FULL_TRANSITIVE', 'FULL_TRANSITIVE'],
    ['BACKWARD_TRANSITIVE', 'BACKWARD_TRANSITIVE'],
    ['BACKWARD', 'BACKWARD'],
    ['NONE', 'BACKWARD'],
    ['FORWARD', 'BACKWARD'],
    ['FORWARD_TRANSITIVE', 'BACKWARD'],
  ])('a subject at %s is registered at %s', async (before, after) => {
    const subject = `${uniqueId('it-level-')}-${subjectOf(topic)}`;
    const call = (path: string, method: string, body: unknown) =>
      fetch(`${stack.SCHEMA_REGISTRY_URL}/${path}`, {
        method,
        headers: { 'content-type': 'application/vnd.schemaregistry.v1+json' },
        body: JSON.stringify(body),
      });
    // The subject exists (registered by hand, no rule of its own), then gets the level.
    expect((await call(`subjects/${subject}/versions`, 'POST', { schema: schemaText(topic) })).status).toBe(200);
    expect((await call(`config/${subject}`, 'PUT', { compatibility: before })).status).toBe(200);
    const client = new SchemaRegistryClient(stack.SCHEMA_REGISTRY_URL);
    await client.register(subject, schemaText(topic));
    expect(await client.subjectCompatibility(subject)).toBe(after);
  });

  describe('bad input', () => {
    it.each([
      ['a schema that is not Avro', '{"type": "no-such-type"}'],
      ['text that is not JSON', 'record {'],
    ])('refuses %s with the registry status', async (_what, schema) => {
      const client = new SchemaRegistryClient(stack.SCHEMA_REGISTRY_URL);
      await expect(client.register(`${uniqueId('it-bad-')}-value`, schema)).rejects.toMatchObject({ status: expect.any(Number) });
    });

    it('refuses a registry address that answers no registry API', async () => {
      const client = new SchemaRegistryClient(`${stack.SCHEMA_REGISTRY_URL}/no-such-prefix`);
      await expect(client.register(`${uniqueId('it-bad-')}-value`, schemaText(topic))).rejects.toMatchObject({ status: 404 });
    });
  });
});
