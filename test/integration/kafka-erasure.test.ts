/**
 * Erasure on the Kafka runtime (docs/privacy.md): the built service on the real broker, registry and Postgres (a
 * database of this file's own, its own consumer-group prefix and workspace), the platform sandbox as the ad
 * platform. The same person's conversion forwarded before and after an erasure; the erasure's removed counts on
 * Kafka (no event_log step: the topics live on the broker); the raw topic still holds the person's old envelope,
 * and the redaction list (ErasureFilter) marks it; that envelope fed to enrich again (as a replay does) is dropped
 * and re-links nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErasureFilter } from '../../services/enrich/identity/erasure-filter.js';
import type { EventEnvelope } from '../../services/domain/envelope.js';
import { IdempotentProducer } from '../../services/shared/kafka/producer.js';
import { Topics } from '../../services/shared/topics.js';
import { adminClient, type AdminClient } from '../helpers/admin-client.js';
import { newBrowser } from '../helpers/browser.js';
import { serverEvent, sha256, webEvent } from '../helpers/factories.js';
import { receivedBySandbox } from '../helpers/forwarder-rig.js';
import { sandboxServiceEnv } from '../helpers/sre-flow.js';
import { freePort } from '../sandbox/ports.js';
import { SETUP } from '../helpers/workspaces.js';
import { freshDatabase, infraEnv, kafkaKit, waitFor, type KafkaKit } from '../helpers/infra.js';
import { TEST_ADMIN_TOKEN, type ServiceProcess } from '../helpers/service-process.js';
import { startSandbox, type RunningSandbox } from '../sandbox/server.js';
import { killAll, startKafkaService } from './fixtures/processes.js';

let kit: KafkaKit;
let database: Awaited<ReturnType<typeof freshDatabase>>;
let sandbox: RunningSandbox;
let svc: ServiceProcess;
let admin: AdminClient;
let fromRaw: Map<number, bigint>;

beforeAll(async () => {
  kit = await kafkaKit(infraEnv());
  database = await freshDatabase(infraEnv().DATABASE_URL);
  sandbox = await startSandbox({ port: 0 });
  const prefix = `${kit.groupPrefix}erasure-`;
  fromRaw = await kit.ends(Topics.eventsRaw);
  await kit.startStagesAtEnd(prefix);
  svc = await startKafkaService(infraEnv(), {
    databaseUrl: database.url,
    groupPrefix: prefix,
    extra: { ...sandboxServiceEnv(sandbox, await freePort()), ERASURE_POLL_INTERVAL_MS: '100' },
  });
  admin = adminClient(svc.url, TEST_ADMIN_TOKEN);
});
afterAll(async () => {
  await killAll();
  await sandbox?.close();
  await kit?.close();
  await database?.drop();
});

async function post(key: string, events: unknown[]): Promise<void> {
  const r = await fetch(`${svc.url}/v1/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(events),
  });
  expect(r.status, await r.text()).toBe(202);
}

const forwarded = (eventId: string) =>
  waitFor(`${eventId} at the platform`, async () => (await receivedBySandbox(sandbox)).find((e) => e.event_id === eventId)?.record, 60_000);

/**
 * The graph sink has written a node (the queryable tables trail enrich's state; its changes of one graph are applied
 * in order, so what enrich emitted before is in the tables too).
 */
const sinkWrote = (what: string, sql: string, params: unknown[]) =>
  waitFor(`graph sink wrote ${what}`, async () => ((await database.db.query(sql, params)).rows.length > 0 ? true : undefined));

const NO_IDS = { user: undefined, email: undefined, phone: undefined };
const KIM = sha256('kim.kafka@example.com');

describe('erasure on Kafka', () => {
  it('forgets the person: forwarded before and after, the raw topic redacted for replays, a replayed event re-links nothing', async () => {
    const ws = (await admin.createWorkspace('kafka-erasure')).id;
    const key = (await admin.createKey(ws, 'live')).key;
    expect(
      (await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, SETUP)).status,
    ).toBe(200);
    const started = await admin.call('POST', `/admin/v1/workspaces/${ws}/connection`);
    expect((await newBrowser().open(started.body.authorize_url)).status).toBe(200);

    // Before: a web purchase links the person; a server purchase with only the user id takes the email from the graph.
    await post(key, [webEvent({
      event_data: { client_id: 'cid-kim', session_id: 'sid-kim', page_location: 'https://shop.example/?ttclid=E.C.P.kim' },
      event_metadata: { idempotency_key: 'kim-1', identifiers: { ...NO_IDS, user: 'u-kim', email: { sha256_email: KIM } } },
    })]);
    expect((await forwarded('kim-1')).user).toMatchObject({ email: [KIM], external_id: [sha256('u-kim')] });
    await post(key, [serverEvent({ event_metadata: { idempotency_key: 'kim-2', identifiers: { ...NO_IDS, user: 'u-kim' } } })]);
    expect((await forwarded('kim-2')).user).toMatchObject({ email: [KIM], ttclid: 'E.C.P.kim' });
    expect((await admin.call('GET', `/admin/v1/workspaces/${ws}/conversions/kim-2`)).body.fields).toContainEqual(
      expect.objectContaining({ field: 'user.email', sent: true, rule: 'graph_link' }),
    );

    // The erasure (once the graph sink has written what enrich linked: the tables are what the job widens from).
    await sinkWrote('the click id', `SELECT 1 FROM identity_nodes WHERE workspace_id = $1 AND kind = 'ttclid'`, [ws]);
    const r = await admin.call('POST', `/admin/v1/workspaces/${ws}/erasures`, { identifiers: { sha256_email: KIM } });
    expect(r.status).toBe(202);
    const job = await waitFor('erasure done', async () => {
      const j = await admin.call('GET', `/admin/v1/workspaces/${ws}/erasures/${r.body.id}`);
      return j.body.status === 'done' ? j.body : undefined;
    });
    expect(job.removed).toEqual({
      identity_graph: 4, // user id, email, client id, click id (a session id is no node)
      identity_links: expect.any(Number),
      outbox: 0,
      dead_letters: 0,
      why_records: 2,
      deliveries: 2, // the delivery records of the two forwarded conversions
      redaction_list: 5, // and the user id's SHA-256, as records carry it
      identity_state: 5, // the cluster's four and the request's canonical-email form, by key to the graph's partition
    });
    expect((await database.db.query('SELECT 1 FROM identity_nodes WHERE workspace_id = $1', [ws])).rows).toEqual([]);

    // After: the user id alone is new data; the email and the click id do not come back.
    await post(key, [serverEvent({ event_metadata: { idempotency_key: 'kim-3', identifiers: { ...NO_IDS, user: 'u-kim' } } })]);
    expect((await forwarded('kim-3')).user).toEqual({ external_id: [sha256('u-kim')] });

    // The raw topic cannot be rewritten: it still holds the old envelope, and the redaction list marks it.
    const raw = (await kit.read<EventEnvelope>(Topics.eventsRaw, fromRaw)).map((rec) => rec.value).filter((e) => e.workspace_id === ws);
    const old = raw.find((e) => e.idempotency_key === 'kim-1')!;
    const later = raw.find((e) => e.idempotency_key === 'kim-3')!;
    const filter = await ErasureFilter.load(database.db, ws);
    expect(filter.matches(old)).toBe(true);
    expect(filter.matches(later)).toBe(false);

    // A replay feeds the old envelope to enrich again: dropped as erased, nothing re-linked, nothing forwarded.
    const producer = new IdempotentProducer({ clientId: 'test', brokers: kit.connection.settings.brokers });
    const replayed = { ...old, idempotency_key: 'kim-1-replayed' };
    await producer.send([{ topic: Topics.eventsDeduped, records: [{ key: `${ws}:live`, value: kit.serde.encode(Topics.eventsDeduped, replayed) }] }]);
    await producer.close();
    // A marker after it on the graph's key (same partition): once it is forwarded, the replayed one was processed.
    const marker = { ...later, idempotency_key: 'kim-marker', received_at: Date.now() };
    const p2 = new IdempotentProducer({ clientId: 'test', brokers: kit.connection.settings.brokers });
    await p2.send([{ topic: Topics.eventsDeduped, records: [{ key: `${ws}:live`, value: kit.serde.encode(Topics.eventsDeduped, marker) }] }]);
    await p2.close();
    await forwarded('kim-marker');
    await sinkWrote('the marker', `SELECT 1 FROM identity_nodes WHERE workspace_id = $1 AND value = 'u-kim' AND last_seen_at >= to_timestamp($2 / 1000.0)`, [ws, marker.received_at]);
    expect((await receivedBySandbox(sandbox)).some((e) => e.event_id === 'kim-1-replayed')).toBe(false);
    const relinked = await database.db.query('SELECT kind FROM identity_nodes WHERE workspace_id = $1 AND value = ANY($2::text[])', [ws, [KIM, 'cid-kim', 'E.C.P.kim']]);
    expect(relinked.rows).toEqual([]);
  });
});
