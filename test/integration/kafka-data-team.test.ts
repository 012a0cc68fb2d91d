/**
 * The data-team operations on the Kafka runtime (shared broker, registry and Postgres; this file's own group prefix,
 * database and workspaces): the service in this process, the platform sandbox as the ad platform.
 *  - dead letters: a conversion the platform refused is listed and, its mapping fixed, redriven and delivered once;
 *    a stage's undecodable record on events.raw is listed under its workspace and, redriven, stays with attempts
 *    raised;
 *  - export: exactly one workspace's accepted events of a range, decoded from Avro, read from the offsets for the
 *    range's times by a reader of its own (the live groups do not move);
 *  - pipeline status: every topic per partition from the brokers, the stage groups' committed offsets per partition.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { IdempotentProducer } from '../../services/shared/kafka/producer.js';
import { PIPELINE_PARTITIONS, Topics } from '../../services/shared/topics.js';
import { webEvent } from '../helpers/factories.js';
import { webEnvelope } from '../helpers/envelopes.js';
import { envelopeKey } from '../../services/domain/envelope.js';
import { receivedBySandbox, sandboxControl } from '../helpers/forwarder-rig.js';
import { outboxEmptied } from '../helpers/outbox.js';
import { freshDatabase, infraEnv, kafkaKit, waitFor, type KafkaKit } from '../helpers/infra.js';
import { SETUP, startServiceWithSandbox, type ServiceWithSandbox } from '../helpers/service-with-sandbox.js';

const ADMIN = 'kafka-data-team-admin-token';
let kit: KafkaKit;
let database: Awaited<ReturnType<typeof freshDatabase>>;
let svc: ServiceWithSandbox;
let prefix: string;

beforeAll(async () => {
  kit = await kafkaKit(infraEnv());
  database = await freshDatabase(infraEnv().DATABASE_URL);
  prefix = `${kit.groupPrefix}dt-`;
  // The stages start at the topics' ends: other tests' records on the shared broker are not this file's.
  await kit.startStagesAtEnd(prefix);
  svc = await startServiceWithSandbox(ADMIN, {
    KAFKA_BROKERS: infraEnv().KAFKA_BROKERS,
    SCHEMA_REGISTRY_URL: infraEnv().SCHEMA_REGISTRY_URL,
    DATABASE_URL: database.url,
    KAFKA_GROUP_PREFIX: prefix,
    FORWARDER_LINGER_MS: '50',
  });
}, 120_000);
afterAll(async () => {
  await svc?.close();
  await kit?.close();
  await database?.drop();
});
afterEach(async () => {
  if (svc) await fetch(`${svc.sandbox.controlUrl}/faults`, { method: 'DELETE' });
});

const connectedWorkspace = (name: string) => svc.connectedWorkspace(name);
const send = (key: string, events: unknown[]) => svc.send(key, events);
async function letters(ws: string): Promise<any[]> {
  const r = await svc.admin.call('GET', `/admin/v1/workspaces/${ws}/dead-letters`);
  expect(r.status).toBe(200);
  return r.body.items;
}

describe('dead letters on Kafka', () => {
  it('a refused conversion is redriven after its mapping is fixed and delivered once', async () => {
    const { ws, key } = await connectedWorkspace('kdl-mapping');
    await sandboxControl(svc.sandbox, '/faults', { events: [{ code: 40002, message: 'data[0].event: event "Purchase" is not enabled for this pixel', times: 1 }] });
    const event = webEvent();
    const eventId = event.event_metadata.idempotency_key;
    await send(key, [event]);
    const letter = await waitFor('dead letter', async () => (await letters(ws)).find((l) => l.event_id === eventId), 60_000);
    expect(letter).toMatchObject({ stage: 'forwarder', topic: 'conversions.dlq', reason: 'platform_rejected', attempts: 1 });

    expect((await svc.admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, { ...SETUP, events: [{ name: 'purchase', platform_event: 'CompletePayment' }] })).status).toBe(200);
    expect(await svc.admin.call('POST', `/admin/v1/workspaces/${ws}/dead-letters/redrive`, { ids: [letter.id] })).toMatchObject({ status: 202, body: { redriven: 1 } });
    const delivered = await waitFor('delivered', async () => {
      const got = (await receivedBySandbox(svc.sandbox)).filter((e) => e.event_id === eventId);
      return got.length > 0 ? got : undefined;
    }, 30_000);
    await outboxEmptied(svc.service.db, ws); // a second delivery, if there were one, has been answered by now
    expect((await receivedBySandbox(svc.sandbox)).filter((e) => e.event_id === eventId)).toHaveLength(1);
    expect(delivered[0]!.record.event).toBe('CompletePayment');
    expect(await letters(ws)).toEqual([]);
  }, 120_000);

  it('a stage\'s undecodable record is listed under its workspace; redriven it stays, attempts raised', async () => {
    const ws = (await svc.admin.createWorkspace('kdl-stage')).id;
    const producer = new IdempotentProducer({ clientId: 'test', brokers: kit.connection.settings.brokers });
    try {
      await producer.send([{ topic: Topics.eventsRaw, records: [{ key: `${ws}:garbage`, value: Buffer.from('not avro at all') }] }]);
    } finally {
      await producer.close();
    }
    const letter = await waitFor('stage letter', async () => (await letters(ws))[0], 60_000);
    expect(letter).toMatchObject({ stage: 'dedupe', topic: 'events.dlq', reason: 'undecodable', attempts: 1 });
    const r = await svc.admin.call('POST', `/admin/v1/workspaces/${ws}/dead-letters/redrive`, { all: true });
    expect(r).toMatchObject({ status: 202, body: { redriven: 0, failed: [{ id: letter.id, error: expect.stringContaining('could not be decoded') }] } });
    expect((await letters(ws))[0]).toMatchObject({ id: letter.id, attempts: 2, status: 'dead' });
    // Another workspace cannot see or touch it.
    const other = (await svc.admin.createWorkspace('kdl-other')).id;
    expect((await svc.admin.call('GET', `/admin/v1/workspaces/${other}/dead-letters/${letter.id}`)).status).toBe(404);
    expect((await svc.admin.call('POST', `/admin/v1/workspaces/${other}/dead-letters/redrive`, { ids: [letter.id] })).status).toBe(404);
  }, 120_000);

  it('a stage letter redriven goes back through Kafka to its stage; failing there again, it returns with attempts raised', async () => {
    const ws = (await svc.admin.createWorkspace('kdl-again')).id;
    // Fits the Avro schema, and the envelope check refuses it: dedupe dead-letters it every time.
    const envelope = { ...webEnvelope({}, { workspaceId: ws, receivedAt: Date.now() }), v: 2 };
    const producer = new IdempotentProducer({ clientId: 'test', brokers: kit.connection.settings.brokers });
    try {
      await producer.send([{ topic: Topics.eventsRaw, records: [{ key: envelopeKey(envelope), value: kit.serde.encode(Topics.eventsRaw, envelope) }] }]);
    } finally {
      await producer.close();
    }
    const letter = await waitFor('stage letter', async () => (await letters(ws))[0], 60_000);
    expect(letter).toMatchObject({ stage: 'dedupe', reason: 'invalid_envelope', attempts: 1, event_id: envelope.idempotency_key });
    expect(await svc.admin.call('POST', `/admin/v1/workspaces/${ws}/dead-letters/redrive`, { ids: [letter.id] })).toMatchObject({ status: 202, body: { redriven: 1, failed: [] } });
    const again = await waitFor('back with attempts 2', async () => (await letters(ws)).find((l) => l.attempts === 2), 60_000);
    expect(again).toMatchObject({ id: letter.id, status: 'dead', reason: 'invalid_envelope' });
    expect(await letters(ws)).toHaveLength(1);
  }, 120_000);
});

describe('export on Kafka', () => {
  it('streams exactly one workspace\'s accepted events of the range, decoded from Avro, without moving the live groups', async () => {
    const { a, from, to, inRange: mine } = await svc.exportScenario(4);
    const groupsBefore = await kit.admin.committedOffsets(`${prefix}dedupe`, Topics.eventsRaw);

    const r = await fetch(`${svc.url}/admin/v1/workspaces/${a.ws}/events/export?from=${from}&to=${to}`, { headers: { authorization: `Bearer ${ADMIN}` } });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('application/x-ndjson');
    const lines = (await r.text()).trim().split('\n').map((l) => JSON.parse(l));
    // Partitions interleave: the set and the count are what is promised.
    expect(lines.map((e) => e.idempotency_key).sort()).toEqual(mine.map((e) => e.event_metadata.idempotency_key).sort());
    expect(lines.every((e) => e.workspace_id === a.ws && typeof e.payload === 'object')).toBe(true);
    expect(lines.find((e) => e.name === 'page_view')).toBeDefined();
    // The export's reader is not the dedupe group: that group's offsets only ever move forward by its own work.
    const groupsAfter = await kit.admin.committedOffsets(`${prefix}dedupe`, Topics.eventsRaw);
    for (const [p, o] of groupsBefore) expect((groupsAfter.get(p) ?? -1n) >= (o ?? -1n)).toBe(true);

    const bad = await svc.admin.call('GET', `/admin/v1/workspaces/${a.ws}/events/export?from=nope&to=${to}`);
    expect(bad.status).toBe(400);
    expect(bad.body.detail).toContain('from');
  }, 120_000);
});

describe('pipeline status on Kafka', () => {
  it('gives every topic and stage group per partition from the brokers, and dead letters per stage', async () => {
    const r = await svc.admin.call('GET', '/admin/v1/pipeline');
    expect(r.status).toBe(200);
    const s = r.body;
    expect(s.runtime).toBe('kafka');
    const raw = s.topics.find((t: any) => t.topic === Topics.eventsRaw);
    expect(raw.end_offset).toBeNull();
    expect(raw.partitions.map((p: any) => p.partition)).toEqual([...Array(PIPELINE_PARTITIONS).keys()]);
    const ends = await kit.admin.endOffsets(Topics.eventsRaw);
    for (const p of raw.partitions) {
      const broker = ends.get(p.partition)!;
      expect(BigInt(p.log_start_offset)).toBe(broker.low);
      expect(BigInt(p.end_offset)).toBeLessThanOrEqual(broker.high); // the broker only grows meanwhile
      expect(p.records).toBe(p.end_offset - p.log_start_offset);
    }
    const dedupe = s.consumers.find((c: any) => c.group === `${prefix}dedupe`);
    expect(dedupe).toMatchObject({ topic: Topics.eventsRaw, offset: null });
    expect(dedupe.partitions).toHaveLength(PIPELINE_PARTITIONS);
    const committed = await kit.admin.committedOffsets(`${prefix}dedupe`, Topics.eventsRaw);
    for (const p of dedupe.partitions) {
      expect(p.lag).toBe(p.end_offset - (p.committed_offset ?? raw.partitions[p.partition].log_start_offset));
      expect(p.committed_offset === null ? null : BigInt(p.committed_offset)).toBeLessThanOrEqual(committed.get(p.partition) ?? 0n);
    }
    expect(dedupe.lag).toBe(dedupe.partitions.reduce((n: number, p: any) => n + p.lag, 0));
    expect(s.consumers.map((c: any) => c.group).sort()).toEqual([`${prefix}dedupe`, `${prefix}enrich`, `${prefix}forwarder`, `${prefix}identity-sink`]);
    expect(s.dead_letters.map((d: any) => d.stage)).toContain('dedupe');
    expect(s.replays).toEqual([]);
  }, 60_000);
});
