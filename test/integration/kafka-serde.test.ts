/**
 * Avro with the real schema registry: every topic's value round-trips through its schema (deep-equal to the value
 * the producer had), every schema is registered under `<topic>-value` with BACKWARD compatibility, an evolved schema
 * (a field added with a default) is accepted and its records are read by the current consumers, an incompatible one
 * is refused, and bytes that are no record of a registered schema are reported as undecodable (poison), not thrown
 * as an outage.
 */
import { readFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import avro from 'avsc';
import pino, { type Logger } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversion } from '../helpers/forwarder-rig.js';
import type { ConversionDeadLetter } from '../../services/forwarder/outbox-repo.js';
import { AvroSerde, schemasDir, schemaText, subjectOf, UndecodableRecordError } from '../../services/stream/kafka/serde.js';
import { silentLogger } from '../../services/shared/logger.js';
import type { DeadLetter } from '../../services/stream/contract.js';
import { Topics, type TopicName } from '../../services/shared/topics.js';
import { sgtmEvent, webEvent } from '../helpers/factories.js';
import { fromA, fromB } from '../helpers/envelopes.js';
import { infraEnv, uniqueId } from '../helpers/infra.js';

let serde: AvroSerde;
const scratchSubjects: string[] = [];

beforeAll(async () => {
  serde = await AvroSerde.connect(infraEnv().SCHEMA_REGISTRY_URL, silentLogger);
});
afterAll(async () => {
  for (const s of scratchSubjects) await serde?.registry.deleteSubject(s);
});

const web = fromA(
  [
    webEvent({ event_data: { page_referrer: 'https://ref.example/', value: 12.5, items: [{ sku: 'A', qty: 2 }], nested: { deep: [null, true, 'x'] } } }),
    webEvent({ event_metadata: { identifiers: { user: undefined, email: undefined, phone: undefined } } }),
  ],
  { workspaceId: 'ws_serde', keyMode: 'test' },
);
const sgtm = fromB([sgtmEvent(), sgtmEvent({ event_name: 'sign_up' })], 'req-key', { workspaceId: 'ws_serde' });
const sgtmNoKey = fromB([sgtmEvent()], undefined, { workspaceId: 'ws_serde' });

const deadLetter: DeadLetter = {
  stage: 'dedupe',
  reason: 'processing_failed',
  error: 'boom',
  source_topic: Topics.eventsRaw,
  source_partition: 3,
  source_offset: '12345678901',
  key: 'ws:k',
  value: { any: ['json', 1, { x: null }] },
  failed_at: 1_700_000_000_123,
};
const conversionLetter: ConversionDeadLetter = {
  stage: 'forwarder',
  reason: 'platform_rejected',
  workspace_id: 'ws_serde',
  event_id: 'evt-1',
  event_source: 'WEB',
  event_source_id: 'PIXEL123',
  test_event_code: null,
  platform_code: 40002,
  platform_message: 'invalid field',
  request_id: 'req-1',
  record: conversion('ws_serde').record,
  failed_at: 1_700_000_000_456,
};

describe('every topic value round-trips through its Avro schema', () => {
  it.each<[string, TopicName, unknown]>([
    ['web envelope (A), test key, free-form payload', Topics.eventsRaw, web[0]],
    ['envelope without identifiers', Topics.eventsRaw, web[1]],
    ['envelope B with request key', Topics.eventsDeduped, sgtm[1]],
    ['envelope B without key (dedupe null, source null)', Topics.eventsDeduped, sgtmNoKey[0]],
    ['conversion with user and properties', Topics.conversionsReady, conversion('ws_serde', { record: { transaction_id: 'T-1', properties: { value: 10, currency: 'EUR' }, user: { email: ['a'.repeat(64)], external_id: ['b'.repeat(64)], ttclid: 'C', user_agent: 'UA' } } })],
    ['conversion without user, test code', Topics.conversionsReady, conversion('ws_serde', { key_mode: 'test', test_event_code: 'TEST1', record: { user: undefined } })],
    ['dedupe state, live marker', Topics.dedupeState, { v: 1, live: { first_seen: 1_700_000_000_000, request_id: 'r-1' } }],
    ['dedupe state, both markers', Topics.dedupeState, { v: 1, live: { first_seen: 1, request_id: 'a' }, test: { first_seen: 2, request_id: 'b' } }],
    ['dead letter', Topics.eventsDlq, deadLetter],
    ['conversion dead letter', Topics.conversionsDlq, conversionLetter],
  ])('%s (%s)', async (_name, topic, value) => {
    const bytes = serde.encode(topic, JSON.parse(JSON.stringify(value)));
    expect(bytes.readUInt8(0)).toBe(0);
    expect(bytes.readInt32BE(1)).toBe(serde.schemaId(topic));
    expect(await serde.decode(topic, bytes)).toStrictEqual(JSON.parse(JSON.stringify(value)));
  });

  // The store's entries come back as avsc's record objects (the changelog restores them as they are): equal in value.
  it.each<[string, unknown]>([
    ['graph state: an identifier', { cluster: 'c_1', first_seen_at: 1, last_seen_at: 2, page_location: 'https://shop.example/', user_agent: null, page_seen_at: 2 }],
    ['graph state: a cluster summary', { into: null, members: [{ kind: 'email_sha256', value: 'e'.repeat(64), first_seen_at: 1, last_seen_at: 2 }], page_with_location: null, page_any: null, ad_storage_withdrawn_at: null, ad_user_data_withdrawn_at: 3 }],
    ['graph state: a cluster summary with its few click ids', { into: null, members: [], clicks: [{ kind: 'ttclid', value: 'E.C.P.1', first_seen_at: 1, last_seen_at: 2 }], page_with_location: null, page_any: null, ad_storage_withdrawn_at: null, ad_user_data_withdrawn_at: null }],
    ["graph state: a cluster's click list", { clicks: [{ kind: 'ttclid', value: 'E.C.P.1', first_seen_at: 1, last_seen_at: 2 }] }],
    ['graph state: a claimed event id', { claimed_at: 5 }],
  ])('%s (identity.graph-state)', async (_name, value) => {
    expect(await serde.decode(Topics.identityState, serde.encode(Topics.identityState, value))).toEqual(value);
  });

  it('encodes records larger than its scratch buffer, and each result stands alone', async () => {
    const big = { ...web[0], payload: { blob: 'x'.repeat(40_000) } };
    const small = web[1];
    const a = serde.encode(Topics.eventsRaw, big);
    const b = serde.encode(Topics.eventsRaw, small);
    expect(a.length).toBeGreaterThan(40_000);
    // The second encode reused the scratch buffer: the first result must not have changed.
    expect(await serde.decode(Topics.eventsRaw, a)).toStrictEqual(JSON.parse(JSON.stringify(big)));
    expect(await serde.decode(Topics.eventsRaw, b)).toStrictEqual(JSON.parse(JSON.stringify(small)));
  });

  it('keeps a dedupe state value small (changelog bytes per key)', () => {
    const bytes = serde.encode(Topics.dedupeState, { v: 1, live: { first_seen: Date.now(), request_id: '0f6c2d1e-8a51-4c9e-b7a4-3d2f1e0a9b8c' } });
    expect(bytes.length).toBeLessThan(60);
  });
});

describe('bad input', () => {
  it.each<[string, Buffer]>([
    ['no wire format header', Buffer.from('{"json": true}')],
    ['too short', Buffer.from([0, 0, 0])],
    ['wrong magic byte', Buffer.from([1, 0, 0, 0, 1, 2, 3])],
    ['unknown schema id', Buffer.from([0, 0x7f, 0xff, 0xff, 0x00, 2, 4])],
  ])('%s → UndecodableRecordError', async (_name, bytes) => {
    await expect(serde.decode(Topics.eventsRaw, bytes)).rejects.toBeInstanceOf(UndecodableRecordError);
  });

  it('a truncated body → UndecodableRecordError', async () => {
    const bytes = serde.encode(Topics.eventsRaw, web[0]);
    await expect(serde.decode(Topics.eventsRaw, bytes.subarray(0, 20))).rejects.toBeInstanceOf(UndecodableRecordError);
  });

  it.each<[string, TopicName, unknown]>([
    ['envelope without workspace_id', Topics.eventsRaw, { ...web[0], workspace_id: undefined }],
    ['envelope with an unknown consent value', Topics.eventsRaw, { ...web[0], consent: { ...web[0]!.consent, ad_storage: 'MAYBE' } }],
    ['conversion with a string event_time', Topics.conversionsReady, { ...conversion('ws'), record: { ...conversion('ws').record, event_time: 'now' } }],
  ])('encoding %s throws', (_name, topic, value) => {
    expect(() => serde.encode(topic, value)).toThrow();
  });
});

describe('the registry', () => {
  it('holds every topic value schema under <topic>-value, as in schemas/, with BACKWARD compatibility', async () => {
    const subjects = await serde.registry.subjects();
    for (const topic of Object.values(Topics)) {
      expect(subjects).toContain(subjectOf(topic));
      const latest = await fetch(`${infraEnv().SCHEMA_REGISTRY_URL}/subjects/${subjectOf(topic)}/versions/latest`).then((r) => r.json() as Promise<{ id: number; schema: string }>);
      expect(latest.id).toBe(serde.schemaId(topic));
      expect(JSON.parse(latest.schema)).toEqual(JSON.parse(schemaText(topic)));
      const config = await fetch(`${infraEnv().SCHEMA_REGISTRY_URL}/config/${subjectOf(topic)}`).then((r) => r.json() as Promise<{ compatibilityLevel: string }>);
      expect(config.compatibilityLevel).toBe('BACKWARD');
    }
  });

  it('every topic has a schema file and every schema file is used', () => {
    const files = new Set(Object.values(Topics).map((t) => JSON.parse(schemaText(t)).name as string));
    const onDisk = readFileSync(join(schemasDir(), 'README.md'), 'utf8');
    for (const name of files) expect(onDisk).toContain(name);
  });
});

describe('BACKWARD compatibility of events.raw', () => {
  const current = JSON.parse(schemaText(Topics.eventsRaw)) as { fields: Array<Record<string, unknown>> };
  const evolved = { ...current, fields: [...current.fields, { name: 'channel', type: ['null', 'string'], default: null }] };
  const withoutDefault = { ...current, fields: [...current.fields, { name: 'channel', type: 'string' }] };
  const retyped = { ...current, fields: current.fields.map((f) => (f.name === 'index' ? { ...f, type: 'string' } : f)) };

  it('is checked against the live subject: an added field with a default passes, breaking changes do not', async () => {
    expect(await serde.registry.isCompatible(subjectOf(Topics.eventsRaw), JSON.stringify(evolved))).toBe(true);
    expect(await serde.registry.isCompatible(subjectOf(Topics.eventsRaw), JSON.stringify(withoutDefault))).toBe(false);
    expect(await serde.registry.isCompatible(subjectOf(Topics.eventsRaw), JSON.stringify(retyped))).toBe(false);
  });

  it('registers an evolved schema, refuses incompatible ones, and current consumers read the evolved records', async () => {
    const subject = `${uniqueId('it-compat-')}-${subjectOf(Topics.eventsRaw)}`;
    scratchSubjects.push(subject);
    await serde.registry.register(subject, schemaText(Topics.eventsRaw));
    const evolvedId = await serde.registry.register(subject, JSON.stringify(evolved));
    expect(evolvedId).not.toBe(serde.schemaId(Topics.eventsRaw));
    await expect(serde.registry.register(subject, JSON.stringify(withoutDefault))).rejects.toThrow();
    await expect(serde.registry.register(subject, JSON.stringify(retyped))).rejects.toThrow();

    // A producer on the evolved schema writes a record; a consumer on the current schema resolves it.
    const evolvedType = avro.Type.forSchema(evolved as avro.Schema);
    const current = serde.encode(Topics.eventsRaw, web[0]);
    const currentValue = avro.Type.forSchema(JSON.parse(schemaText(Topics.eventsRaw))).fromBuffer(current.subarray(5));
    const body = evolvedType.toBuffer({ ...currentValue, channel: 'app' });
    const header = Buffer.alloc(5);
    header.writeInt32BE(evolvedId, 1);
    expect(await serde.decode(Topics.eventsRaw, Buffer.concat([header, body]))).toEqual(web[0]);
  });
});

describe('registration at start', () => {
  /** The registry behind a TCP relay that cuts the first `cut` connections, as a registry still starting does. */
  async function flakyRelay(cut: number): Promise<{ url: string; cutSoFar(): number; close(): Promise<void> }> {
    const target = new URL(infraEnv().SCHEMA_REGISTRY_URL);
    let seen = 0;
    const open = new Set<Socket>();
    const server = createServer((client) => {
      if (seen++ < cut) return void client.destroy();
      const upstream = connect(Number(target.port), target.hostname);
      for (const s of [client, upstream]) {
        open.add(s);
        s.on('close', () => open.delete(s));
      }
      client.pipe(upstream).pipe(client);
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = new URL(target);
    url.port = String((server.address() as AddressInfo).port);
    return {
      url: url.toString().replace(/\/$/, ''),
      cutSoFar: () => Math.min(seen, cut),
      close: () =>
        new Promise<void>((resolve) => {
          for (const s of open) s.destroy();
          server.close(() => resolve());
        }),
    };
  }

  const warnings = (): { lines: Array<{ msg: string; attempt: number }>; logger: Logger } => {
    const lines: Array<{ msg: string; attempt: number }> = [];
    return { lines, logger: pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) }) };
  };

  it('waits for a registry it cannot reach yet (200 ms, then 400 ms) and then registers every schema', async () => {
    const relay = await flakyRelay(2);
    const { lines, logger } = warnings();
    try {
      const began = performance.now();
      const late = await AvroSerde.connect(relay.url, logger);
      expect(performance.now() - began).toBeGreaterThanOrEqual(600 - 2);
      expect(late.schemaId(Topics.eventsRaw)).toBe(serde.schemaId(Topics.eventsRaw));
      expect(relay.cutSoFar()).toBe(2);
      expect(lines.map((l) => [l.msg, l.attempt])).toEqual([
        [`schema registry: registering ${subjectOf(Topics.eventsRaw)} failed; retrying`, 1],
        [`schema registry: registering ${subjectOf(Topics.eventsRaw)} failed; retrying`, 2],
      ]);
    } finally {
      await relay.close();
    }
  });

  it('gives up at once on a refusal (an address that answers 404), naming the subject', async () => {
    const { lines, logger } = warnings();
    await expect(AvroSerde.connect(`${infraEnv().SCHEMA_REGISTRY_URL}/no-such-prefix`, logger)).rejects.toThrow(
      `schema registry: registering ${subjectOf(Object.values(Topics)[0]!)} failed: `,
    );
    expect(lines).toEqual([]);
  });
});
