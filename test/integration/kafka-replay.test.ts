/**
 * Replay on the Kafka runtime: the built service on the real broker, registry and Postgres. Purchases sent before
 * forwarding was set up are dropped live; a replay reads them again from events.deduped (offsets for the range's
 * times, a consumer group of its own) and delivers them to the platform sandbox once; a second replay sends nothing;
 * the live consumer groups' offsets do not move and the replay's reader group is gone afterwards.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KafkaAdmin } from '../../services/shared/kafka/admin.js';
import { Topics } from '../../services/shared/topics.js';
import { adminClient } from '../helpers/admin-client.js';
import { newBrowser } from '../helpers/browser.js';
import { webEvent } from '../helpers/factories.js';
import { receivedBySandbox, sandboxPlatformEnv } from '../helpers/forwarder-rig.js';
import { outboxEmptied } from '../helpers/outbox.js';
import { freshDatabase, infraEnv, kafkaKit, waitFor, type KafkaKit } from '../helpers/infra.js';
import { TEST_ADMIN_TOKEN } from '../helpers/service-process.js';
import { SETUP } from '../helpers/workspaces.js';
import { startSandbox, type RunningSandbox } from '../sandbox/server.js';
import { killAll, startKafkaService } from './fixtures/processes.js';

let kit: KafkaKit;
let database: Awaited<ReturnType<typeof freshDatabase>>;
let sandbox: RunningSandbox;
let prefix: string;

beforeAll(async () => {
  kit = await kafkaKit(infraEnv());
  database = await freshDatabase(infraEnv().DATABASE_URL);
  sandbox = await startSandbox({ port: 0 });
  prefix = `${kit.groupPrefix}replay-`;
  await kit.startGroupsAtEnd([
    { groupId: `${prefix}dedupe`, topic: Topics.eventsRaw },
    { groupId: `${prefix}enrich`, topic: Topics.eventsDeduped },
    { groupId: `${prefix}forwarder`, topic: Topics.conversionsReady },
  ]);
});
afterAll(async () => {
  await killAll();
  await sandbox?.close();
  await kit?.close();
  await database?.drop();
});

describe('replay on Kafka', () => {
  it('delivers events sent before the setup once, never moving the live groups', async () => {
    const svc = await startKafkaService(infraEnv(), {
      databaseUrl: database.url,
      groupPrefix: prefix,
      extra: {
        ...sandboxPlatformEnv(sandbox),
        CREDENTIALS_KEY: randomBytes(32).toString('base64'),
        FORWARDER_LINGER_MS: '50',
      },
    });
    const admin = adminClient(svc.url, TEST_ADMIN_TOKEN);
    const ws = (await admin.createWorkspace('kafka-replay')).id;
    const key = (await admin.createKey(ws, 'live')).key;
    const from = new Date(Date.now() - 60_000).toISOString();
    const purchases = Array.from({ length: 12 }, () => webEvent());
    const ids = new Set(purchases.map((p) => p.event_metadata.idempotency_key));
    const r = await fetch(`${svc.url}/v1/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify([...purchases, webEvent({ event_name: 'page_view' })]),
    });
    expect(r.status).toBe(202);
    // Enrich dropped the 13 events live: no forwarding setup yet (counted on the Activity page).
    await waitFor('enrich dropped the purchases', async () => {
      const q = await database.db.query<{ n: unknown }>(
        `SELECT COALESCE(sum(n), 0) AS n FROM activity_counts WHERE workspace_id = $1 AND kind = 'dropped' AND key = 'no_forwarding_setup'`,
        [ws],
      );
      return Number(q.rows[0]?.n) === 13;
    });
    expect((await admin.call('PUT', `/admin/v1/workspaces/${ws}/forwarding`, { ...SETUP, test_event_code: null })).status).toBe(200);
    const connect = await admin.call('POST', `/admin/v1/workspaces/${ws}/connection`);
    expect((await newBrowser().open(connect.body.authorize_url)).status).toBe(200);
    const to = new Date(Date.now() + 60_000).toISOString();

    const kafkaAdmin = new KafkaAdmin(kit.connection);
    const liveBefore = await kafkaAdmin.committedOffsets(`${prefix}enrich`, Topics.eventsDeduped);
    const replay = async (): Promise<any> => {
      const started = await admin.call('POST', `/admin/v1/workspaces/${ws}/replays`, { from, to });
      expect(started.status).toBe(202);
      return waitFor('the replay finished', async () => {
        const j = await admin.call('GET', `/admin/v1/workspaces/${ws}/replays/${started.body.id}`);
        return ['done', 'failed', 'cancelled'].includes(j.body.status) ? j.body : undefined;
      }, 60_000);
    };
    const first = await replay();
    expect(first).toMatchObject({ status: 'done', progress: 1, events_read: 13, conversions_built: 12, conversions_sent: 12, skipped_already_sent: 0 });
    expect(first.dropped).toEqual({ not_selected: 1 });
    const got = await waitFor('the platform received the replayed purchases', async () => {
      const ev = (await receivedBySandbox(sandbox)).map((e) => e.event_id).filter((id) => ids.has(id));
      return ev.length >= 12 ? ev : undefined;
    });
    expect(new Set(got)).toEqual(ids);

    const second = await replay();
    expect(second).toMatchObject({ status: 'done', events_read: 13, conversions_sent: 0, skipped_already_sent: 12 });
    // The replay has ended and the outbox is empty: whatever either replay queued has been answered.
    await outboxEmptied(database.db, ws);
    expect((await receivedBySandbox(sandbox)).filter((e) => ids.has(e.event_id))).toHaveLength(12);

    // The live enrich group never moved for the replays (nothing new arrived for it), and no reader group is left.
    expect(await kafkaAdmin.committedOffsets(`${prefix}enrich`, Topics.eventsDeduped)).toEqual(liveBefore);
    expect((await kafkaAdmin.listGroups()).filter((g) => g.startsWith(`${prefix}replay-reader-`))).toEqual([]);
    await kafkaAdmin.close();
  });
});
